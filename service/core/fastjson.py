"""JSON out of the service, fast: orjson writes responses, with pydantic's serializer behind it
for what orjson does not know; the bytes are the ones pydantic writes. (Score requests are read by
`service.work.ingest`.)
"""

from __future__ import annotations

import json
from typing import Any

import orjson
from fastapi import Response
from pydantic import BaseModel
from pydantic_core import PydanticSerializationError

__all__ = ["dump_json", "json_response"]


def _fields(value: Any) -> dict[str, Any]:
    """orjson's hook for what it cannot write itself: a response model becomes its declared
    fields, in order (what pydantic writes for our plain response models); anything else is
    refused, and the caller falls back to pydantic's serializer."""
    if isinstance(value, BaseModel):
        return {name: getattr(value, name) for name in type(value).model_fields}
    raise TypeError(f"{type(value).__name__} is not plain JSON")


def dump_json(model: BaseModel, exclude: set[str] | None = None) -> bytes:
    """The model as compact JSON bytes, as pydantic writes it (floats included), but written by
    orjson where it can, several times faster. Values orjson does not know go through pydantic;
    text that is not valid Unicode (lone surrogates from a client's JSON escapes) cannot be
    UTF-8, and such a body is written with ASCII escapes instead."""
    fields = _fields(model)
    for name in exclude or ():
        fields.pop(name, None)
    try:
        return orjson.dumps(fields, default=_fields)
    except TypeError:  # orjson.JSONEncodeError is one: a value only pydantic knows how to write
        return _dump_with_pydantic(model, exclude)


def _dump_with_pydantic(model: BaseModel, exclude: set[str] | None) -> bytes:
    try:
        return model.model_dump_json(exclude=exclude).encode()
    except PydanticSerializationError:
        data = model.model_dump(mode="json", exclude=exclude)
        return json.dumps(data, ensure_ascii=True, separators=(",", ":"), default=str).encode()


def json_response(model: BaseModel, status_code: int = 200) -> Response:
    return Response(dump_json(model), status_code=status_code, media_type="application/json")
