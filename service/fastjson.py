"""JSON in and out of the service, fast: orjson to read request bodies, pydantic's serializer to
write responses. A 16 MB batch of puzzles by value spent most of its time in the standard
library's `json` before this; the bytes read and written are the same.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from typing import Any

import orjson
from fastapi import Request, Response
from fastapi.routing import APIRoute
from pydantic import BaseModel
from pydantic_core import PydanticSerializationError

__all__ = ["FastJSONRoute", "dump_json", "json_response"]


class _FastJSONRequest(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            body = await self.body()
            try:
                self._json = orjson.loads(body)
            except orjson.JSONDecodeError:
                # What orjson refuses but JSON allows (a lone surrogate escape, say) is read by the
                # standard library, so the service accepts exactly what it accepted before.
                self._json = json.loads(body)
        return self._json


class FastJSONRoute(APIRoute):
    """A route whose request body is decoded with orjson."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def fast_handler(request: Request) -> Response:
            return await handler(_FastJSONRequest(request.scope, request.receive))

        return fast_handler


def dump_json(model: BaseModel, exclude: set[str] | None = None) -> bytes:
    """The model as compact JSON bytes. Text that is not valid Unicode (lone surrogates from a
    client's JSON escapes) cannot be UTF-8: such a body is written with ASCII escapes instead."""
    try:
        return model.model_dump_json(exclude=exclude).encode()
    except PydanticSerializationError:
        data = model.model_dump(mode="json", exclude=exclude)
        return json.dumps(data, ensure_ascii=True, separators=(",", ":"), default=str).encode()


def json_response(model: BaseModel, status_code: int = 200) -> Response:
    return Response(dump_json(model), status_code=status_code, media_type="application/json")
