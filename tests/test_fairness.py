"""Fair scheduling with two API keys, on a real `proctor serve` (embedded) and in queue mode (a
real redis-server and two real `proctor worker`s): while client A's 16,384-item code batch runs
(every item sleeps past the sandbox's wall cap, far more than fits in the deadline), client B's
one code item and one math item are answered correctly while A still waits, and A's batch is
answered at its deadline with its unscored items `infra_error` `deadline_exceeded`.

No timing is asserted: B's answers must come while A's request is still open (A's can only come
at its deadline), which a first-come, first-served scheduler cannot do.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers import free_port, poll
from tests.redis_fixtures import ROOT, RedisServer, Worker, proctor_env, serve_queue, status_of

KEY_A = "client-a-0123456789abcdef"
KEY_B = "client-b-0123456789abcdef"
DEADLINE_S = 40
SLEEPERS = 16_384


def _sleeper(n: int) -> dict[str, Any]:
    """A distinct code item (identical ones are scored once) that sleeps past the wall cap."""
    return {
        "domain": "code",
        "response": f"```python\nimport time  # {n}\ntime.sleep(600)\n```",
        "reference": {"language": "python", "tests": {"stdio": [{"input": "", "output": "x\n"}]}},
    }


DOUBLER = {
    "id": "b-code",
    "domain": "code",
    "response": "```python\nn = int(input())\nprint(n * 2)\n```",
    "reference": {"language": "python", "tests": {"stdio": [{"input": "21\n", "output": "42\n"}]}},
}
MATH = {"id": "b-math", "domain": "math", "response": "\\boxed{4}", "reference": {"answer": "4"}}


def _env() -> dict[str, str]:
    env = proctor_env(None)  # the default registry: real code and math scorers
    env["PROCTOR_API_KEYS"] = f"{KEY_A},{KEY_B}"
    env["PROCTOR_REQUEST_DEADLINE_S"] = str(DEADLINE_S)
    return env


@pytest.fixture
def embedded(tmp_path: Path) -> Iterator[str]:
    port = free_port()
    log = tmp_path / "serve.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "service.cli", "serve", "--port", str(port), "--workers", "2",
             "--log-level", "warning"],
            cwd=ROOT, env=_env(), stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        poll(lambda: status_of(url + "/readyz") == 200 or process.poll() is not None, 180)
        assert process.poll() is None, log.read_text()[-2000:]
        yield url
    finally:
        process.terminate()
        process.wait(timeout=60)


@pytest.fixture
def queued(
    redis_server: RedisServer,
    start_worker: Callable[..., Worker],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[str]:
    for name, value in _env().items():
        monkeypatch.setenv(name, value)
    workers = [
        start_worker(redis_server.url, workers=1, registry=None, wait=False) for _ in range(2)
    ]
    for worker in workers:
        worker.wait_alive(redis_server.url)
    process, url = serve_queue(redis_server.url, tmp_path / "serve.log", registry=None)
    try:
        poll(lambda: status_of(url + "/readyz") == 200, 60)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=60)


def _post(url: str, key: str, items: list[dict[str, Any]]) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"}
    return httpx.post(url + "/v1/score", json={"items": items}, headers=headers, timeout=300)


def _check_fair(url: str) -> None:
    with ThreadPoolExecutor(1) as pool:
        a: Future[httpx.Response] = pool.submit(
            _post, url, KEY_A, [_sleeper(n) for n in range(SLEEPERS)]
        )
        poll(lambda: _busy(url), 60)  # A's items are being scored
        code = _post(url, KEY_B, [DOUBLER])
        math = _post(url, KEY_B, [MATH])
        a_was_open = not a.done()
        a_response = a.result(timeout=DEADLINE_S + 120)
    assert code.status_code == 200, code.text
    assert math.status_code == 200, math.text
    assert [(r["status"], r["score"]) for r in code.json()["results"]] == [("ok", 1.0)], code.text
    assert [(r["status"], r["score"]) for r in math.json()["results"]] == [("ok", 1.0)]
    assert a_was_open, "B was answered only once A's batch was over"
    assert a_response.status_code == 200, a_response.text
    results = a_response.json()["results"]
    assert len(results) == SLEEPERS
    late = [r for r in results if r["status"] == "infra_error"]
    assert late and all(r["error"]["code"] == "deadline_exceeded" for r in late)
    assert all(r["score"] == 0.0 for r in results if r["status"] == "ok")


def _busy(url: str) -> bool:
    """A's items are being scored: sandboxes in use (embedded), chunks enqueued (queue mode)."""
    text = httpx.get(url + "/metrics", headers={"Authorization": f"Bearer {KEY_B}"}).text
    extras: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("proctor_dispatch_extra{"):
            labels, value = line.rsplit(" ", 1)
            name = labels.split('name="', 1)[1].split('"', 1)[0]
            extras[name] = float(value)
    in_use = extras.get("sandboxes", 0.0) - extras.get("idle_sandboxes", 0.0)
    return in_use > 0 or extras.get("chunks", 0.0) > 0


def test_a_small_request_is_not_starved_by_a_large_one_embedded(embedded: str) -> None:
    _check_fair(embedded)


def test_a_small_request_is_not_starved_by_a_large_one_in_queue_mode(queued: str) -> None:
    _check_fair(queued)
