"""Responses are written by orjson, byte for byte what pydantic's serializer writes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from service.core.fastjson import dump_json
from service.schemas import ErrorInfo, ScoreResponse, ScoreResult, SpecSummary


def _result(**fields: Any) -> ScoreResult:
    return ScoreResult(status="ok", **fields)


@pytest.mark.parametrize(
    "result",
    [
        _result(reward=0.05, score=1e-05, success=True, parsed=True, elapsed_ms=1.234),
        _result(score=1e22, details={"nested": {"list": [1.5, None, "x"]}, "tuple": (1, 2)}),
        _result(details={"nan": float("nan"), "inf": float("inf"), "neg": -0.0}),
        _result(details={"set": {3}, "big": 2**70}),  # orjson refuses both: pydantic writes them
        ScoreResult(status="invalid", error=ErrorInfo(code="x", message="naïve ✓")),
    ],
)
def test_same_bytes_as_pydantic(result: ScoreResult) -> None:
    assert dump_json(result) == result.model_dump_json().encode()
    assert dump_json(result, exclude={"elapsed_ms"}) == (
        result.model_dump_json(exclude={"elapsed_ms"}).encode()
    )
    response = ScoreResponse(spec=SpecSummary(name="s", version="1", hash="h"), results=[result])
    assert dump_json(response) == response.model_dump_json().encode()


def test_a_lone_surrogate_is_written_with_ascii_escapes() -> None:
    result = _result(details={"extracted": "a\ud800b"})
    body = dump_json(result)
    assert body.isascii()
    assert json.loads(body)["details"]["extracted"] == "a\ud800b"


def test_a_batch_sharing_result_objects_is_written_as_pydantic_writes_it() -> None:
    shared = _result(reward=1.0, score=1.0, details={"extracted": "42"})
    other = _result(reward=0.0, score=0.0, details={"reason": "no_answer"})
    results = [shared, other, shared, shared, _result(id="x", elapsed_ms=0.5), other]
    response = ScoreResponse(spec=SpecSummary(name="s", version="1", hash="h"), results=results)
    assert dump_json(response) == response.model_dump_json().encode()
    odd = [shared, _result(details={"set": {1}}), shared]  # one value only pydantic writes
    response = ScoreResponse(spec=SpecSummary(name="s", version="1", hash="h"), results=odd)
    assert dump_json(response) == response.model_dump_json().encode()
