"""Log lines as text or as JSON objects, each carrying the id of the request it concerns.

Every HTTP request gets an id: the caller's `X-Request-ID` when it is a plain token, else a new
one. It is echoed in the response header and set in a context variable for the request's task,
so any line logged while serving it names it. Work that outlives the request's task (a queue
batch watched from another thread) captures `request_id()` when it starts and logs with
`extra={"request_id": ...}`.
"""

from __future__ import annotations

import contextvars
import json
import logging
import re
import urllib.parse
import uuid
from datetime import UTC, datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.asgi import HttpMiddleware
from service.compat.keys import redact_path_keys

__all__ = [
    "RedactQuerySecrets",
    "RequestIdMiddleware",
    "client_gone",
    "configure_logging",
    "redact_query_secrets",
    "request_id",
]

log = logging.getLogger(__name__)

_REQUEST_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "proctor_request_id", default=None
)
_TOKEN = re.compile(r"[A-Za-z0-9._:-]{1,128}")
_TEXT = "%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s"


def request_id() -> str | None:
    """The id of the request being served in this context, if any."""
    return _REQUEST_ID.get()


class RequestIdMiddleware(HttpMiddleware):
    """Give each HTTP request an id (see the module docstring) for its lifetime."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        given = dict(scope.get("headers") or []).get(b"x-request-id", b"").decode("latin-1")
        rid = given if _TOKEN.fullmatch(given) else uuid.uuid4().hex[:16]

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), (b"x-request-id", rid.encode())]
            await send(message)

        token = _REQUEST_ID.set(rid)
        try:
            await self.app(scope, receive, send_with_id)
        finally:
            _REQUEST_ID.reset(token)


async def client_gone(request: Request, exc: Exception) -> Response:
    """A client that went away before its body was read (or whose body was cut off by a limit):
    one INFO line, no traceback, since it is nothing of ours; the 499 goes nowhere."""
    log.info(
        "client disconnected before its request was read: %s %s", request.method, request.url.path
    )
    return Response(status_code=499)


_QUERY_PARAM = re.compile(r"([?&;])([^=&;?\s\"']+)=([^&;\s\"']*)")
SECRET_PARAMS = frozenset({"apikey", "key", "token", "accesstoken", "password", "secret"})
"""Query parameters whose values never reach a log, by name decoded and folded
(`api_key`, `API-Key`, `api%5Fkey` and `apikey` are all `apikey`)."""


def _folded(name: str) -> str:
    decoded = urllib.parse.unquote_plus(name)
    return "".join(c for c in decoded.casefold() if c.isalnum())


def redact_query_secrets(text: str) -> str:
    """`text` with the value of each secret query parameter (`SECRET_PARAMS`) replaced, and
    the key of each compat URL (`service.compat.keys`)."""
    text = redact_path_keys(text)
    if "=" not in text:
        return text

    def hide(match: re.Match[str]) -> str:
        if _folded(match[2]) in SECRET_PARAMS:
            return f"{match[1]}{match[2]}=REDACTED"
        return match[0]

    return _QUERY_PARAM.sub(hide, text)


class RedactQuerySecrets(logging.Filter):
    """Keeps keys sent in URLs out of every log line (uvicorn's access log names the URL)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(
                redact_query_secrets(a) if isinstance(a, str) else a for a in record.args
            )
        elif isinstance(record.msg, str) and not record.args:
            record.msg = redact_query_secrets(record.msg)
        return True


class _WithRequestId(logging.Filter):
    """Sets `record.request_id` from the context unless the call gave one (`extra=`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "request_id", None) is None:
            record.request_id = _REQUEST_ID.get() or "-"
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, request_id, and the traceback."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        rid = getattr(record, "request_id", "-")
        if rid != "-":
            line["request_id"] = rid
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False, default=str)


def configure_logging(level: str, fmt: str) -> None:
    """One handler on the root logger, for our loggers and uvicorn's alike (run uvicorn with
    `log_config=None` so that it adds none of its own)."""
    handler = logging.StreamHandler()
    handler.addFilter(_WithRequestId())
    handler.addFilter(RedactQuerySecrets())
    handler.setFormatter(
        JsonFormatter() if fmt == "json" else logging.Formatter(_TEXT)
    )  # see Settings.log_format
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logging.getLogger(name).handlers.clear()
        logging.getLogger(name).propagate = True
