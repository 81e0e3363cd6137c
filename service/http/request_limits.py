"""Limits on what a request's body costs the API process before any route sees it: the size of
one body (`max_request_bytes`), and the request bytes held at once across all requests
(`max_inflight_request_bytes`). (The size of a request's head, `max_header_bytes`, is counted
in the HTTP protocol: `service.http.header_limit`.)

`BodyLimit` refuses a body over the limit with a 413, before it is parsed.

`BodyBudget` reserves a body's bytes from one budget of the process while its request is
served: the declared `content-length` up front, a streamed body chunk by chunk. A request that
does not fit is answered 429 with `Retry-After` before its body is read (or, streamed, as soon
as it passes), so the memory that bodies and their decoded items take stays bounded however
many arrive at once.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

from service.http.asgi import HttpMiddleware, send_error
from service.http.errors import error_json
from service.http.key_limits import RETRY_AFTER_S

__all__ = ["BodyBudget", "BodyLimit", "serve_guarded"]


async def serve_guarded(
    app: ASGIApp,
    scope: Scope,
    receive: Receive,
    send: Send,
    admit: Callable[[int], bool],
    refuse: Callable[[Send], Awaitable[None]],
) -> None:
    """Serve `app` while `admit(bytes seen)` accepts the body read so far; once it does not, the
    refusal is sent (unless the app has started its response), the app is told the client went
    away, and whatever it sends after goes nowhere. Shared by the body limits of the API."""
    seen = 0
    started = refused = False

    async def counting_receive() -> MutableMapping[str, Any]:
        nonlocal seen, refused
        message = await receive()
        if message["type"] == "http.request" and not refused:
            seen += len(message.get("body", b""))
            if not admit(seen):
                refused = True
                if not started:
                    await refuse(send)
                return {"type": "http.disconnect"}
        return message

    async def guarded_send(message: MutableMapping[str, Any]) -> None:
        nonlocal started
        if refused:
            return  # the refusal has been sent; whatever the app says next goes nowhere
        if message["type"] == "http.response.start":
            started = True
        await send(message)

    await app(scope, counting_receive, guarded_send)


class BodyBudget(HttpMiddleware):
    """Hold each request's body bytes against one budget of the process (module docstring)."""

    def __init__(self, app: ASGIApp, budget: int) -> None:
        self.app = app
        self.budget = budget
        self.held = 0
        """Bytes reserved now, by every request being served (read by the tests)."""

    def _reserve(self, n: int) -> bool:
        if self.held + n > self.budget:
            return False
        self.held += n
        return True

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        declared = dict(scope.get("headers") or []).get(b"content-length", b"")
        reserved = int(declared) if declared.isdigit() else 0
        if not self._reserve(reserved):
            await self._refuse(send)
            return

        def admit(seen: int) -> bool:
            nonlocal reserved
            if seen > reserved:  # streamed, or longer than declared: reserve the rest
                if not self._reserve(seen - reserved):
                    return False
                reserved = seen
            return True

        try:
            await serve_guarded(self.app, scope, receive, send, admit, self._refuse)
        finally:
            self.held -= reserved

    async def _refuse(self, send: Send) -> None:
        body = error_json(
            429,
            {
                "code": "request_bytes_in_flight",
                "message": f"the service is reading {self.budget} bytes of requests already "
                f"(max_inflight_request_bytes); retry after {RETRY_AFTER_S} s",
            },
        )
        await send_error(send, 429, body, [(b"retry-after", str(RETRY_AFTER_S).encode())])


@dataclass(eq=False)
class BodyLimit(HttpMiddleware):
    """Refuse request bodies over `limit` bytes with a 413, before they are parsed.

    A declared `content-length` is checked up front; a streamed body is counted as it arrives, and
    once it passes the limit the 413 is sent and the app is told the client went away.
    """

    app: ASGIApp
    limit: int

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await self._refuse(send)
            return

        def admit(seen: int) -> bool:
            return seen <= self.limit

        await serve_guarded(self.app, scope, receive, send, admit, self._refuse)

    async def _refuse(self, send: Send) -> None:
        message = f"request body exceeds {self.limit} bytes"
        detail = [{"loc": ["body"], "msg": message, "type": "request_too_large"}]
        await send_error(send, 413, error_json(413, detail))
