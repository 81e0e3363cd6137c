"""The body of every error response (docs/api.md, "Errors"): one shape for every route and for
the middlewares that answer before a route runs (the app's exception handlers, which give every
error this shape, are `service.http.handlers`). No FastAPI here: `proctor specs` imports it."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["ERROR_CODES", "error_body", "error_json", "invalid_json"]

ERROR_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "request_too_large",
    422: "invalid_request",
    429: "too_many_requests",
    431: "headers_too_large",
    499: "client_disconnected",
    500: "internal_error",
    503: "unavailable",
}
"""`error.code` of an error body whose route names no code of its own, by HTTP status."""


def error_body(status: int, detail: Any, code: str | None = None) -> dict[str, Any]:
    """Every error's body (docs/api.md, "Errors"): `detail` as each route has always given it,
    and `error: {code, message}`, one shape for every route."""
    if isinstance(detail, dict) and isinstance(detail.get("code"), str):
        error = {"code": detail["code"], "message": str(detail.get("message", ""))}
    else:
        if isinstance(detail, list):  # a 422's `{loc, msg, type}` entries
            parts = [f"{'.'.join(map(str, d['loc']))}: {d['msg']}" for d in detail[:5]]
            message = "; ".join(parts) + ("; ..." if len(detail) > 5 else "")
        else:
            message = str(detail)
        error = {"code": code or ERROR_CODES.get(status, f"http_{status}"), "message": message}
    return {"detail": detail, "error": error}


def error_json(status: int, detail: Any, code: str | None = None) -> bytes:
    """`error_body` as the compact JSON a middleware sends before any route runs."""
    return json.dumps(error_body(status, detail, code), separators=(",", ":")).encode()


def invalid_json(position: int, reason: str) -> dict[str, Any]:
    """A 422 entry for a body that is not JSON: the character offset where decoding stopped is
    said in the message, not put in `loc` (where it would read as a field, `body.27`)."""
    message = f"invalid JSON at character {position}: {reason}"
    ctx = {"position": position, "reason": reason}
    return {"type": "json_invalid", "loc": ("body",), "msg": message, "ctx": ctx}
