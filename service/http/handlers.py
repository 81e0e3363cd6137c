"""The app's exception handlers: every error answered in `error_body`'s shape (docs/api.md,
"Errors"), whoever raised it (a route, FastAPI's validation, the dispatcher, a bug of ours)."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect
from starlette.routing import Match

from service.dispatch import DispatchRefused
from service.http.errors import error_body, invalid_json

__all__ = ["add_error_handlers"]

log = logging.getLogger(__name__)


def add_error_handlers(app: FastAPI) -> None:
    """Answer every error of `app` with `error_body`'s shape."""
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(DispatchRefused, _refused)
    app.add_exception_handler(ClientDisconnect, _client_gone)
    app.add_exception_handler(Exception, _internal_error)


def _allowed_methods(request: Request) -> str:
    """Every method some route takes at this path (Starlette names only the first route's)."""
    methods: set[str] = set()
    for route in request.app.routes:
        if isinstance(route, APIRoute) and route.matches(request.scope)[0] != Match.NONE:
            methods |= route.methods or set()
    return ", ".join(sorted(methods))


async def _http_error(request: Request, exc: Exception) -> Response:
    """FastAPI answers a body it cannot decode (not UTF-8) with a bare 400; the contract says a
    request that is not JSON is a 422 naming the body. A 405 names every allowed method."""
    if not isinstance(exc, StarletteHTTPException):
        raise exc
    headers = dict(exc.headers or {})
    if exc.status_code == 405:
        headers["Allow"] = _allowed_methods(request)
    if exc.status_code == 400:
        detail = [{"loc": ["body"], "msg": "the body is not UTF-8 JSON", "type": "json_invalid"}]
        return JSONResponse(error_body(422, detail), status_code=422)
    if exc.status_code in (204, 304):  # no body allowed
        return Response(status_code=exc.status_code, headers=headers)
    return JSONResponse(
        error_body(exc.status_code, exc.detail), status_code=exc.status_code, headers=headers
    )


async def _validation_error(request: Request, exc: Exception) -> Response:
    """422 naming each offending field. The offending input is not echoed back: it can be
    megabytes long, or a number JSON cannot carry (1e400 parses as infinity)."""
    errors = exc.errors() if isinstance(exc, RequestValidationError) else []
    errors = [_json_position_in_message(e) for e in errors]
    detail = [
        {
            "loc": list(e.get("loc", ())),
            "msg": str(e.get("msg", "")),
            "type": str(e.get("type", "")),
        }
        for e in errors[:50]
    ]
    return JSONResponse(error_body(422, detail), status_code=422)


def _json_position_in_message(error: Any) -> Any:
    """FastAPI's own decoding error (routes that read their body through it) in our words."""
    match error.get("type"), error.get("loc"):
        case "json_invalid", ("body", int(position)):
            return invalid_json(position, str(error.get("ctx", {}).get("error", "not JSON")))
    return error


async def _refused(request: Request, exc: Exception) -> Response:
    """A batch the dispatcher could not take at all (no live worker, the queue unreachable or
    full): 503 or 429 with `Retry-After`, and the reason."""
    if not isinstance(exc, DispatchRefused):
        raise exc
    headers = {"Retry-After": str(exc.retry_after_s)}
    return JSONResponse(
        error_body(exc.status_code, str(exc)), status_code=exc.status_code, headers=headers
    )


async def _client_gone(request: Request, exc: Exception) -> Response:
    """A client that went away before its body was read (or whose body was cut off by a limit):
    one INFO line, no traceback, since it is nothing of ours; the 499 goes nowhere."""
    log.info(
        "client disconnected before its request was read: %s %s", request.method, request.url.path
    )
    return Response(status_code=499)


async def _internal_error(request: Request, exc: Exception) -> Response:
    """A bug of ours: the same shape as every error (Starlette logs the exception)."""
    return JSONResponse(error_body(500, "internal server error"), status_code=500)
