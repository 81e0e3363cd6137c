"""Queue mode's runs (`service.queue.run_queue`) with a real redis-server and `proctor worker`s.

A run (`POST /v1/run`, the SandboxFusion routes) goes to a worker's run pool, never the API
host's; a run whose worker is killed mid-run is run on another; one lost with its worker twice is
a failed run and is not run a third time; with no worker serving runs it is `infra_error`
(`workers_unavailable`) after `queue_wait_s`, a 504 on the SandboxFusion route; and one key's
flood of runs does not queue another key's run behind it.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from service.queue import keys
from service.queue.run_queue import QueueRuns
from service.settings import RunSettings
from service.work.runs import LOST_TWICE
from tests.helpers import Server, poll
from tests.redis_fixtures import TEST_REGISTRY, RedisServer, Worker
from tests.sandbox_fixtures import sandbox_settings

pytestmark = pytest.mark.redis

FLOOD_KEY = "proctor-queue-run-flood-key-01"
OTHER_KEY = "proctor-queue-run-other-key-01"
ONE_SANDBOX = {"PROCTOR_RUN__POOL_SIZE": "1"}


@pytest.fixture(autouse=True)
def _local_backend(request: pytest.FixtureRequest) -> None:
    request.getfixturevalue("local_backend")  # skips, or fails in CI, without bubblewrap


def _api(make_server: Callable[..., Server], url: str, **overrides: Any) -> Server:
    values: dict[str, Any] = {
        "queue_url": url,
        "registry": TEST_REGISTRY,
        "workers": 1,
        "sandbox": sandbox_settings("local", pool_size=1),
        "run": RunSettings(pool_size=1),
        "request_deadline_s": 60,
    }
    return make_server(**{**values, **overrides})


def _run(url: str, source: str, key: str | None = None) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    body = {"language": "python", "source": source}
    response = httpx.post(f"{url}/v1/run", json=body, headers=headers, timeout=120)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def _background(url: str, source: str) -> Future[dict[str, Any]]:
    pool = ThreadPoolExecutor(1)
    future = pool.submit(_run, url, source)
    pool.shutdown(wait=False)
    return future


def _runner(server: RedisServer, workers: list[Worker], taken: set[str]) -> Worker:
    """The worker that claims a run's job not in `taken` (which it joins)."""
    client = server.client()
    found: list[Worker] = []

    def claimed() -> bool:
        for key in client.scan_iter(match=keys.claim_key("proctor-run-*")):
            name = client.get(key)
            if key in taken or name is None:
                continue
            taken.add(key)
            found.extend(w for w in workers if w.named(name.decode()))
        return bool(found)

    poll(claimed, timeout=60, every=0.02)
    return found[0]


def test_a_run_goes_to_a_worker_s_run_pool(
    redis_server: RedisServer,
    start_worker: Callable[..., Worker],
    make_server: Callable[..., Server],
) -> None:
    worker = start_worker(redis_server.url, env={"PROCTOR_RUN__POOL_SIZE": "2"})
    api = _api(make_server, redis_server.url)
    assert isinstance(api.state.runs, QueueRuns)
    result = _run(api.url, "import sys\nprint(sys.version_info[0])")
    assert (result["status"], result["stdout"]) == ("ok", "3\n"), result
    assert _runner(redis_server, [worker], set()) is worker
    # The API's run pool is the workers': their run loops and sandboxes, summed.
    stats = api.state.runs.stats()
    assert (stats.sandboxes.size, stats.answered) == (2, {"ok": 1})
    metrics = httpx.get(f"{api.url}/metrics").text
    assert "proctor_run_pool_size 2.0" in metrics
    assert httpx.get(f"{api.url}/readyz").json()["components"]["run_pool"] is True


def test_a_run_whose_worker_is_killed_runs_on_another(
    redis_server: RedisServer,
    start_worker: Callable[..., Worker],
    make_server: Callable[..., Server],
) -> None:
    workers = [start_worker(redis_server.url, domains="run", env=ONE_SANDBOX) for _ in range(2)]
    api = _api(make_server, redis_server.url)
    pending = _background(api.url, "import time\ntime.sleep(3)\nprint('done')")
    victim = _runner(redis_server, workers, set())
    victim.signal(signal.SIGKILL)
    result = pending.result(timeout=90)
    assert (result["status"], result["stdout"]) == ("ok", "done\n"), result


def test_a_run_lost_with_two_workers_is_a_failed_run(
    redis_server: RedisServer,
    start_worker: Callable[..., Worker],
    make_server: Callable[..., Server],
) -> None:
    workers = [start_worker(redis_server.url, domains="run", env=ONE_SANDBOX) for _ in range(2)]
    survivor = start_worker(redis_server.url, domains="sleep")
    api = _api(make_server, redis_server.url)
    pending = _background(api.url, "import time\ntime.sleep(30)")
    taken: set[str] = set()
    first = _runner(redis_server, workers, taken)
    first.signal(signal.SIGKILL)
    second = _runner(redis_server, workers, taken)
    assert second is not first
    second.signal(signal.SIGKILL)
    result = pending.result(timeout=90)
    assert result["status"] == "error", result
    assert result["stderr"] == LOST_TWICE.decode()
    assert result["error"] is None  # a failed run, not ours to retry into more workers
    assert survivor.process.poll() is None


def test_no_worker_serving_runs_is_workers_unavailable(
    redis_server: RedisServer,
    start_worker: Callable[..., Worker],
    make_server: Callable[..., Server],
) -> None:
    start_worker(redis_server.url, domains="sleep")
    api = _api(make_server, redis_server.url, queue_wait_s=1)
    result = _run(api.url, "print(1)")
    assert result["status"] == "infra_error", result
    assert result["error"]["code"] == "workers_unavailable"
    body = {"code": "print(1)", "language": "python"}
    compat = httpx.post(f"{api.url}/compat/sandbox-fusion/run_code", json=body, timeout=60)
    assert compat.status_code == 504, compat.text
    assert compat.json()["status"] == "SandboxError"
    assert "workers_unavailable" in compat.json()["message"]
    assert "Retry-After" in compat.headers


def test_the_sandbox_fusion_route_runs_on_the_workers(
    redis_server: RedisServer,
    start_worker: Callable[..., Worker],
    make_server: Callable[..., Server],
) -> None:
    start_worker(redis_server.url, domains="run", env=ONE_SANDBOX)
    api = _api(make_server, redis_server.url)
    body = {"code": "print(input()[::-1])", "language": "python", "stdin": "abc"}
    compat = httpx.post(f"{api.url}/compat/sandbox-fusion/run_code", json=body, timeout=60)
    assert compat.status_code == 200, compat.text
    answer = compat.json()
    assert (answer["status"], answer["run_result"]["stdout"]) == ("Success", "cba\n"), answer


def test_one_key_s_flood_does_not_queue_another_key_s_run_behind_it(
    redis_server: RedisServer,
    start_worker: Callable[..., Worker],
    make_server: Callable[..., Server],
) -> None:
    start_worker(redis_server.url, domains="run", env=ONE_SANDBOX)
    api = _api(make_server, redis_server.url, api_keys=(FLOOD_KEY, OTHER_KEY))
    poll(lambda: api.state.runs.stats().sandboxes.size == 1, timeout=60)
    finished: list[str] = []

    def run(key: str, name: str) -> None:
        result = _run(api.url, f"import time\ntime.sleep(1)\nprint('{name}')", key)
        assert result["status"] == "ok", result
        finished.append(name)

    with ThreadPoolExecutor(5) as pool:
        flood = [pool.submit(run, FLOOD_KEY, f"flood{n}") for n in range(4)]
        # one flood run on the worker's one run loop, the other three waiting for a grant
        poll(lambda: api.state.runs.stats().pending == 3, timeout=60)
        other = pool.submit(run, OTHER_KEY, "other")
        for future in [*flood, other]:
            future.result()
    # First come, first served would finish it last (index 4); the grants take it right after
    # the flood's next run.
    assert finished.index("other") <= 2, finished
