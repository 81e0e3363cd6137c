"""Finished jobs are bounded in count and in bytes of results, in both job stores, against real
`proctor serve` processes (and, in queue mode, a real redis-server and `proctor worker`): the
oldest finished go first (GET answers 404), a running job is never evicted, a result larger
than the whole budget fails its job with `result_too_large`, a job's request larger than the
running jobs' budget is a 413, and in Redis every key of a job has a TTL."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers import TEST_SPECS, free_port, poll
from tests.redis_fixtures import ROOT, RedisServer, proctor_env, status_of

MATH = {"domain": "math", "response": "\\boxed{4}", "reference": {"answer": "4"}}

Serve = Callable[..., str]


@pytest.fixture
def serve_process(tmp_path: Path) -> Iterator[Callable[..., tuple[str, int]]]:
    """`serve_process(**settings)`: a real `proctor serve` with these settings (as `PROCTOR_*`
    variables; one worker process, the test registry), its URL and pid once it is ready."""
    started: list[subprocess.Popen[bytes]] = []

    def start(**settings: str) -> tuple[str, int]:
        port = free_port()
        env = proctor_env() | {"PROCTOR_WORKERS": "1"}
        env |= {f"PROCTOR_{name.upper()}": value for name, value in settings.items()}
        with open(tmp_path / f"serve-{port}.log", "wb") as out:
            process = subprocess.Popen(
                [sys.executable, "-m", "service.cli", "serve", "--port", str(port),
                 "--spec-dir", str(TEST_SPECS), "--log-level", "warning"],
                cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip
        started.append(process)
        url = f"http://127.0.0.1:{port}"
        poll(lambda: status_of(url + "/readyz") == 200 or process.poll() is not None, 180, 0.2)
        assert process.poll() is None, (tmp_path / f"serve-{port}.log").read_text()[-2000:]
        return url, process.pid

    yield start
    for process in started:
        process.terminate()
        process.wait(timeout=60)


@pytest.fixture
def serve(serve_process: Callable[..., tuple[str, int]]) -> Serve:
    """`serve(**settings)`: `serve_process`'s URL only."""
    return lambda **settings: serve_process(**settings)[0]


def padded(n: int, pad: int, tag: str) -> list[dict[str, Any]]:
    """`n` math items, each echoing `pad` bytes of `meta` of its own in its result."""
    return [
        MATH | {"id": f"{tag}-{k}", "meta": {"pad": f"{tag}-{k}-".ljust(pad, "x")}}
        for k in range(n)
    ]


def submit(url: str, items: list[dict[str, Any]]) -> str:
    reply = httpx.post(f"{url}/v1/jobs", json={"items": items}, timeout=120)
    assert reply.status_code == 202, reply.text
    job_id: str = reply.json()["job_id"]
    return job_id


def job(url: str, job_id: str) -> httpx.Response:
    return httpx.get(f"{url}/v1/jobs/{job_id}", timeout=120)


def finished(url: str, job_id: str) -> dict[str, Any]:
    poll(lambda: job(url, job_id).json()["status"] not in ("queued", "running"), 180, 0.1)
    body: dict[str, Any] = job(url, job_id).json()
    return body


def run(url: str, items: list[dict[str, Any]]) -> str:
    """A job of `items`, done (each waited for, so that none is evicted before it is seen)."""
    job_id = submit(url, items)
    assert finished(url, job_id)["status"] == "done"
    return job_id


def _check_limits(url: str, sleeper: str) -> None:
    """With max_finished_jobs 3 and max_finished_job_bytes 200,000: count, then bytes, then a
    result too large to keep; the running `sleeper` job outlives them all."""
    small = [run(url, padded(1, 10, f"s{n}")) for n in range(4)]
    assert job(url, small[0]).status_code == 404  # the oldest of four, past the count
    assert [job(url, j).status_code for j in small[1:]] == [200, 200, 200]

    big = [run(url, padded(3, 60_000, f"b{n}")) for n in range(2)]  # ~180,000 bytes each
    body = job(url, big[1]).json()
    assert [r["meta"]["pad"][:5] for r in body["result"]["results"]] == ["b1-0-", "b1-1-", "b1-2-"]
    # three jobs are within the count; their bytes are not, so all but the newest go
    assert [job(url, j).status_code for j in [*small, big[0]]] == [404] * 5

    huge = finished(url, submit(url, padded(4, 60_000, "huge")))
    assert (huge["status"], huge["error"]["code"]) == ("failed", "result_too_large")
    assert job(url, big[1]).status_code == 200  # a result not kept pushes nothing out

    running = job(url, sleeper).json()
    assert running["status"] in ("queued", "running"), running
    assert httpx.delete(f"{url}/v1/jobs/{sleeper}", timeout=60).json()["status"] == "cancelled"


LIMITS = {"max_finished_jobs": "3", "max_finished_job_bytes": "200000"}
SLOW = {"item_timeout_s": "900", "request_deadline_s": "900"}  # the sleeper sleeps on
SLEEPER = [{"domain": "sleep", "response": "ok", "reference": {"seconds": 600}}]


def test_finished_jobs_are_bounded_in_memory(serve: Serve) -> None:
    url = serve(**LIMITS, **SLOW, workers="2", max_running_job_bytes="300000")
    _check_limits(url, submit(url, SLEEPER))
    reply = httpx.post(f"{url}/v1/jobs", json={"items": padded(6, 60_000, "x")}, timeout=60)
    assert reply.status_code == 413, reply.text
    assert "max_running_job_bytes" in reply.json()["error"]["message"]


@pytest.mark.redis
def test_finished_jobs_are_bounded_in_redis_and_every_key_expires(
    serve: Serve,
    redis_server: RedisServer,
    start_worker: Callable[..., object],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in SLOW.items():  # in the worker too
        monkeypatch.setenv(f"PROCTOR_{name.upper()}", value)
    start_worker(redis_server.url, workers=2)
    url = serve(**LIMITS, **SLOW, queue_url=redis_server.url)
    sleeper = submit(url, SLEEPER)
    client = redis_server.client()
    running_keys = [f"proctor:{kind}{sleeper}" for kind in ("job:", "job-lease:", "job-body:")]
    assert all(client.ttl(key) > 0 for key in running_keys)  # a running job's too
    _check_limits(url, sleeper)
    for n in range(12):  # many more jobs than the count kept
        run(url, padded(1, 10, f"m{n}"))
    keys = client.keys("proctor:job:*")
    assert len(keys) == 3  # the kept finished jobs, and the cancelled sleeper is gone with them
    assert client.zcard("proctor:jobs:finished") == client.hlen("proctor:jobs:finished-bytes") == 3
    for pattern in ("proctor:job:*", "proctor:job-lease:*", "proctor:job-body:*"):
        for key in client.keys(pattern):
            assert client.ttl(key) > 0, key  # nothing of a job outlives its TTL
