"""The SDK against a real Proctor server: chunks reassembled in order, shared references, retries
after 503 and 429, none after 422, a deadline that keeps what finished, jobs, auth, transports.

Refusals and a chunk that never comes back are produced by tests/fault_proxy.py in front of the
real app; every score is the app's own.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from types import MappingProxyType
from typing import Any

import httpx
import pytest

from proctor_client import (
    AsyncProctorClient,
    Backoff,
    ProctorClient,
    ProctorError,
    ScoreItem,
    ScoreResult,
)
from proctor_client._batch import as_wire_items, request_body
from tests.fault_proxy import Refusal, fault_proxy
from tests.helpers import Server

QUICK = Backoff(base_s=0.01, max_s=0.01)
"""Retries without waiting, unless the server's Retry-After says otherwise."""


def math_items(n: int, prefix: str = "i") -> list[dict[str, Any]]:
    """Item i answers i % 7 against a gold of i % 5: right exactly when those agree, so a result
    out of place shows up as a wrong reward."""
    return [
        {
            "id": f"{prefix}{i}",
            "domain": "math",
            "response": f"so \\boxed{{{i % 7}}}",
            "reference": {"answer": str(i % 5)},
        }
        for i in range(n)
    ]


def expected_reward(i: int) -> float:
    return 1.0 if i % 7 == i % 5 else 0.0


def assert_in_order(results: list[ScoreResult], n: int, prefix: str = "i") -> None:
    assert len(results) == n
    for i, result in enumerate(results):
        assert result.id == f"{prefix}{i}"
        assert result.status == "ok", result
        assert result.reward == expected_reward(i), (i, result)


def test_twenty_thousand_items_come_back_in_order(server: Server) -> None:
    with ProctorClient(server.url, chunk_size=700, max_concurrency=4) as client:
        results = client.score(math_items(20_000))
    assert_in_order(results, 20_000)


def test_a_grpo_group_sends_its_reference_once(server: Server) -> None:
    groups = [
        ScoreItem(
            id=f"g{g}-s{s}",
            domain="math",
            response=f"\\boxed{{{s % 3}}}",
            reference={"answer": str(g % 3)},
        )
        for g in range(4)
        for s in range(16)
    ]
    body = json.loads(request_body(as_wire_items(groups), None))
    # Groups 0 and 3 have equal gold data: one entry serves both.
    assert body["references"] == [{"answer": "0"}, {"answer": "1"}, {"answer": "2"}]
    assert [i["reference_index"] for i in body["items"]][::16] == [0, 1, 2, 0]
    assert all("reference" not in i for i in body["items"])
    with ProctorClient(server.url) as client:
        results = client.score(groups)
    assert [r.reward for r in results] == [
        1.0 if s % 3 == g % 3 else 0.0 for g in range(4) for s in range(16)
    ]


def test_a_chunk_too_large_for_one_request_goes_as_halves(server: Server) -> None:
    # 100 items of about 2 KB in one chunk, against 64 KiB per request: halved twice, so four
    # requests of 25 items, each under the bound, and the results still in order.
    items = [dict(i, response="w" * 2000 + i["response"]) for i in math_items(100)]
    assert len(request_body(as_wire_items(items[:25]), None)) <= 64 * 1024
    with fault_proxy(server.url) as proxy:
        client = AsyncProctorClient(proxy.url, max_request_bytes=64 * 1024)
        results = asyncio.run(_score_and_close(client, items))
    assert_in_order(results, 100)
    assert [path for _, path in proxy.arrivals] == ["/v1/score"] * 4


def test_a_503_then_a_429_with_retry_after_are_retried(server: Server) -> None:
    refusals = [Refusal(503), Refusal(429, {"Retry-After": "2"})]
    with fault_proxy(server.url, refusals=refusals) as proxy:
        client = AsyncProctorClient(proxy.url, backoff=QUICK)
        results = asyncio.run(_score_and_close(client, math_items(40)))
    assert_in_order(results, 40)
    times = [t for t, _ in proxy.arrivals]
    assert len(times) == 3
    # Honoured: without the header the wait would have been at most 0.01 s.
    assert times[2] - times[1] >= 2.0


def test_retries_run_out_as_infra_errors_not_an_exception(server: Server) -> None:
    with fault_proxy(server.url, refusals=[Refusal(503)] * 3) as proxy:
        client = AsyncProctorClient(proxy.url, backoff=QUICK, max_retries=2)
        results = asyncio.run(_score_and_close(client, math_items(5)))
    assert len(proxy.arrivals) == 3
    assert [r.status for r in results] == ["infra_error"] * 5
    assert {r.error.code for r in results if r.error} == {"client_retries_exhausted"}
    assert all(r.reward is None for r in results)


def test_a_422_is_raised_at_once(server: Server) -> None:
    with (
        fault_proxy(server.url) as proxy,
        ProctorClient(proxy.url) as client,
        pytest.raises(ProctorError) as raised,
    ):
        client.score(math_items(3), spec="no-such-spec")
    assert raised.value.status_code == 422
    assert raised.value.detail[0]["loc"] == ["body", "spec"]
    assert len(proxy.arrivals) == 1


def test_connection_refused_after_an_answer_is_retried_then_reported_per_item(
    server: Server,
) -> None:
    async def run() -> list[ScoreResult]:
        with fault_proxy(server.url) as proxy:
            client = AsyncProctorClient(proxy.url, backoff=QUICK, max_retries=1)
            assert_in_order(await client.score(math_items(2)), 2)  # the client has reached it
        return await _score_and_close(client, math_items(3))  # the proxy is gone

    results = asyncio.run(run())
    assert [r.error.code for r in results if r.error] == ["client_retries_exhausted"] * 3
    assert "Error" in (results[0].error.message if results[0].error else "")


def test_a_deadline_keeps_the_finished_chunks(server: Server) -> None:
    items = math_items(30)
    items[25]["id"] = "hold-me"  # its chunk (20..29) never gets an answer
    with (
        fault_proxy(server.url, hold_marker=b"hold-me") as proxy,
        ProctorClient(proxy.url, chunk_size=10, max_concurrency=3) as client,
    ):
        results = client.score(items, deadline_s=3.0)
    assert_in_order(results[:20], 20)
    assert [r.status for r in results[20:]] == ["infra_error"] * 10
    assert {r.error.code for r in results[20:] if r.error} == {"client_deadline"}
    assert [r.id for r in results[20:]] == [i["id"] for i in items[20:]]


def test_jobs_submit_and_wait(server: Server) -> None:
    with ProctorClient(server.url) as client:
        job_id = client.jobs.submit(math_items(50))
        results = client.jobs.wait(job_id, poll_s=0.05, timeout_s=120)
    assert_in_order(results, 50)


def test_waiting_on_a_cancelled_job_raises() -> None:
    """A job another client cancelled (DELETE) ends the wait, as a failed one does."""
    error = {"code": "cancelled", "message": "the job was cancelled by a client"}
    body = {"job_id": "j1", "status": "cancelled", "total": 3, "completed": 1, "error": error}
    transport = httpx.MockTransport(lambda request: httpx.Response(200, json=body))
    with ProctorClient("http://proctor", transport=transport) as client:
        assert client.jobs.get("j1").status == "cancelled"
        with pytest.raises(ProctorError, match="job j1 cancelled: the job was cancelled"):
            client.jobs.wait("j1", poll_s=0.01, timeout_s=5)


def test_an_api_key_is_sent(make_server: Callable[..., Server]) -> None:
    key = "sdk-test-key-0123456789"
    srv = make_server(api_keys=(key,))
    with ProctorClient(srv.url) as anonymous, pytest.raises(ProctorError) as raised:
        anonymous.score(math_items(2))
    assert raised.value.status_code == 401
    with ProctorClient(srv.url, api_key=key) as client:
        assert_in_order(client.score(math_items(2)), 2)


def test_a_blocking_transport_is_used_from_the_async_core(server: Server) -> None:
    with ProctorClient(server.url, transport=httpx.HTTPTransport()) as client:
        assert_in_order(client.score(math_items(30)), 30)


def test_the_async_client_in_process_over_asgi(server: Server) -> None:
    """The app itself as the transport: no socket between the SDK and the service."""

    async def run() -> list[ScoreResult]:
        async with AsyncProctorClient(
            "http://proctor", transport=httpx.ASGITransport(app=server.app), chunk_size=8
        ) as client:
            return await client.score(math_items(30))

    assert_in_order(asyncio.run(run()), 30)


def test_a_malformed_item_fails_before_sending() -> None:
    with ProctorClient("http://127.0.0.1:9") as client, pytest.raises(ValueError, match="refrence"):
        client.score([{"domain": "math", "response": "1", "refrence": {"answer": "1"}}])


def test_a_reference_dict_is_sent_as_it_is_and_a_mapping_as_a_copy() -> None:
    gold = {"answer": "1"}
    proxy = MappingProxyType({"answer": "2"})
    sent = as_wire_items(
        [
            {"domain": "math", "response": "1", "reference": gold},
            {"domain": "math", "response": "2", "reference": proxy},
        ]
    )
    assert sent[0]["reference"] is gold
    assert type(sent[1]["reference"]) is dict and sent[1]["reference"] == {"answer": "2"}
    with pytest.raises(ValueError, match=r"items\[0\]\.reference: Input should be a valid dict"):
        as_wire_items([{"domain": "math", "response": "1", "reference": "1"}])


async def _score_and_close(
    client: AsyncProctorClient, items: list[dict[str, Any]]
) -> list[ScoreResult]:
    async with client:
        return await client.score(items)
