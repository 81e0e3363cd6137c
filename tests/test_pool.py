"""The worker pool under failure: every item gets exactly one result, with the right status.

These run a real server with misbehaving scorers (tests/pool_scorers.py) beside the real domains.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from service.settings import Settings
from tests.helpers import Server, poll, score

REGISTRY = "tests.pool_scorers:registry"
SPEC_DIR = Path(__file__).parent / "specs"


def sleepy(n: int, seconds: float) -> list[dict[str, Any]]:
    # `n` in the reference keeps the items distinct (identical items are scored once).
    return [
        {
            "id": f"s{i}",
            "domain": "sleep",
            "response": "ok",
            "reference": {"seconds": seconds, "n": i},
        }
        for i in range(n)
    ]


def test_killing_a_worker_mid_batch_loses_nothing(make_server: Callable[..., Server]) -> None:
    server = make_server(registry=REGISTRY, workers=2, chunk_size=8)
    pool = server.state.dispatcher.pool
    deadline = time.monotonic() + 60
    while len(pool.worker_pids()) < 2:  # /readyz needs one ready worker; this test needs both
        assert time.monotonic() < deadline, "the second worker never became ready"
        time.sleep(0.1)
    victims = pool.worker_pids()
    killed_mid_chunk: list[bool] = []

    def kill_when_busy() -> None:
        # Killed once its worker is seen holding a chunk with an item in flight, not on a timer.
        busy = lambda: any(w.process.pid == victims[0] and w.current() for w in pool._workers)  # noqa: E731
        poll(busy, 60, every=0.005)
        os.kill(victims[0], signal.SIGKILL)
        killed_mid_chunk.append(True)

    killer = threading.Thread(target=kill_when_busy)
    killer.start()
    with httpx.Client(base_url=server.url, timeout=120) as client:
        results = score(client, sleepy(120, 0.05))
    killer.join()
    assert killed_mid_chunk == [True]
    assert [r["id"] for r in results] == [f"s{i}" for i in range(120)]
    assert all(r["status"] == "ok" and r["score"] == 1.0 for r in results)
    assert pool.stats().restarts >= 1
    assert victims[0] not in pool.worker_pids()


def test_an_item_that_kills_its_worker_once_is_retried(
    make_server: Callable[..., Server], tmp_path: Path
) -> None:
    server = make_server(registry=REGISTRY, workers=2)
    marker = tmp_path / "crashed"
    items = [
        *sleepy(4, 0.0),
        {
            "id": "once",
            "domain": "crash_once",
            "response": "ok",
            "reference": {"marker": str(marker)},
        },
    ]
    with httpx.Client(base_url=server.url, timeout=120) as client:
        results = score(client, items)
    assert marker.exists()  # it did crash a worker
    assert results[-1]["status"] == "ok" and results[-1]["score"] == 1.0
    assert all(r["status"] == "ok" and r["score"] == 1.0 for r in results[:4])


def test_a_poison_item_is_judged_zero_and_the_batch_goes_on(
    make_server: Callable[..., Server],
) -> None:
    server = make_server(registry=REGISTRY, workers=2, chunk_size=4)
    items = [
        *sleepy(10, 0.01),
        {"id": "poison", "domain": "crash", "response": "boom", "reference": {}},
    ]
    with httpx.Client(base_url=server.url, timeout=120) as client:
        results = score(client, items)
        poison = results[-1]
        assert poison["status"] == "ok"
        assert poison["score"] == 0.0 and poison["reward"] == 0.0 and poison["success"] is False
        assert poison["details"]["reason"] == "poison"
        assert all(r["status"] == "ok" and r["score"] == 1.0 for r in results[:-1])
        assert server.state.dispatcher.pool.stats().poison_items == 1
        # The pool recovered: the next request is served normally.
        again = score(client, sleepy(4, 0.0))
        assert all(r["status"] == "ok" for r in again)


def test_an_item_past_the_hard_timeout_is_judged_zero(make_server: Callable[..., Server]) -> None:
    server = make_server(registry=REGISTRY, workers=2, item_timeout_s=1.0, request_deadline_s=60)
    items = [{"id": "slow", "domain": "sleep", "response": "ok", "reference": {"seconds": 120}}]
    items += sleepy(6, 0.0)
    with httpx.Client(base_url=server.url, timeout=120) as client:
        results = score(client, items)
    slow = results[0]
    assert slow["status"] == "ok" and slow["score"] == 0.0
    assert slow["details"]["reason"] == "timeout"
    assert all(r["status"] == "ok" and r["score"] == 1.0 for r in results[1:])
    assert server.state.dispatcher.pool.stats().timeouts == 1


def test_math_verify_timeout_is_a_judged_zero_with_its_reason(client: httpx.Client) -> None:
    items = [
        {
            "domain": "math",
            "response": "Clearly \\boxed{9^{9^{9^{9}}}}",
            "reference": {"answer": "1"},
        }
    ]
    (result,) = score(client, items, spec="test-fast-timeouts")
    assert result["status"] == "ok"
    assert result["score"] == 0.0 and result["parsed"] is True
    assert result["details"]["reason"] == "verifier_timeout"


def test_items_not_reached_by_the_deadline_are_infra_errors(
    make_server: Callable[..., Server],
) -> None:
    server = make_server(
        registry=REGISTRY, workers=2, chunk_size=1, item_timeout_s=2.0, request_deadline_s=2.0
    )
    with httpx.Client(base_url=server.url, timeout=120) as client:
        started = time.monotonic()
        results = score(client, sleepy(12, 0.7))
        took = time.monotonic() - started
    statuses = [r["status"] for r in results]
    assert len(results) == 12
    assert set(statuses) == {"ok", "infra_error"}
    for r in results:
        if r["status"] == "infra_error":
            assert r["error"]["code"] == "deadline_exceeded"
            assert r["score"] is None and r["reward"] is None and r["success"] is None
        else:
            assert r["score"] == 1.0
    assert took < 30  # answered at the deadline, not after every item ran


def test_workers_that_cannot_start_fail_items_visibly() -> None:
    server = Server(_settings(registry="tests.pool_scorers:broken_in_workers"))
    server.start(wait_ready=False)
    try:
        with httpx.Client(base_url=server.url, timeout=120) as client:
            deadline = time.monotonic() + 60
            while server.state.dispatcher.pool.stats().broken is None:
                assert time.monotonic() < deadline, "the pool never gave up on its workers"
                time.sleep(0.2)
            assert client.get("/readyz").status_code == 503
            results = score(client, sleepy(3, 0.0))
            assert {r["status"] for r in results} == {"infra_error"}
            assert {r["error"]["code"] for r in results} == {"workers_unavailable"}
    finally:
        server.stop()


def _settings(**overrides: Any) -> Settings:
    values: dict[str, Any] = {"workers": 1, "spec_dirs": (SPEC_DIR,)}
    values.update(overrides)
    return Settings(**values)


def test_a_stuck_item_is_killed_even_after_its_request_gave_up(
    make_server: Callable[..., Server],
) -> None:
    server = make_server(
        registry=REGISTRY, workers=1, chunk_size=2, item_timeout_s=2.0, request_deadline_s=2.0
    )
    # The second item starts at ~1.2 s, so the request's deadline (2 s) comes before its own
    # hard timeout (~3.2 s): the request gives up on it while it still runs.
    items = [
        {"id": "slow", "domain": "sleep", "response": "ok", "reference": {"seconds": 1.2}},
        {"id": "stuck", "domain": "sleep", "response": "ok", "reference": {"seconds": 600}},
    ]
    with httpx.Client(base_url=server.url, timeout=120) as client:
        slow, stuck = score(client, items)
        # On a loaded machine the first item may miss the deadline too; either way the second
        # one was abandoned by its request while its worker still had it.
        assert (slow["status"], slow["score"]) in (("ok", 1.0), ("infra_error", None))
        assert stuck["status"] == "infra_error"
        assert stuck["error"]["code"] == "deadline_exceeded"
        # The only worker must not stay busy with the abandoned item for ten minutes.
        deadline = time.monotonic() + 30
        while server.state.dispatcher.pool.stats().timeouts < 1:
            assert time.monotonic() < deadline, "the stuck worker was never killed"
            time.sleep(0.1)
        while len(server.state.dispatcher.pool.worker_pids()) < 1:
            assert time.monotonic() < deadline, "no worker replaced the killed one"
            time.sleep(0.1)
        (after,) = score(client, sleepy(1, 0.0))
    assert after["status"] == "ok" and after["score"] == 1.0


_EARLY_STOP = """
import json, logging, multiprocessing, sys, time
from service.dispatch.pool import WorkerPool

errors = []
class Keep(logging.Handler):
    def emit(self, record):
        if record.levelno >= logging.ERROR:
            errors.append(record.getMessage())

logging.getLogger("service.dispatch.pool").addHandler(Keep())
pool = WorkerPool(1, registry_path=sys.argv[1], spec_dirs=[sys.argv[2]])
pool.start()
while not pool._spawning:  # the first worker start: it waits for the fork server's warm-up
    time.sleep(0.001)
pool.stop(timeout=0.2)
alive = pool._thread is not None and pool._thread.is_alive()
print(json.dumps({"errors": errors, "manager_alive": alive,
                  "workers": len(multiprocessing.active_children())}))
"""


def test_a_stop_during_the_first_worker_start_is_orderly() -> None:
    # A fresh interpreter, so that its fork server is cold: the manager's first worker start
    # waits for the fork server to import and warm the registry, far longer than the timeout.
    root = Path(__file__).parent.parent
    done = subprocess.run(
        [sys.executable, "-c", _EARLY_STOP, Settings().registry, str(SPEC_DIR)],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.splitlines()[-1])
    assert report == {"errors": [], "manager_alive": False, "workers": 0}
