"""The fast request reader accepts only what the pydantic schema accepts, with the same values.

`service.work.ingest` decodes score requests with msgspec and falls back to the pydantic models of
`service.schemas` (the published contract) for anything msgspec does not accept outright. These
tests generate request bodies, valid and not, and check the two readers agree.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import msgspec
import pytest
from fastapi.exceptions import RequestValidationError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from service.schemas import ScoreItem, ScoreRequest
from service.work.ingest import WireRequest, decode_score_request

ITEM_FIELDS = (
    "id",
    "domain",
    "response",
    "reference",
    "reference_index",
    "finish_reason",
    "response_tokens",
    "max_response_tokens",
)

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, 1, -1, 5.0, 0.5, -0.0, 1e300, 2**64, 512, 513]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
    st.sampled_from(["", "x" * 64, "x" * 65, "x" * 512, "x" * 513, "stop", "length", "tired"]),
    st.sampled_from(["\ud800", "é", "\u2028", "math", "puzzle"]),
)
_json = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)


@st.composite
def _items(draw: st.DrawFn) -> Any:
    if draw(st.integers(0, 9)) == 0:
        return draw(_json)  # not even an object
    keys = draw(st.lists(st.sampled_from([*ITEM_FIELDS, "colour"]), unique=True, max_size=9))
    item = {key: draw(_json) for key in keys}
    if draw(st.booleans()):  # mostly well-typed values, so valid items are common
        item.setdefault("domain", draw(st.sampled_from(["math", "", "x" * 65])))
        item.setdefault("response", draw(st.text(max_size=20)))
        if draw(st.booleans()):
            item["reference_index"] = draw(st.sampled_from([0, 3, -1, 2.0, 2.5, True, None]))
        if draw(st.booleans()):
            item["reference"] = draw(st.one_of(st.none(), st.dictionaries(st.text(), _json)))
    return item


@st.composite
def _requests(draw: st.DrawFn) -> Any:
    if draw(st.integers(0, 19)) == 0:
        return draw(_json)
    body: dict[str, Any] = {}
    if draw(st.integers(0, 9)):
        body["items"] = draw(st.lists(_items(), max_size=4))
    for key in ("spec", "references", "extra"):
        if draw(st.booleans()):
            body[key] = draw(
                st.one_of(_json, st.lists(st.dictionaries(st.text(max_size=3), _json)))
            )
    return body


def _encode(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")


def _view(request: Any) -> tuple[Any, ...]:
    items = tuple(tuple(getattr(item, f) for f in ITEM_FIELDS) for item in request.items)
    return (request.spec, items, request.references)


def _pydantic(body: bytes) -> ScoreRequest | None:
    try:
        return ScoreRequest.model_validate(json.loads(body))
    except (ValidationError, ValueError):
        return None


@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_requests())
def test_the_fast_reader_accepts_a_subset_of_the_schema_with_equal_values(value: Any) -> None:
    body = _encode(value)
    reference = _pydantic(body)
    try:
        fast: WireRequest | None = msgspec.json.decode(body, type=WireRequest)
    except (msgspec.ValidationError, msgspec.DecodeError):
        fast = None
    if fast is not None:
        assert reference is not None, body
        assert _view(fast) == _view(reference)
    try:
        read = decode_score_request(body)
    except RequestValidationError as exc:
        assert reference is None, body
        assert all(error["loc"][0] == "body" for error in exc.errors())
    else:
        if read.rejected:  # items whose faults are their own fields: refused alone
            assert reference is None, body
            items = json.loads(body)["items"]
            for p in read.rejected:
                with pytest.raises(ValidationError):
                    ScoreItem.model_validate(items[p])
            return
        assert reference is not None, body
        assert _view(read) == _view(reference)


@pytest.mark.parametrize(
    ("body", "loc"),
    [
        (b'{"items": \xff}', ["body"]),
        (b'{"items": [}', ["body"]),
        (b"[" * 100_000 + b"]" * 100_000, ["body"]),
        (b'{"items": [{"domain": "math", "response": "x"}, 7]}', ["body", "items", 1]),
    ],
)
def test_unreadable_bodies_are_422_naming_the_body(
    client: httpx.Client, body: bytes, loc: list[Any]
) -> None:
    response = client.post("/v1/score", content=body, headers={"content-type": "application/json"})
    assert response.status_code == 422, response.text
    assert loc in [d["loc"] for d in response.json()["detail"]]


def test_a_body_that_is_not_json_says_where_decoding_stopped_in_words(
    client: httpx.Client,
) -> None:
    # The offset is a character position, not a field: `body.11` would read as a path.
    for route, body in (("/v1/score", b'{"items": [}'), ("/v1/puzzles/boxnet/sample", b'{"n": }')):
        response = client.post(route, content=body, headers={"content-type": "application/json"})
        assert response.status_code == 422, response.text
        (entry,) = response.json()["detail"]
        assert entry["loc"] == ["body"], route
        position = body.index(b"}", 3)
        assert entry["msg"] == f"invalid JSON at character {position}: Expecting value", route
        assert response.json()["error"]["message"] == f"body: {entry['msg']}"


def test_what_only_pydantic_reads_is_still_scored(client: httpx.Client) -> None:
    # A whole number written as a float, and a lone surrogate escape in a reference: msgspec
    # refuses both, the schema accepts them.
    body = (
        b'{"references": [{"answer": "7", "note": "\\ud800"}], "items": ['
        b'{"id": "a", "domain": "math", "response": "\\\\boxed{7}", "reference_index": 0.0}]}'
    )
    response = client.post("/v1/score", content=body, headers={"content-type": "application/json"})
    assert response.status_code == 200, response.text
    (result,) = response.json()["results"]
    assert result["score"] == 1.0
