"""Jobs belong to the API key that created them: another key gets 404 for GET and DELETE, in
both job stores (this process's memory, and Redis in queue mode); an open service keeps one
tenant. And a job whose Redis record was partly lost answers `failed` `state_lost`, never 500."""

from __future__ import annotations

from collections.abc import Callable

import httpx

from service.queue.keys import job_key
from tests.helpers import Server, poll
from tests.redis_fixtures import TEST_REGISTRY, RedisServer

KEY_A = "owner-a-0123456789abcdef"
KEY_B = "owner-b-0123456789abcdef"
ITEM = {"domain": "math", "response": "\\boxed{4}", "reference": {"answer": "4"}}


def _client(server: Server, key: str) -> httpx.Client:
    headers = {"Authorization": f"Bearer {key}"}
    return httpx.Client(base_url=server.url, headers=headers, timeout=60)


def _check_ownership(server: Server) -> str:
    with _client(server, KEY_A) as a, _client(server, KEY_B) as b:
        job_id = a.post("/v1/jobs", json={"items": [ITEM]}).json()["job_id"]
        poll(lambda: a.get(f"/v1/jobs/{job_id}").json()["status"] == "done", timeout=60)
        assert b.get(f"/v1/jobs/{job_id}").status_code == 404
        assert b.delete(f"/v1/jobs/{job_id}").status_code == 404
        assert a.get(f"/v1/jobs/{job_id}").status_code == 200  # B's DELETE did nothing
        return str(job_id)


def test_a_job_is_its_key_s_in_memory(make_server: Callable[..., Server]) -> None:
    server = make_server(api_keys=(KEY_A, KEY_B))
    job_id = _check_ownership(server)
    with _client(server, KEY_A) as a:
        assert a.delete(f"/v1/jobs/{job_id}").status_code == 200


def test_a_job_is_its_key_s_in_redis_and_a_lost_record_is_state_lost(
    make_server: Callable[..., Server],
    redis_server: RedisServer,
    start_worker: Callable[..., object],
) -> None:
    start_worker(redis_server.url)
    server = make_server(
        api_keys=(KEY_A, KEY_B), queue_url=redis_server.url, registry=TEST_REGISTRY, workers=1
    )
    job_id = _check_ownership(server)
    client = redis_server.client()
    client.hdel(job_key(job_id), "total", "status")  # what a restart mid-write leaves
    with _client(server, KEY_A) as a:
        reply = a.get(f"/v1/jobs/{job_id}")
    assert reply.status_code == 200, reply.text
    assert reply.json()["status"] == "failed"
    assert reply.json()["error"]["code"] == "state_lost"
