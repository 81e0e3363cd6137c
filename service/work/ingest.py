"""Reading a score request's body: decoded and validated in one pass, or refused exactly as the
published schema says.

A GRPO step's request is thousands of items and megabytes of response text. Decoding it to
dictionaries and then validating them with pydantic costs more than twice what msgspec takes to
decode straight into the typed structs below, checking the same constraints as it goes. The
pydantic models in `service.schemas` stay the contract: they generate the OpenAPI schema and they
decide every request the fast reader does not accept outright. So the fast reader only ever
accepts a subset of what pydantic accepts, with the same values (tests/test_ingest.py compares
the two on generated requests), and anything else (a whole number written as `5.0`, a lone
surrogate escape, `NaN`, an unknown field, a malformed body) goes the pydantic way, which either
accepts it or answers the 422 naming the field.

One bad item does not sink a batch: an item whose faults are its own fields (a field the schema
does not know, a value of the wrong type or out of bounds, a required field missing) is read
without them and comes back `invalid` naming each field. A body nested too deeply to decode,
or holding a number too long to convert, is a 422 naming the body, never a server error.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, NoReturn, Protocol

import msgspec
import orjson
from fastapi import Request
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from reward_specs import ItemFields
from service.http.errors import invalid_json
from service.schemas import FinishReason, ScoreRequest

__all__ = [
    "RequestItem",
    "ScoreBody",
    "WireItem",
    "WireRequest",
    "decode_score_request",
    "loads_json",
    "read_score_request",
    "validate_score_request",
]


class WireItem(msgspec.Struct, forbid_unknown_fields=True):
    """`schemas.ScoreItem`, as msgspec reads it (same fields, same bounds, strict types)."""

    domain: Annotated[str, msgspec.Meta(min_length=1, max_length=64)]
    response: str
    id: Annotated[str, msgspec.Meta(max_length=512)] | None = None
    reference: dict[str, Any] | None = None
    reference_index: Annotated[int, msgspec.Meta(ge=0)] | None = None
    finish_reason: FinishReason | None = None
    response_tokens: Annotated[int, msgspec.Meta(ge=0)] | None = None
    max_response_tokens: Annotated[int, msgspec.Meta(gt=0)] | None = None
    meta: dict[str, Any] | None = None


class WireRequest(msgspec.Struct, forbid_unknown_fields=True):
    """`schemas.ScoreRequest`, as msgspec reads it."""

    items: list[WireItem]
    spec: str | None = None
    references: list[dict[str, Any]] | None = None


class RequestItem(ItemFields, Protocol):
    """What the scoring path reads of a request's item: a `WireItem` or a `schemas.ScoreItem`
    (what `item_keyer` reads, plus where the reference is and the id)."""

    @property
    def id(self) -> str | None: ...
    @property
    def reference(self) -> dict[str, Any] | None: ...
    @property
    def reference_index(self) -> int | None: ...
    @property
    def meta(self) -> dict[str, Any] | None: ...


@dataclass(frozen=True, slots=True)
class ScoreBody:
    """A validated score request, whichever reader accepted it."""

    items: Sequence[RequestItem]
    spec: str | None = None
    references: list[dict[str, Any]] | None = None
    rejected: Mapping[int, str] = field(default_factory=dict)
    """Position -> why that item is refused (fields the schema does not know): the item was read
    without them, and its result is `invalid` with this message."""
    strict: bool = True
    """Read by the strict reader, whose values hold no NaN and no integer too long to print."""

    def part(self, start: int, stop: int) -> ScoreBody:
        """Items `start` to `stop` as a body of their own (a job scores its body in parts)."""
        rejected = {p - start: why for p, why in self.rejected.items() if start <= p < stop}
        return ScoreBody(self.items[start:stop], self.spec, self.references, rejected, self.strict)


_DECODER = msgspec.json.Decoder(WireRequest)


def decode_score_request(body: bytes) -> ScoreBody:
    """The request in `body`, or `RequestValidationError` with FastAPI's locations
    (`["body", "items", 3, "response"]`) when the schema refuses it."""
    try:
        fast = _DECODER.decode(body)
        return ScoreBody(items=fast.items, spec=fast.spec, references=fast.references)
    except (msgspec.ValidationError, msgspec.DecodeError):
        pass  # not necessarily wrong: pydantic decides, and names the field if it is
    except RecursionError:
        _refuse_body("the JSON is nested too deeply")
    return validate_score_request(loads_json(body))


def validate_score_request(data: Any) -> ScoreBody:
    """A decoded request checked against the schema. An item whose faults are all its own
    fields (unknown, of the wrong type, out of bounds, missing) is kept without them and listed
    in `rejected`, naming each; anything else wrong (the body is not an object, `items` is not
    a list of objects, `spec` or `references` is wrong) is the 422."""
    try:
        request = ScoreRequest.model_validate(data)
        return ScoreBody(request.items, request.spec, request.references, strict=False)
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_input=False)
    faults = _item_faults(errors)
    if faults:
        for position, fields in faults.items():
            item = data["items"][position]
            for name in fields:
                item.pop(name, None)
            item.setdefault("domain", REFUSED_DOMAIN)  # what is left must read as an item
            item.setdefault("response", "")
        body = validate_score_request(data)  # no faulty field is left: this cannot recurse again
        rejected = {p: _describe(fields) for p, fields in faults.items()}
        return ScoreBody(body.items, body.spec, body.references, rejected, strict=False)
    raise RequestValidationError(
        [{**error, "loc": ("body", *error["loc"])} for error in errors]
    ) from None


REFUSED_DOMAIN = "unknown"
"""The domain an item is read with when its own `domain` was refused (it is never scored)."""


def _item_faults(errors: Sequence[Mapping[str, Any]]) -> dict[int, dict[str, Mapping[str, Any]]]:
    """Position -> {field: its first error}, if every error is in a field of an item (and so
    the request is fine but for those items); else empty."""
    faults: dict[int, dict[str, Mapping[str, Any]]] = {}
    for error in errors:
        loc = error["loc"]
        if not (
            len(loc) >= 3
            and loc[0] == "items"
            and isinstance(loc[1], int)
            and isinstance(loc[2], str)
        ):
            return {}
        faults.setdefault(loc[1], {}).setdefault(loc[2], error)
    return faults


def _describe(fields: Mapping[str, Mapping[str, Any]]) -> str:
    """`unknown field `x``, `` `reference`: Input should be a valid dictionary``, ..."""
    stray = [name for name, error in fields.items() if error["type"] == "extra_forbidden"]
    parts = []
    if stray:
        label = "unknown field" + ("s " if len(stray) > 1 else " ")
        parts.append(label + ", ".join(f"`{name}`" for name in stray))
    for name, error in fields.items():
        if error["type"] != "extra_forbidden":
            parts.append(f"`{name}`: {error['msg']}")
    return "; ".join(parts)


def loads_json(body: bytes | str) -> Any:
    """`body` decoded as JSON, or `RequestValidationError` naming the body (and the position,
    where there is one). Lenient where JSON is (lone surrogate escapes), never a server error."""
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        pass  # what JSON allows and orjson refuses (lone surrogates): the standard library's turn
    loc: tuple[str, ...]
    try:
        return json.loads(body)
    except UnicodeDecodeError:
        message, loc = "the body is not UTF-8 JSON", ("body",)
    except json.JSONDecodeError as exc:
        raise RequestValidationError([invalid_json(exc.pos, exc.msg)]) from None
    except RecursionError:
        message, loc = "the JSON is nested too deeply", ("body",)
    except ValueError:  # an integer of more digits than Python converts
        digits = sys.int_info.default_max_str_digits
        message, loc = f"the JSON holds an integer of more than {digits} digits", ("body",)
    raise RequestValidationError([{"type": "json_invalid", "loc": loc, "msg": message}]) from None


def _refuse_body(message: str) -> NoReturn:
    raise RequestValidationError([{"type": "json_invalid", "loc": ("body",), "msg": message}])


async def read_score_request(request: Request) -> ScoreBody:
    return decode_score_request(await request.body())
