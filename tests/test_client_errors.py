"""The SDK's exceptions: a malformed item is a `ProctorValidationError` (a `ProctorError`) naming
its position and field before anything is sent; a client that has never reached its server
raises `ProctorUnreachable` instead of returning nothing but `infra_error`, while a client that
has had an answer keeps turning refusals into `infra_error` results (a redeploy pauses a trainer,
it does not crash it)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from proctor_client import (
    AsyncProctorClient,
    Backoff,
    ProctorClient,
    ProctorError,
    ProctorUnreachable,
    ProctorValidationError,
)
from tests.fault_proxy import Refusal, fault_proxy
from tests.helpers import Server, free_port

QUICK = Backoff(base_s=0.01, max_s=0.01)
ITEM: dict[str, Any] = {"domain": "math", "response": "\\boxed{1}", "reference": {"answer": "1"}}


def test_a_bad_item_is_a_documented_proctor_error_naming_its_place() -> None:
    bad: list[dict[str, Any]] = [
        ITEM,
        {**ITEM, "finish_reason": "eos"},
        {**ITEM, "response_tokens": -1},
    ]
    with ProctorClient(f"http://127.0.0.1:{free_port()}") as client:
        with pytest.raises(ProctorValidationError) as raised:
            client.score(bad)
        assert not client.reached  # refused before anything was sent
    error = raised.value
    assert isinstance(error, ProctorError) and isinstance(error, ValueError)
    assert "items[1].finish_reason" in str(error) and "items[2].response_tokens" in str(error)
    assert [tuple(e["loc"]) for e in error.detail] == [(1, "finish_reason"), (2, "response_tokens")]


def test_a_url_nobody_answers_raises_unreachable_naming_it() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with ProctorClient(url, max_retries=1) as client:
        with pytest.raises(ProctorUnreachable, match=f"cannot reach Proctor at {url}"):
            client.score([ITEM])
        with pytest.raises(ProctorUnreachable):
            client.jobs.submit([ITEM])
    assert issubclass(ProctorUnreachable, ProctorError)


def test_refusals_after_a_first_answer_stay_per_item_infra_errors(server: Server) -> None:
    async def run() -> list[str]:
        with fault_proxy(server.url) as proxy:
            client = AsyncProctorClient(proxy.url, backoff=QUICK, max_retries=1)
            first = await client.score([ITEM])
            assert client.reached and first[0].status == "ok"
        try:  # the proxy has gone away, as a redeployed server does
            return [r.status for r in await client.score([ITEM, ITEM])]
        finally:
            await client.aclose()

    assert asyncio.run(run()) == ["infra_error", "infra_error"]


def test_a_server_answering_only_503_was_reached_so_items_are_infra_errors(
    server: Server,
) -> None:
    with (
        fault_proxy(server.url, refusals=[Refusal(503)] * 2) as proxy,
        ProctorClient(proxy.url, max_retries=1) as client,
    ):
        results = client.score([ITEM])
        assert client.reached
    assert [r.error.code for r in results if r.error] == ["client_retries_exhausted"]
