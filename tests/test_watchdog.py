"""Every long-lived part of the embedded default killed in turn, while a request is in flight: the
request still resolves by its deadline with exactly one result per item, and the service heals
(`/readyz` answers 200 again, the next request is scored).

The parts: the pool's manager thread (crashing, vanishing, wedged), a worker process, the
forkserver the workers are forked from, and the local sandbox's supervisors.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from tests.helpers import Server, poll

MATH = [
    {
        "id": f"m{n}",
        "domain": "math",
        "response": f"\\boxed{{{n}}}",
        "reference": {"answer": str(n)},
    }
    for n in range(24)
]
CODE = {
    "id": "code",
    "domain": "code",
    "response": "```python\nprint(int(input()) * 2)\n```",
    "reference": {"language": "python", "tests": {"stdio": [{"input": "21\n", "output": "42\n"}]}},
}


@pytest.fixture
def background() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(2) as pool:
        yield pool


def _post(server: Server, items: list[dict[str, Any]], timeout: float) -> httpx.Response:
    return httpx.post(server.url + "/v1/score", json={"items": items}, timeout=timeout)


def _scored_right(response: httpx.Response, items: list[dict[str, Any]]) -> None:
    assert response.status_code == 200, response.text
    results = response.json()["results"]
    assert [r["id"] for r in results] == [i["id"] for i in items]
    assert all(r["status"] == "ok" and r["score"] == 1.0 for r in results), results


def _healed(server: Server) -> None:
    poll(lambda: httpx.get(server.url + "/readyz", timeout=10).status_code == 200, 60)
    _scored_right(_post(server, MATH[:3], 60), MATH[:3])


def _when_holding(pool: Any, act: Callable[[], None]) -> Callable[[], None]:
    """A replacement for the manager's `_check_deadlines` that does `act` once, the first time
    the manager holds a batch (and restores the original); it records that it fired."""
    original = pool._check_deadlines

    def hook() -> None:
        if pool._ledger.batches and not hook.fired:  # type: ignore[attr-defined]
            hook.fired = True  # type: ignore[attr-defined]
            pool._check_deadlines = original
            act()
        original()

    hook.fired = False  # type: ignore[attr-defined]
    return hook


def _slow_items(n: int) -> list[dict[str, Any]]:
    # Distinct symbolic answers: each goes through math-verify, so the batch stays in flight.
    return [
        {
            "id": f"s{k}",
            "domain": "math",
            "response": f"\\boxed{{\\frac{{{k + 1}}}{{{k + 2}}} + x - x}}",
            "reference": {"answer": f"\\frac{{{2 * (k + 1)}}}{{{2 * (k + 2)}}}"},
        }
        for k in range(n)
    ]


def test_a_crashing_manager_is_replaced_and_its_items_retried(
    make_server: Callable[..., Server],
) -> None:
    server = make_server(workers=1)
    pool = server.state.dispatcher.pool

    def crash() -> None:
        raise RuntimeError("injected: a bug in the manager")

    hook = _when_holding(pool, crash)
    pool._check_deadlines = hook
    items = _slow_items(8)
    response = _post(server, items, 120)
    assert hook.fired
    _scored_right(response, items)
    assert pool.stats().extras["manager_restarts"] == 1
    _healed(server)


def test_a_batch_that_outlives_two_manager_crashes_is_infra_error(
    make_server: Callable[..., Server],
) -> None:
    server = make_server(workers=1)
    pool = server.state.dispatcher.pool
    crashes = 0
    original = pool._check_deadlines

    def crash_twice() -> None:
        nonlocal crashes
        if pool._ledger.batches and crashes < 2:
            crashes += 1
            raise RuntimeError("injected")
        original()

    pool._check_deadlines = crash_twice
    response = _post(server, _slow_items(12), 120)
    assert response.status_code == 200
    results = response.json()["results"]
    assert len(results) == 12 and crashes == 2
    # What was scored before the second crash stands; what was still held is our failure.
    failed = [r for r in results if r["status"] != "ok"]
    assert failed, results
    assert all(r["status"] == "infra_error" for r in failed)
    assert {r["error"]["code"] for r in failed} == {"pool_crashed"}
    assert all(r["score"] == 1.0 for r in results if r["status"] == "ok")
    pool._check_deadlines = original
    _healed(server)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # intended
def test_a_vanished_manager_thread_is_restarted_by_the_watchdog(
    make_server: Callable[..., Server],
) -> None:
    server = make_server(workers=1)
    pool = server.state.dispatcher.pool
    first = pool._thread

    def vanish() -> None:
        raise SystemExit  # a BaseException: the manager's own recovery does not catch it

    hook = _when_holding(pool, vanish)
    pool._check_deadlines = hook
    items = _slow_items(6)
    response = _post(server, items, 120)
    assert hook.fired and not first.is_alive()
    _scored_right(response, items)
    assert pool._thread is not first and pool._thread.is_alive()
    _healed(server)


def test_a_wedged_manager_is_superseded_and_the_request_resolves(
    make_server: Callable[..., Server],
) -> None:
    server = make_server(workers=1, request_deadline_s=60, item_timeout_s=30)
    pool = server.state.dispatcher.pool
    pool.stall_s = 2.0
    release = threading.Event()
    hook = _when_holding(pool, lambda: release.wait(600))  # stuck until the test ends
    pool._check_deadlines = hook
    try:
        items = _slow_items(4)
        response = _post(server, items, 90)
        assert hook.fired
        _scored_right(response, items)
        assert pool.stats().extras["manager_restarts"] >= 1
        _healed(server)
    finally:
        release.set()


def test_a_request_resolves_by_its_deadline_whatever_the_pool_does(
    make_server: Callable[..., Server],
) -> None:
    # A manager that neither answers nor counts as stalled (its heartbeat is kept up by hand):
    # the dispatcher itself resolves the items shortly after the deadline.
    server = make_server(workers=1, request_deadline_s=3, item_timeout_s=3)
    pool = server.state.dispatcher.pool
    release = threading.Event()

    def stuck() -> None:
        while not release.wait(0.1):
            pool._beat = time.monotonic()

    pool._check_deadlines = _when_holding(pool, stuck)
    try:
        response = _post(server, _slow_items(3), 60)
        assert response.status_code == 200
        results = response.json()["results"]
        assert [r["status"] for r in results] == ["infra_error"] * 3
        assert {r["error"]["code"] for r in results} == {"deadline_exceeded"}
    finally:
        release.set()
    _healed(server)


def test_a_killed_worker_mid_batch_is_replaced(
    make_server: Callable[..., Server], background: ThreadPoolExecutor
) -> None:
    server = make_server(workers=1)
    pool = server.state.dispatcher.pool
    (pid,) = pool.worker_pids()
    hook = _when_holding(pool, lambda: os.kill(pid, signal.SIGKILL))
    pool._check_deadlines = hook
    items = _slow_items(6)
    _scored_right(_post(server, items, 120), items)
    assert hook.fired
    assert pool.stats().restarts >= 1
    _healed(server)


def _forkserver_pid() -> int:
    from multiprocessing import forkserver

    pid = forkserver._forkserver._forkserver_pid  # type: ignore[attr-defined]
    assert isinstance(pid, int)
    return pid


def test_a_killed_forkserver_is_restarted_with_the_pinned_hash_seed(
    make_server: Callable[..., Server],
) -> None:
    server = make_server(workers=1)
    pool = server.state.dispatcher.pool
    old = _forkserver_pid()
    os.kill(old, signal.SIGKILL)
    (worker,) = pool.worker_pids()
    os.kill(worker, signal.SIGKILL)  # its replacement needs a forkserver
    poll(lambda: pool.worker_pids() not in ([], [worker]), 60)
    assert _forkserver_pid() != old
    (new,) = pool.worker_pids()
    with open(f"/proc/{new}/environ", "rb") as f:
        assert b"PYTHONHASHSEED=0" in f.read().split(b"\0")
    _healed(server)


def _bwrap_children() -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv0 = f.read().split(b"\0")[0]
        except (OSError, ValueError, IndexError):
            continue
        if ppid == os.getpid() and argv0.endswith(b"bwrap"):
            found.append(int(pid))
    return found


def test_killed_sandbox_supervisors_are_replaced(
    make_server: Callable[..., Server], background: ThreadPoolExecutor
) -> None:
    server = make_server(workers=1, sandbox={"backend": "local", "pool_size": 2})
    before = _bwrap_children()
    assert before, "no local sandbox is running"
    for pid in before:
        os.kill(pid, signal.SIGKILL)
    futures: list[Future[httpx.Response]] = [
        background.submit(_post, server, [{**CODE, "id": f"c{n}"}], 120) for n in range(3)
    ]
    for n, future in enumerate(futures):
        _scored_right(future.result(), [{**CODE, "id": f"c{n}"}])
    poll(lambda: bool(set(_bwrap_children()) - set(before)), 60)
    _healed(server)
