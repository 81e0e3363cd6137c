"""`ProctorEnv` in SkyRL-gym 0.4: environments made by `skyrl_gym.make("proctor", ...)` as
SkyRL's generator makes them, stepped by a scripted policy against a live server, from several
threads at once as the generator steps them; a sample Proctor did not judge raises."""

from __future__ import annotations

import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import skyrl_gym

from proctor_client.skyrl import ENV_ID, ProctorEnv, UnjudgedSample
from tests.helpers import Server

# SkyRL rows (`data_source`, `prompt`, `env_class`, `reward_spec`), each with the response a
# scripted policy gives and the reward it must get.
ROWS: list[tuple[dict[str, Any], str, float]] = [
    (
        {"data_source": "openai/gsm8k", "reward_spec": {"method": "rule", "ground_truth": "72"}},
        "48 + 24 = 72\n#### 72",  # GSM8K's own format, as SkyRL's gsm8k env reads it
        1.0,
    ),
    (
        {"data_source": "openai/gsm8k", "reward_spec": {"method": "rule", "ground_truth": "72"}},
        "#### 70",
        0.0,
    ),
    (
        {"data_source": "mine", "reward_spec": {"domain": "stem", "ground_truth": json.dumps(
            {"answer": "B", "choices": ["x", "y"]})}},
        "Answer: B",
        1.0,
    ),
    (
        {"data_source": "codecontests", "reward_spec": {"ground_truth": json.dumps(
            {"inputs": ["1 2\n", "3 4\n"], "outputs": ["3\n", "7\n"]})}},
        "```python\na, b = map(int, input().split())\nprint(a + b)\n```",
        1.0,
    ),
]  # fmt: skip


def _episode(url: str, row: dict[str, Any], response: str) -> tuple[dict[str, Any], Any]:
    env = skyrl_gym.make(
        ENV_ID, env_config={"url": url}, extras={**row, "env_class": ENV_ID, "prompt": []}
    )
    assert isinstance(env, ProctorEnv)
    prompt = [{"role": "user", "content": "solve it"}]
    observation, _ = env.init(prompt)
    assert observation == prompt
    step = env.step(response)  # the scripted policy's answer to `observation`
    metrics = env.get_metrics()
    env.close()
    return dict(step), metrics


def test_scripted_episodes_score_through_proctor(server: Server) -> None:
    with ThreadPoolExecutor(4) as pool:
        done = list(pool.map(lambda r: _episode(server.url, r[0], r[1]), ROWS))
    for (step, metrics), (_, _, reward) in zip(done, ROWS, strict=True):
        assert step["reward"] == reward, step
        assert step["done"] is True and step["observations"] == []
        assert step["metadata"]["proctor"]["status"] == "ok"
        assert metrics["proctor_success"] == float(reward == 1.0)
        assert metrics["proctor_parsed"] == 1.0


def test_a_row_without_a_ground_truth_is_refused(server: Server) -> None:
    with pytest.raises(ValueError, match="ground_truth"):
        ProctorEnv({"url": server.url}, {"reward_spec": {"method": "rule"}})


def test_an_unjudged_sample_raises_not_zero(make_server: Callable[..., Server]) -> None:
    # One worker, four 0.8 s items, a 2 s deadline: the last ones are not reached.
    srv = make_server(
        registry="tests.pool_scorers:registry",
        workers=1,
        chunk_size=1,
        item_timeout_s=2.0,
        request_deadline_s=2.0,
    )

    def episode(n: int) -> float | BaseException:
        env = ProctorEnv(
            {"url": srv.url, "default_domain": "sleep", "infra_retries": 0},
            {"reward_spec": {"ground_truth": {"seconds": 0.8, "n": n}}},
        )
        try:
            return float(env.step("ok")["reward"])
        except UnjudgedSample as exc:
            return exc

    with ThreadPoolExecutor(4) as pool:
        outcomes = list(pool.map(episode, range(4)))
    unjudged = [o for o in outcomes if isinstance(o, UnjudgedSample)]
    assert unjudged  # 3.2 s of work for one worker: not all of it fits in 2 s
    assert all(o == 1.0 for o in outcomes if not isinstance(o, BaseException))
    assert all("SkyRL cannot leave it out" in str(o) for o in unjudged)
