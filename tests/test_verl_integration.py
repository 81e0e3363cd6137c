"""Proctor's verl `compute_score`: through verl 0.9's own reward loop (`NaiveRewardManager`, in
the separate venv tests/run builds, since verl pins transformers<5.11), and its infra-error policy
against a live server: a sample Proctor did not judge raises, never scores 0."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from proctor_client import ProctorClient, ScoreItem
from proctor_client.verl import UnjudgedSample, aclose, compute_score, domain_of
from tests.helpers import Server

ROOT = Path(__file__).parent.parent
VERL_PYTHON = Path(os.environ.get("PROCTOR_VERL_PYTHON", "/opt/proctor-verl/bin/python"))

SAMPLES = [
    {"prompt": "what is 1 plus 1 ?", "response": "so \\boxed{2}", "data_source": "openai/gsm8k",
     "ground_truth": "2"},
    {"prompt": "what is 1 plus 1 ?", "response": "so \\boxed{3}", "data_source": "my_math",
     "ground_truth": "2"},
    {"prompt": "pick one", "response": "the answer is B", "data_source": "stem",
     "ground_truth": json.dumps({"answer": "B", "choices": ["x", "y"]})},
    {"prompt": "solve it", "response": "done", "data_source": "puzzle",
     "ground_truth": {"task": "no_such_task", "entry": {"question": "q", "answer": "a"}}},
    {"prompt": "how many clips ?", "response": "so #### 72", "data_source": "openai/gsm8k",
     "ground_truth": "72"},
]  # fmt: skip


def test_verl_reward_loop_scores_through_proctor(server: Server) -> None:
    if not VERL_PYTHON.exists():
        pytest.skip(f"no verl environment at {VERL_PYTHON} (tests/run builds it)")
    done = subprocess.run(
        [str(VERL_PYTHON), str(ROOT / "tests" / "verl_reward_loop.py"), server.url,
         json.dumps(SAMPLES)],
        env={**os.environ, "PYTHONPATH": str(ROOT / "clients")},
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    outcomes = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert len(outcomes) == 5, done.stdout
    with ProctorClient(server.url) as direct:
        expected = direct.score(
            [
                ScoreItem(domain="math", response="so \\boxed{2}", reference={"answer": "2"}),
                ScoreItem(domain="math", response="so \\boxed{3}", reference={"answer": "2"}),
                ScoreItem(
                    domain="stem",
                    response="the answer is B",
                    reference={"answer": "B", "choices": ["x", "y"]},
                ),
            ]
        )
    for outcome, result in zip(outcomes[:3], expected, strict=True):
        assert outcome["reward_score"] == result.reward
        info = outcome["reward_extra_info"]
        assert info["proctor_parsed"] == float(bool(result.parsed))
        assert info["proctor_success"] == float(bool(result.success))
    assert [o["reward_score"] for o in outcomes[:3]] == [1.0, 0.0, 1.0]
    # An unknown puzzle task is `invalid`: verl gets an exception, not a number.
    assert outcomes[3]["error"] == "UnjudgedSample"
    assert "invalid" in outcomes[3]["message"]
    # GSM8K's own `#### 72`, as verl's gsm8k reward reads it: the data source sets the format.
    assert outcomes[4]["reward_score"] == 1.0
    assert outcomes[4]["reward_extra_info"]["proctor_parsed"] == 1.0


def test_a_sample_not_judged_by_the_deadline_raises(make_server: Callable[..., Server]) -> None:
    # One worker, four 0.8 s items, a 2 s deadline: the last ones are not reached.
    srv = make_server(
        registry="tests.pool_scorers:registry",
        workers=1,
        chunk_size=1,
        item_timeout_s=2.0,
        request_deadline_s=2.0,
    )

    async def run() -> list[Any]:
        calls = [
            compute_score("slow", "ok", {"seconds": 0.8, "n": i}, url=srv.url,
                          default_domain="sleep", infra_retries=0)
            for i in range(4)
        ]  # fmt: skip
        try:
            return await asyncio.gather(*calls, return_exceptions=True)
        finally:
            await aclose()

    outcomes = asyncio.run(run())
    judged = [o for o in outcomes if isinstance(o, dict)]
    unjudged = [o for o in outcomes if isinstance(o, UnjudgedSample)]
    assert len(judged) + len(unjudged) == 4
    assert unjudged  # 3.2 s of work for one worker: not all of it fits in 2 s
    assert all(o["score"] == 1.0 for o in judged)
    assert all("deadline_exceeded" in str(o) for o in unjudged)


def test_retries_rescue_a_sample_first_left_unjudged(make_server: Callable[..., Server]) -> None:
    srv = make_server(
        registry="tests.pool_scorers:registry",
        workers=1,
        chunk_size=1,
        item_timeout_s=2.0,
        request_deadline_s=2.0,
    )

    async def run() -> list[Any]:
        calls = [
            compute_score("slow", "ok", {"seconds": 0.8, "n": i}, url=srv.url,
                          default_domain="sleep", infra_retries=3)
            for i in range(3)
        ]  # fmt: skip
        try:
            return await asyncio.gather(*calls)
        finally:
            await aclose()

    assert [o["score"] for o in asyncio.run(run())] == [1.0, 1.0, 1.0]


def test_data_source_mapping() -> None:
    assert domain_of("openai/gsm8k", None, None) == "math"
    assert domain_of("code", None, None) == "code"
    assert domain_of("mine", {"mine": "puzzle"}, None) == "puzzle"
    assert domain_of("other", None, "stem") == "stem"
    with pytest.raises(ValueError, match=r"reward_kwargs\.domains"):
        domain_of("other", None, None)


def test_the_verl_module_needs_no_verl() -> None:
    probe = "import sys, proctor_client.verl; assert 'verl' not in sys.modules"
    subprocess.run([sys.executable, "-c", probe], check=True, timeout=60)
