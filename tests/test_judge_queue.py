"""The judge domain in queue mode: a `proctor worker` (its settings from the environment, as an
operator gives them) calls the scripted judge from its worker processes, and the API's judge
hash carries the endpoint's models, read from its own settings."""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx
import pytest

from reward_specs.judge import Endpoint
from reward_specs.judge.client import models_digest
from tests.helpers import Server
from tests.redis_fixtures import RedisServer, Worker
from tests.scripted_judge import scripted_judge

pytestmark = pytest.mark.redis

SPEC = "free-form-judge-1"
REFERENCE = {"question": "Which gas do plants take in?", "answer": "carbon dioxide"}


def test_a_queue_worker_calls_the_judge(
    redis_server: RedisServer,
    start_worker: Callable[..., Worker],
    make_server: Callable[..., Server],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with scripted_judge() as judge:
        monkeypatch.setenv("PROCTOR_JUDGE_ENDPOINTS", json.dumps({"judge": {"url": judge.url}}))
        start_worker(redis_server.url, registry=None)
        api = make_server(
            queue_url=redis_server.url,
            workers=1,
            judge_endpoints={"judge": Endpoint(url=judge.url)},
        )
        items = [
            {"domain": "judge", "response": f"\\boxed{{{a}}}", "reference": REFERENCE}
            for a in ("carbon dioxide", "oxygen")
        ]
        response = httpx.post(
            api.url + "/v1/score", json={"items": items, "spec": SPEC}, timeout=120
        )
        specs = httpx.get(api.url + "/v1/specs", timeout=30).json()
    assert response.status_code == 200, response.text
    assert [r["reward"] for r in response.json()["results"]] == [1.0, 0.0]
    assert len(judge.asked) == 4
    assert specs["environments"]["judge"] == models_digest({"judge": judge.models})
