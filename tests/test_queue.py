"""Queue mode with a real redis-server and real `proctor worker` processes.

The same batch scores byte for byte as in the embedded default; the fault tests kill, stop and
cut off the real processes (SIGKILL, SIGSTOP, Redis killed) and check that every item gets
exactly one result with the right status, or that the request is refused as a whole (503, 429)
with nothing scored.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from service.http.examples import EXAMPLE_ITEMS
from service.queue import keys, timings
from service.settings import Settings
from tests.helpers import TEST_SPECS, Server, poll
from tests.redis_fixtures import (
    ROOT,
    TEST_REGISTRY,
    RedisServer,
    Worker,
    proctor_env,
    serve_queue,
    status_of,
)

pytestmark = pytest.mark.redis


def _workers(start: Callable[..., Worker], n: int, url: str, **options: Any) -> list[Worker]:
    """`n` workers, warmed up side by side."""
    workers = [start(url, wait=False, **options) for _ in range(n)]
    for worker in workers:
        worker.wait_alive(url)
    return workers


def _queue_server(make_server: Callable[..., Server], url: str, **overrides: Any) -> Server:
    values: dict[str, Any] = {"queue_url": url, "registry": TEST_REGISTRY, "workers": 1}
    values.update(overrides)
    return make_server(**values)


def _sleep(seconds: float, item_id: str | None = None) -> dict[str, Any]:
    """A `sleep` item (items of a batch that are equal are scored once: give distinct times)."""
    item: dict[str, Any] = {"domain": "sleep", "response": "ok", "reference": {"seconds": seconds}}
    if item_id is not None:
        item["id"] = item_id
    return item


def _post(url: str, items: list[dict[str, Any]]) -> httpx.Response:
    return httpx.post(url + "/v1/score", json={"items": items}, timeout=120)


def _background(url: str, items: list[dict[str, Any]]) -> Future[httpx.Response]:
    pool = ThreadPoolExecutor(1)
    future = pool.submit(_post, url, items)
    pool.shutdown(wait=False)
    return future


def _claimer(server: RedisServer, workers: list[Worker], job_suffix: str = "") -> Worker:
    """The worker that has claimed a chunk (of the job whose id ends in `job_suffix`)."""
    client = server.client()
    found: list[Worker] = []

    def claimed() -> bool:
        for key in client.scan_iter(match=keys.claim_key("*")):
            if key.decode().endswith(job_suffix):
                name = client.get(key)
                found.extend(w for w in workers if name is not None and w.named(name.decode()))
        return bool(found)

    poll(claimed, timeout=60, every=0.02)
    return found[0]


def _extras(server: Server) -> dict[str, float]:
    return dict(server.state.dispatcher.stats().extras)


def _without_timing(body: dict[str, Any]) -> dict[str, Any]:
    """The body without its measurements: `elapsed_ms`, and a code item's CPU times."""
    for result in body["results"]:
        result.pop("elapsed_ms")
        result["details"].pop("cpu_s", None)
        for test in result["details"].get("tests", []):
            test.pop("time", None)
    return body


def test_queue_mode_scores_as_the_embedded_default(
    redis_server: RedisServer,
    start_worker: Callable[..., Worker],
    make_server: Callable[..., Server],
) -> None:
    items: list[dict[str, Any]] = []
    for n, (domain, item) in enumerate(EXAMPLE_ITEMS.items()):
        items += [{**item, "id": f"{domain}-{n}"}, dict(item), dict(item, meta={"n": n})]
    items += [
        {"domain": "math", "response": "no answer here", "reference": {"answer": "2"}},
        {"domain": "math", "response": "\\boxed{3}", "reference": {"answer": "x"}},
        {"domain": "nope", "response": "x", "reference": {}},
        {"domain": "stem", "response": "Answer: Z", "reference": {"answer": "B", "choices": []}},
        {"domain": "puzzle", "response": "<answer>-4</answer>",
         "reference": {"task": "basic_arithmetic", "config": {}, "seed": 1, "index": 0}},
        {"domain": "code", "response": "```python\nprint(1/0)\n```", "reference": {
            "language": "python", "tests": {"stdio": [{"input": "", "output": "1\n"}]}}},
    ]  # fmt: skip
    start_worker(redis_server.url, registry=None)
    queued = make_server(queue_url=redis_server.url, workers=1)
    embedded = make_server(workers=1)
    in_queue, at_home = _post(queued.url, items), _post(embedded.url, items)
    assert in_queue.status_code == at_home.status_code == 200
    queue_body, home_body = _without_timing(in_queue.json()), _without_timing(at_home.json())
    assert queue_body["spec"] == home_body["spec"]
    for n, (theirs, ours) in enumerate(
        zip(queue_body["results"], home_body["results"], strict=True)
    ):
        assert theirs == ours, (n, items[n])
    statuses = {r["status"] for r in in_queue.json()["results"]}
    assert statuses == {"ok", "invalid"}  # the code sandbox ran: no infra_error on either side


def test_a_worker_killed_mid_chunk_has_its_chunk_run_elsewhere(
    redis_server: RedisServer,
    start_worker: Callable[..., Worker],
    make_server: Callable[..., Server],
) -> None:
    workers = _workers(start_worker, 2, redis_server.url, workers=2)
    # The deadline leaves the re-run 15 s after the worker is lost: lost items would come back
    # `deadline_exceeded`, not `ok`.
    api = _queue_server(
        make_server, redis_server.url, request_deadline_s=18, item_timeout_s=5,
        queue_chunk_size=2,
    )  # fmt: skip
    pending = _background(api.url, [_sleep(3, "a"), _sleep(3.01, "b")])
    victim = _claimer(redis_server, workers)
    victim.signal(signal.SIGKILL)
    response = pending.result(timeout=60)
    assert response.status_code == 200, response.text
    results = response.json()["results"]
    assert [(r["id"], r["status"], r["score"]) for r in results] == [
        ("a", "ok", 1.0),
        ("b", "ok", 1.0),
    ]
    extras = _extras(api)
    assert extras["abandoned_chunks"] == 1
    assert extras["chunk_retries"] == 1


def test_an_item_that_kills_two_workers_is_poison(
    redis_server: RedisServer,
    start_worker: Callable[..., Worker],
    make_server: Callable[..., Server],
) -> None:
    doomed = _workers(start_worker, 2, redis_server.url, domains="kill_host")
    survivor = start_worker(redis_server.url, domains="sleep")
    api = _queue_server(make_server, redis_server.url, request_deadline_s=60, item_timeout_s=5)
    killer = {"id": "k", "domain": "kill_host", "response": "x", "reference": {}}
    response = _post(api.url, [killer, _sleep(0, "s")])
    assert response.status_code == 200, response.text
    by_id = {r["id"]: r for r in response.json()["results"]}
    assert len(by_id) == 2
    assert by_id["k"]["status"] == "ok"
    assert by_id["k"]["score"] == 0.0
    assert by_id["k"]["details"]["reason"] == "poison"
    assert (by_id["s"]["status"], by_id["s"]["score"]) == ("ok", 1.0)
    for worker in doomed:
        assert worker.process.wait(timeout=30) == -signal.SIGKILL
    assert survivor.process.poll() is None
    assert api.state.dispatcher.stats().poison_items == 1


def test_a_stopped_worker_chunk_is_rerun_and_its_late_result_counted_once(
    redis_server: RedisServer,
    start_worker: Callable[..., Worker],
    make_server: Callable[..., Server],
) -> None:
    workers = _workers(start_worker, 2, redis_server.url, concurrency=1)
    api = _queue_server(
        make_server, redis_server.url, request_deadline_s=60, item_timeout_s=30,
        queue_chunk_size=1,
    )  # fmt: skip
    # Job 1 is the short item; the long one keeps the batch open while both runs of job 1 end.
    pending = _background(api.url, [_sleep(1, "short"), _sleep(12, "long")])
    stopped = _claimer(redis_server, workers, job_suffix="-1")
    stopped.signal(signal.SIGSTOP)
    try:
        poll(lambda: _extras(api)["chunk_retries"] >= 1, timeout=30)
    finally:
        stopped.signal(signal.SIGCONT)
    response = pending.result(timeout=60)
    assert response.status_code == 200, response.text
    results = response.json()["results"]
    assert [(r["id"], r["status"], r["score"]) for r in results] == [
        ("short", "ok", 1.0),
        ("long", "ok", 1.0),
    ]
    assert _extras(api)["duplicate_results"] == 1


def test_a_worker_stopped_past_the_deadline(
    redis_server: RedisServer,
    start_worker: Callable[..., Worker],
    make_server: Callable[..., Server],
) -> None:
    worker = start_worker(redis_server.url)
    api = _queue_server(
        make_server, redis_server.url, request_deadline_s=6, item_timeout_s=5, queue_wait_s=60
    )
    pending = _background(api.url, [_sleep(2, "a"), _sleep(2.01, "b")])
    _claimer(redis_server, [worker]).signal(signal.SIGSTOP)
    try:
        response = pending.result(timeout=60)
    finally:
        worker.signal(signal.SIGCONT)
    assert response.status_code == 200, response.text
    results = response.json()["results"]
    assert [(r["id"], r["status"], r["error"]["code"]) for r in results] == [
        ("a", "infra_error", "deadline_exceeded"),
        ("b", "infra_error", "deadline_exceeded"),
    ]
    poll(lambda: api.state.dispatcher.readiness()["workers"], timeout=30)  # it is back
    again = _post(api.url, [_sleep(0, "c")])
    assert [r["status"] for r in again.json()["results"]] == ["ok"]


def test_redis_lost_mid_batch_fails_fast_then_recovers(
    redis_server: RedisServer,
    start_worker: Callable[..., Worker],
    make_server: Callable[..., Server],
) -> None:
    worker = start_worker(redis_server.url)
    api = _queue_server(make_server, redis_server.url, request_deadline_s=60, item_timeout_s=30)
    pending = _background(api.url, [_sleep(5, "a"), _sleep(5.01, "b")])
    _claimer(redis_server, [worker])
    redis_server.stop()
    response = pending.result(timeout=30)
    assert response.status_code == 503
    assert "unreachable" in response.json()["detail"]
    assert response.headers["Retry-After"]
    poll(lambda: not api.state.dispatcher.readiness()["queue"], timeout=10)
    assert _post(api.url, [_sleep(0)]).status_code == 503
    redis_server.start()
    poll(lambda: all(api.state.dispatcher.readiness().values()), timeout=60)
    again = _post(api.url, [_sleep(0, "c"), _sleep(0.01, "d")])
    assert again.status_code == 200, again.text
    assert [r["status"] for r in again.json()["results"]] == ["ok", "ok"]
    assert worker.process.poll() is None


def test_no_live_worker_is_a_503_after_queue_wait_s(redis_server: RedisServer) -> None:
    settings = Settings(
        queue_url=redis_server.url, registry=TEST_REGISTRY, spec_dirs=(TEST_SPECS,),
        queue_wait_s=1,
    )  # fmt: skip
    api = Server(settings)
    api.start(wait_ready=False)
    try:
        ready = httpx.get(api.url + "/readyz")
        assert ready.status_code == 503
        assert ready.json()["components"] == {
            "queue": True,
            "workers": False,
            "code_environment": True,
            "run_pool": True,
        }
        response = _post(api.url, [_sleep(0)])
        assert response.status_code == 503
        assert "no worker serving sleep" in response.json()["detail"]
        assert response.headers["Retry-After"] == "1"
        nothing = _post(api.url, [{"domain": "nope", "response": "", "reference": {}}])
        assert nothing.json()["results"][0]["error"]["code"] == "unknown_domain"
    finally:
        api.stop()


def test_a_full_queue_is_a_429_with_retry_after(
    redis_server: RedisServer,
    start_worker: Callable[..., Worker],
    make_server: Callable[..., Server],
) -> None:
    start_worker(redis_server.url)
    api = _queue_server(make_server, redis_server.url, max_queue_depth=2)
    client = redis_server.client()
    pending = _background(api.url, [_sleep(3, "a"), _sleep(3.01, "b")])
    poll(lambda: bool(client.hlen(keys.INFLIGHT_KEY)), timeout=30, every=0.02)
    refused = _post(api.url, [_sleep(0, "c")])
    assert refused.status_code == 429
    assert refused.headers["Retry-After"] == "1"
    assert "max_queue_depth" in refused.json()["detail"]
    first = pending.result(timeout=60)
    assert [r["status"] for r in first.json()["results"]] == ["ok", "ok"]
    again = _post(api.url, [_sleep(0, "c")])
    assert [r["status"] for r in again.json()["results"]] == ["ok"]


def test_a_tls_url_with_a_password_passes_through_to_jobs_and_metrics(
    tmp_path: Any, start_worker: Callable[..., Worker], make_server: Callable[..., Server]
) -> None:
    server = RedisServer(tmp_path, password="s3cret-pass", tls=True)
    server.start()
    try:
        assert server.url.startswith("rediss://:s3cret-pass@")
        start_worker(server.url)
        api = _queue_server(make_server, server.url)
        response = _post(api.url, [_sleep(0, "a")])
        assert [r["status"] for r in response.json()["results"]] == ["ok"]
        job = httpx.post(api.url + "/v1/jobs", json={"items": [_sleep(0.2), _sleep(0.3)]})
        assert job.status_code == 202
        status = api.url + "/v1/jobs/" + job.json()["job_id"]
        poll(lambda: httpx.get(status).json()["status"] == "done", timeout=60)
        done = httpx.get(status).json()
        assert done["completed"] == done["total"] == 2
        assert [r["status"] for r in done["result"]["results"]] == ["ok", "ok"]
        metrics = httpx.get(api.url + "/metrics").text
        assert 'proctor_dispatch_extra{backend="queue",name="workers_alive:sleep"} 1.0' in metrics
        # An item that kills the worker's pool processes is poison there, as in the embedded
        # default; the worker reports its pool's counts, which the API sums.
        crash = {"id": "c", "domain": "crash", "response": "x", "reference": {}}
        crashed = _post(api.url, [crash])
        assert crashed.json()["results"][0]["details"]["reason"] == "poison"
        poll(lambda: api.state.dispatcher.stats().poison_items == 1, timeout=10)
        stats = api.state.dispatcher.stats()
        assert (stats.workers, stats.restarts) == (1, 2)
        assert "s3cret" not in repr(api.settings)
        assert "s3cret" not in api.state.dispatcher.url
    finally:
        server.stop()


def test_the_last_worker_lost_mid_batch_leaves_its_items_workers_unavailable(
    redis_server: RedisServer,
    start_worker: Callable[..., Worker],
    make_server: Callable[..., Server],
) -> None:
    worker = start_worker(redis_server.url)
    api = _queue_server(
        make_server, redis_server.url, request_deadline_s=120, item_timeout_s=30, queue_wait_s=2
    )
    pending = _background(api.url, [_sleep(3, "a"), _sleep(3.01, "b"), _sleep(0, "c")])
    _claimer(redis_server, [worker]).signal(signal.SIGKILL)
    response = pending.result(timeout=60)
    assert response.status_code == 200, response.text
    results = response.json()["results"]
    assert len(results) == 3
    for result in results:
        if result["status"] == "ok":  # scored before the kill
            assert result["score"] == 1.0
        else:
            assert result["status"] == "infra_error"
            assert result["error"]["code"] == "workers_unavailable"
    assert any(r["status"] == "infra_error" for r in results)
    assert httpx.get(api.url + "/readyz").json()["components"]["workers"] is False


def test_proctor_serve_queue_and_a_worker_that_stops_on_sigterm(
    redis_server: RedisServer, start_worker: Callable[..., Worker], tmp_path: Any
) -> None:
    worker = start_worker(redis_server.url)
    serve, url = serve_queue(redis_server.url, tmp_path / "serve.log")
    try:
        poll(lambda: status_of(url + "/readyz") == 200, timeout=120)
        response = _post(url, [_sleep(0, "a")])
        assert [r["status"] for r in response.json()["results"]] == ["ok"]
        worker.signal(signal.SIGTERM)
        assert worker.process.wait(timeout=60) == 0
        # Withdrawn at once, not when its liveness expires: the API's next look says so.
        poll(lambda: status_of(url + "/readyz") == 503, timeout=timings.ALIVE_TTL_S)
    finally:
        serve.terminate()
        serve.wait(timeout=60)


def test_a_worker_refuses_unknown_domains() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "service.cli", "worker", "--queue", "redis://127.0.0.1:1/0",
         "--domains", "math,nope"],
        cwd=ROOT, env=proctor_env(), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2
    assert "unknown domains ['nope']" in done.stderr
