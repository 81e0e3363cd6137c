"""Turning a call's items into request bodies: chunks in order, and within each chunk one
`references` entry per distinct reference (a GRPO group's 16 samples share their gold data).

Items travel as plain dicts, validated in one pass by pydantic's core (a `ScoreItem` per item
would cost several times more on a 4,096-item step, for objects nobody reads).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, NotRequired

import pydantic_core
from pydantic import (
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WrapValidator,
)
from typing_extensions import TypedDict

from proctor_client._errors import ProctorValidationError
from proctor_client._models import ErrorInfo, FinishReason, ScoreItem, ScoreResult

__all__ = ["ItemLike", "ItemSlice", "as_wire_items", "failed", "request_body", "slice_items"]

ItemLike = ScoreItem | Mapping[str, Any]


def _dict_as_is(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    return value if type(value) is dict else handler(value)


_Reference = Annotated[dict[str, Any], WrapValidator(_dict_as_is)]
"""A dict passes as it is (a copy per item would be one more object for the collector, for
nothing: the server validates what is inside); another mapping is copied into one."""


class _WireItem(TypedDict):
    """`ScoreItem`'s fields and bounds, as a dict."""

    __pydantic_config__ = ConfigDict(extra="forbid")  # type: ignore[misc]

    id: NotRequired[str | None]
    domain: str
    response: str
    reference: NotRequired[_Reference | None]
    finish_reason: NotRequired[FinishReason | None]
    response_tokens: NotRequired[Annotated[int, Field(ge=0)] | None]
    max_response_tokens: NotRequired[Annotated[int, Field(gt=0)] | None]
    meta: NotRequired[dict[str, Any] | None]


_WIRE_ITEMS = TypeAdapter(list[_WireItem])


def as_wire_items(items: Sequence[ItemLike]) -> list[dict[str, Any]]:
    """Each item validated, as the dict it is sent as (a bad one raises ProctorValidationError
    naming its position and field, before anything is sent)."""
    plain = [i.model_dump(exclude_none=True) if isinstance(i, ScoreItem) else i for i in items]
    try:
        validated: list[dict[str, Any]] = _WIRE_ITEMS.validate_python(plain)  # type: ignore[assignment]
    except ValidationError as exc:
        problems = exc.errors(include_url=False, include_input=False)
        where = "; ".join(f"{_place(e['loc'])}: {e['msg']}" for e in problems[:5])
        more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
        raise ProctorValidationError(f"bad items: {where}{more}", detail=problems) from None
    return validated


def _place(loc: tuple[int | str, ...]) -> str:
    """`items[3].finish_reason` for pydantic's location (3, 'finish_reason')."""
    index, *fields = loc or ("?",)
    return f"items[{index}]" + "".join(f".{f}" for f in fields)


@dataclass(frozen=True)
class ItemSlice:
    """`items[start:start + len(items)]` of one call: what one request sends (the client's
    `chunk_size` bounds its length), halved further only if its body is too large."""

    start: int
    items: list[dict[str, Any]]


def slice_items(items: list[dict[str, Any]], size: int) -> list[ItemSlice]:
    """A call's items cut in order into slices of `size` (the last one shorter)."""
    return [ItemSlice(start, items[start : start + size]) for start in range(0, len(items), size)]


def request_body(items: Sequence[dict[str, Any]], spec: str | None) -> bytes:
    """The JSON body of one `/v1/score` (or `/v1/jobs`) request for `items`.

    Equal references (the same object, or the same JSON with keys in the same order) go once into
    the request's `references` table and the items point at them with `reference_index`. Fields
    that are None are left out, and an item without a reference is sent without one (the server
    answers it `invalid`).
    """
    table: list[dict[str, Any]] = []
    by_object: dict[int, int] = {}
    by_value: dict[bytes, int] = {}
    wire: list[dict[str, Any]] = []
    for item in items:
        entry = {k: v for k, v in item.items() if v is not None and k != "reference"}
        reference = item.get("reference")
        if reference is not None:
            index = by_object.get(id(reference))
            if index is None:
                key = pydantic_core.to_json(reference)
                index = by_value.get(key)
                if index is None:
                    index = by_value[key] = len(table)
                    table.append(reference)
                by_object[id(reference)] = index
            entry["reference_index"] = index
        wire.append(entry)
    body: dict[str, Any] = {"items": wire}
    if table:
        body["references"] = table
    if spec is not None:
        body["spec"] = spec
    return pydantic_core.to_json(body)


def failed(items: Sequence[dict[str, Any]], code: str, message: str) -> list[ScoreResult]:
    """`infra_error` results for items the client could not get judged."""
    error = ErrorInfo(code=code, message=message)
    return [
        ScoreResult(id=i.get("id"), status="infra_error", error=error, meta=i.get("meta"))
        for i in items
    ]
