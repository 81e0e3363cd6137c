"""Reading a score request's body: decoded and validated in one pass, or refused exactly as the
published schema says.

A GRPO step's request is thousands of items and megabytes of response text. Decoding it to
dictionaries and then validating them with pydantic took ~30 ms for a 12 MB body; msgspec decodes
straight into the typed structs below, checking the same constraints as it goes, in ~12 ms. The
pydantic models in `service.schemas` stay the contract: they generate the OpenAPI schema and they
decide every request the fast reader does not accept outright. So the fast reader only ever
accepts a subset of what pydantic accepts, with the same values (tests/test_ingest.py compares
the two on generated requests), and anything else (a whole number written as `5.0`, a lone
surrogate escape, `NaN`, an unknown field, a malformed body) goes the pydantic way, which either
accepts it or answers the 422 naming the field.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, Protocol

import msgspec
import orjson
from fastapi import Request
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from reward_specs import ItemFields
from service.schemas import ScoreRequest

__all__ = [
    "RequestItem",
    "ScoreBody",
    "WireItem",
    "WireRequest",
    "decode_score_request",
    "read_score_request",
]


class WireItem(msgspec.Struct, forbid_unknown_fields=True):
    """`schemas.ScoreItem`, as msgspec reads it (same fields, same bounds, strict types)."""

    domain: Annotated[str, msgspec.Meta(min_length=1, max_length=64)]
    response: str
    id: Annotated[str, msgspec.Meta(max_length=512)] | None = None
    reference: dict[str, Any] | None = None
    reference_index: Annotated[int, msgspec.Meta(ge=0)] | None = None
    finish_reason: Literal["stop", "length"] | None = None
    response_tokens: Annotated[int, msgspec.Meta(ge=0)] | None = None
    max_response_tokens: Annotated[int, msgspec.Meta(gt=0)] | None = None


class WireRequest(msgspec.Struct, forbid_unknown_fields=True):
    """`schemas.ScoreRequest`, as msgspec reads it."""

    items: list[WireItem]
    spec: str | None = None
    references: list[dict[str, Any]] | None = None


class RequestItem(ItemFields, Protocol):
    """What the scoring path reads of a request's item: a `WireItem` or a `schemas.ScoreItem`
    (what `item_key` reads, plus where the reference is and the id)."""

    @property
    def id(self) -> str | None: ...
    @property
    def reference(self) -> dict[str, Any] | None: ...
    @property
    def reference_index(self) -> int | None: ...


ScoreBody = WireRequest | ScoreRequest
"""A validated score request, whichever reader accepted it."""

_DECODER = msgspec.json.Decoder(WireRequest)


def decode_score_request(body: bytes) -> ScoreBody:
    """The request in `body`, or `RequestValidationError` with FastAPI's locations
    (`["body", "items", 3, "response"]`) when the schema refuses it."""
    try:
        return _DECODER.decode(body)
    except (msgspec.ValidationError, msgspec.DecodeError):
        pass  # not necessarily wrong: pydantic decides, and names the field if it is
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        data = _loads_leniently(body)  # what JSON allows and orjson refuses (lone surrogates)
    try:
        return ScoreRequest.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_input=False)
        raise RequestValidationError(
            [{**error, "loc": ("body", *error["loc"])} for error in errors]
        ) from None


def _loads_leniently(body: bytes) -> Any:
    loc: tuple[str | int, ...]
    try:
        return json.loads(body)
    except UnicodeDecodeError:
        message, loc = "the body is not UTF-8 JSON", ("body",)
    except json.JSONDecodeError as exc:
        message, loc = f"JSON decode error: {exc.msg}", ("body", exc.pos)
    except RecursionError:
        message, loc = "the JSON is nested too deeply", ("body",)
    raise RequestValidationError([{"type": "json_invalid", "loc": loc, "msg": message}]) from None


async def read_score_request(request: Request) -> ScoreBody:
    return decode_score_request(await request.body())
