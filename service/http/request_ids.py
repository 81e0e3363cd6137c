"""Every HTTP request gets an id: the caller's `X-Request-ID` when it is a plain token, else a new
one. It is echoed in the response header, and every line logged while serving the request names
it (`service.core.logs.request_scope`)."""

from __future__ import annotations

import re
import uuid

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.core.logs import request_scope
from service.http.asgi import HttpMiddleware

__all__ = ["RequestIdMiddleware"]

_TOKEN = re.compile(r"[A-Za-z0-9._:-]{1,128}")


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

        with request_scope(rid):
            await self.app(scope, receive, send_with_id)
