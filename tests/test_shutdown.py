"""SIGTERM stops `proctor serve` cleanly within a bounded time, with requests in flight or with a
wedged part: the process exits, and its workers and sandboxes are gone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.helpers import descendants, free_port, poll

GRACE_S = 2
STOP_BOUND_S = 45.0
"""How long a stop may take: the grace, the pool's join (5 s) and the sandboxes' close, with
room for a loaded machine. It bounds the wait; it is not a speed target."""

LOOP = {
    "domain": "code",
    "response": "```python\nwhile True:\n    pass\n```",
    "reference": {"language": "python", "tests": {"stdio": [{"input": "", "output": "1\n"}]}},
}


def _alive(pids: set[int]) -> set[int]:
    alive = set()
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] != "Z":
                    alive.add(pid)
        except OSError:
            continue
    return alive


@pytest.fixture
def service() -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    port = free_port()
    env = {
        **os.environ,
        "PROCTOR_SHUTDOWN_GRACE_S": str(GRACE_S),
        "PROCTOR_SANDBOX__BACKEND": "local",
        "PROCTOR_SANDBOX__POOL_SIZE": "2",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "service.cli", "serve", "--port", str(port), "--workers", "1"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        try:
            return httpx.get(url + "/readyz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        poll(ready, 120, every=0.2)
        yield proc, url
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _stop(proc: subprocess.Popen[bytes]) -> float:
    helpers = descendants(proc.pid)
    assert helpers, "the service has no workers or sandboxes to stop"
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=STOP_BOUND_S)
    took = time.monotonic() - started
    try:
        poll(lambda: not _alive(helpers), 10)
    except AssertionError:
        raise AssertionError(
            f"left behind: {[_cmdline(p)[:120] for p in _alive(helpers)]}"
        ) from None
    return took


def test_sigterm_with_a_request_in_flight_stops_everything(
    service: tuple[subprocess.Popen[bytes], str],
) -> None:
    proc, url = service
    replies: list[int] = []

    def slow_request() -> None:
        try:
            reply = httpx.post(url + "/v1/score", json={"items": [LOOP]}, timeout=60)
            replies.append(reply.status_code)
        except httpx.HTTPError:
            replies.append(-1)  # cut off by the shutdown: allowed, a hang is not

    thread = threading.Thread(target=slow_request)
    thread.start()
    time.sleep(0.5)  # let the request reach a sandbox; the stop is bounded either way
    _stop(proc)
    thread.join(timeout=10)
    assert not thread.is_alive() and replies


def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return b""


def test_sigterm_with_every_worker_and_sandbox_frozen_stops_everything(
    service: tuple[subprocess.Popen[bytes], str],
) -> None:
    proc, _ = service
    # Workers and jails that answer nothing (SIGSTOP): the service must still stop, killing what
    # it cannot stop politely. (multiprocessing's forkserver and resource tracker are left
    # running: they exit when the service does.)
    frozen = {p for p in descendants(proc.pid) if b"multiprocessing" not in _cmdline(p)}
    for pid in frozen:
        os.kill(pid, signal.SIGSTOP)
    try:
        _stop(proc)
    finally:
        for pid in _alive(frozen):
            os.kill(pid, signal.SIGKILL)


def test_sigterm_to_the_process_group_stops_everything_without_a_warning(tmp_path: Path) -> None:
    # A terminal's or systemd's stop signals the whole group: the workers must wait for the
    # service to stop them, not die first and be logged as crashed ("exited with code 255").
    port, log = free_port(), tmp_path / "serve.log"
    env = {**os.environ, "PROCTOR_SHUTDOWN_GRACE_S": str(GRACE_S)}
    env["PROCTOR_SANDBOX__BACKEND"] = "local"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "service.cli", "serve", "--port", str(port), "--workers", "2"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        url = f"http://127.0.0.1:{port}/readyz"
        poll(lambda: _answers(url), 120, every=0.2)
        helpers = descendants(proc.pid)
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=STOP_BOUND_S)  # uvicorn re-raises the signal once it has stopped
        poll(lambda: not _alive(helpers), 10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    # from the moment it was ready: a worker's end may be logged before uvicorn's "Shutting down"
    stopping = lines[next(i for i, line in enumerate(lines) if " ready: " in line) :]
    assert not [line for line in stopping if " WARNING " in line or " ERROR " in line], stopping


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False
