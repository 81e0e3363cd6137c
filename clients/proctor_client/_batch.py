"""Turning a call's items into request bodies: chunks in order, and within each chunk one
`references` entry per distinct reference (a GRPO group's 16 samples share their gold data)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pydantic_core

from proctor_client._models import ErrorInfo, ScoreItem, ScoreResult

__all__ = ["Chunk", "as_items", "chunk_items", "failed", "request_body"]

ItemLike = ScoreItem | Mapping[str, Any]


def as_items(items: Sequence[ItemLike]) -> list[ScoreItem]:
    """Each item validated (a mapping becomes a `ScoreItem`; a bad one raises ValidationError
    naming the field before anything is sent)."""
    return [i if isinstance(i, ScoreItem) else ScoreItem.model_validate(i) for i in items]


@dataclass(frozen=True)
class Chunk:
    """`items[start:start + len(items)]` of one call."""

    start: int
    items: list[ScoreItem]


def chunk_items(items: list[ScoreItem], size: int) -> list[Chunk]:
    return [Chunk(start, items[start : start + size]) for start in range(0, len(items), size)]


def _canonical(reference: dict[str, Any]) -> str:
    return json.dumps(reference, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def request_body(items: Sequence[ScoreItem], spec: str | None) -> bytes:
    """The JSON body of one `/v1/score` (or `/v1/jobs`) request for `items`.

    Equal references (the same object, or equal JSON) go once into the request's `references`
    table and the items point at them with `reference_index`. An item without a reference is sent
    without one, and the server answers it `invalid`.
    """
    table: list[dict[str, Any]] = []
    by_object: dict[int, int] = {}
    by_value: dict[str, int] = {}
    wire: list[dict[str, Any]] = []
    for item in items:
        entry = item.model_dump(exclude_none=True, exclude={"reference"})
        reference = item.reference
        if reference is not None:
            index = by_object.get(id(reference))
            if index is None:
                key = _canonical(reference)
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


def failed(items: Sequence[ScoreItem], code: str, message: str) -> list[ScoreResult]:
    """`infra_error` results for items the client could not get judged."""
    error = ErrorInfo(code=code, message=message)
    return [ScoreResult(id=i.id, status="infra_error", error=error, meta=i.meta) for i in items]
