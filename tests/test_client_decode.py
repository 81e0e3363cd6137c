"""The SDK's reply decoding: typed pydantic results, and the collector left as it was found."""

from __future__ import annotations

import gc
import json

import httpx
import pytest

from proctor_client import ProctorError, ScoreResult
from proctor_client._async_client import _parse
from proctor_client._models import ScoreResponse

RESULT = {
    "id": "a",
    "status": "ok",
    "reward": 1.0,
    "score": 1.0,
    "success": True,
    "parsed": True,
    "penalties": {},
    "details": {"extracted": "12", "path": "fast"},
    "error": None,
    "elapsed_ms": 0.5,
    "meta": {"k": [1, 2]},
}
BODY = {"spec": {"name": "prorl-v1", "version": "1.0.0", "hash": "h"}, "results": [RESULT] * 3}


def reply(body: object) -> httpx.Response:
    return httpx.Response(200, content=json.dumps(body).encode())


@pytest.mark.parametrize("enabled", [True, False])
def test_decoding_leaves_the_collector_as_it_was(enabled: bool) -> None:
    was = gc.isenabled()
    try:
        (gc.enable if enabled else gc.disable)()
        parsed = _parse(ScoreResponse, reply(BODY))
        assert gc.isenabled() is enabled
        with pytest.raises(ProctorError):
            _parse(ScoreResponse, reply({"results": [{"status": "maybe"}]}))
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()
    assert all(type(r) is ScoreResult for r in parsed.results)
    assert parsed.results[0].model_dump() == RESULT
