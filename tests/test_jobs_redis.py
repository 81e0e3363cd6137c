"""Jobs in queue mode live in Redis: two API replicas answer for the same job, a job whose API
is killed mid-run is taken over and finished by another, a cancel reaches the replica running
the job, and Redis being down is a 503. Real redis-server, real workers, real API processes."""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from service.queue.timings import JOB_LEASE_TTL_S
from service.settings import Settings
from tests.helpers import Server, poll
from tests.redis_fixtures import TEST_REGISTRY, RedisServer, Worker, serve_queue, status_of

pytestmark = pytest.mark.redis


def _sleeps(n: int, seconds: float) -> list[dict[str, Any]]:
    # distinct seconds: equal items of a batch are scored once
    return [
        {"id": f"s{k}", "domain": "sleep", "response": "ok",
         "reference": {"seconds": seconds + k / 10_000}}
        for k in range(n)
    ]  # fmt: skip


def _submit(url: str, items: list[dict[str, Any]]) -> str:
    reply = httpx.post(f"{url}/v1/jobs", json={"items": items}, timeout=30)
    assert reply.status_code == 202, reply.text
    job_id: str = reply.json()["job_id"]
    return job_id


def _job(url: str, job_id: str) -> dict[str, Any]:
    reply = httpx.get(f"{url}/v1/jobs/{job_id}", timeout=30)
    assert reply.status_code == 200, reply.text
    body: dict[str, Any] = reply.json()
    return body


def _done(url: str, job_id: str, timeout: float) -> dict[str, Any]:
    poll(lambda: _job(url, job_id)["status"] == "done", timeout=timeout, every=0.2)
    return _job(url, job_id)


def _queue_api(make_server: Callable[..., Server], redis_url: str) -> Server:
    return make_server(queue_url=redis_url, registry=TEST_REGISTRY, workers=1)


def test_two_replicas_answer_for_one_job(
    redis_server: RedisServer,
    start_worker: Callable[..., Worker],
    make_server: Callable[..., Server],
) -> None:
    start_worker(redis_server.url)
    a, b = (_queue_api(make_server, redis_server.url) for _ in range(2))
    items = _sleeps(20, 0.01)
    job_id = _submit(a.url, items)
    job = _done(b.url, job_id, 120)
    assert job["total"] == job["completed"] == 20
    results = job["result"]["results"]
    assert [(r["id"], r["status"], r["score"]) for r in results] == [
        (item["id"], "ok", 1.0) for item in items
    ]
    assert _job(a.url, job_id) == job


def test_a_job_whose_api_is_killed_is_finished_by_another(
    redis_server: RedisServer,
    start_worker: Callable[..., Worker],
    make_server: Callable[..., Server],
    tmp_path: Path,
) -> None:
    start_worker(redis_server.url, concurrency=1)
    first, url = serve_queue(redis_server.url, tmp_path / "serve.log")
    try:
        poll(lambda: status_of(url + "/readyz") == 200, timeout=120, every=0.5)
        items = _sleeps(12, 0.25)
        job_id = _submit(url, items)
        poll(lambda: _job(url, job_id)["completed"] > 0, timeout=60, every=0.1)
        first.send_signal(signal.SIGKILL)  # mid-job: no chance to hand anything over
        first.wait(timeout=30)
    finally:
        if first.poll() is None:
            first.kill()
    second = _queue_api(make_server, redis_server.url)
    job = _done(second.url, job_id, 60 + JOB_LEASE_TTL_S)
    results = job["result"]["results"]
    assert [(r["id"], r["status"]) for r in results] == [(item["id"], "ok") for item in items]


def test_a_cancel_reaches_the_replica_running_the_job(
    redis_server: RedisServer,
    start_worker: Callable[..., Worker],
    make_server: Callable[..., Server],
) -> None:
    start_worker(redis_server.url, concurrency=1)
    a, b = (_queue_api(make_server, redis_server.url) for _ in range(2))
    job_id = _submit(a.url, _sleeps(40, 0.5))
    poll(lambda: _job(b.url, job_id)["status"] == "running", timeout=60, every=0.1)
    reply = httpx.delete(f"{b.url}/v1/jobs/{job_id}", timeout=60)
    assert reply.status_code == 200
    assert reply.json()["status"] == "cancelled"
    assert _job(a.url, job_id)["status"] == "cancelled"


def test_jobs_answer_503_while_redis_is_down(redis_server: RedisServer) -> None:
    settings = Settings(queue_url=redis_server.url, registry=TEST_REGISTRY, workers=1)
    api = Server(settings)
    api.start(wait_ready=False)  # no worker: never ready, but it answers
    try:
        assert httpx.get(f"{api.url}/v1/jobs/nope", timeout=30).status_code == 404
        redis_server.stop()
        reply = httpx.get(f"{api.url}/v1/jobs/nope", timeout=30)
        assert reply.status_code == 503
        assert "unreachable" in reply.text
    finally:
        api.stop()
