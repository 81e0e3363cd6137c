"""Log lines as text or as JSON objects, each carrying the id of the request it concerns.

Every HTTP request gets an id (`service.http.request_ids`), set in a context variable for the
request's task (`request_scope`), so any line logged while serving it names it. Work that
outlives the request's task (a queue batch watched from another thread) captures `request_id()`
when it starts and logs with `extra={"request_id": ...}`.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import re
import urllib.parse
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from service.http.compat.path_keys import redact_path_keys

__all__ = [
    "RedactQuerySecrets",
    "configure_logging",
    "redact_query_secrets",
    "request_id",
    "request_scope",
]

_REQUEST_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "proctor_request_id", default=None
)
_TEXT = "%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s"


def request_id() -> str | None:
    """The id of the request being served in this context, if any."""
    return _REQUEST_ID.get()


@contextlib.contextmanager
def request_scope(rid: str) -> Iterator[None]:
    """Lines logged in this context (and tasks it starts) name request `rid`."""
    token = _REQUEST_ID.set(rid)
    try:
        yield
    finally:
        _REQUEST_ID.reset(token)


_QUERY_PARAM = re.compile(r"([?&;])([^=&;?\s\"']+)=([^&;\s\"']*)")
SECRET_PARAMS = frozenset({"apikey", "key", "token", "accesstoken", "password", "secret"})
"""Query parameters whose values never reach a log, by name decoded and folded
(`api_key`, `API-Key`, `api%5Fkey` and `apikey` are all `apikey`)."""


def _folded(name: str) -> str:
    decoded = urllib.parse.unquote_plus(name)
    return "".join(c for c in decoded.casefold() if c.isalnum())


def redact_query_secrets(text: str) -> str:
    """`text` with the value of each secret query parameter (`SECRET_PARAMS`) replaced, and
    the key of each compat URL (`service.http.compat.path_keys`)."""
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
