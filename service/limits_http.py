"""Limits on what a request costs the API process before any route sees it: the request bytes
held at once across all requests (`max_inflight_request_bytes`), and the size of a request's
head (`max_header_bytes`).

`BodyBudget` reserves a body's bytes from one budget of the process while its request is
served: the declared `content-length` up front, a streamed body chunk by chunk. A request that
does not fit is answered 429 with `Retry-After` before its body is read (or, streamed, as soon
as it passes), so the memory that bodies and their decoded items take stays bounded however
many arrive at once.

`header_limited_http(limit)` is the HTTP protocol `proctor serve` runs uvicorn with: uvicorn's
own, counting the bytes of each request's head as they arrive and answering 431 with the
service's error body once they pass `limit` (httptools, which uvicorn prefers, has no limit of
its own; h11's is set to the same size, and its refusal is a plain 400).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

from service.asgi import HttpMiddleware, send_error
from service.errors import error_body
from service.limits import RETRY_AFTER_S

__all__ = ["BodyBudget", "header_limited_http", "serve_guarded"]


_CHUNK_SLACK = 256 * 1024
"""Bytes one read from a socket may carry beyond a head (asyncio reads up to this at once)."""


def _encoded(status: int, code: str, message: str) -> bytes:
    body = error_body(status, {"code": code, "message": message})
    return json.dumps(body, separators=(",", ":")).encode()


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
        body = _encoded(
            429,
            "request_bytes_in_flight",
            f"the service is reading {self.budget} bytes of requests already "
            f"(max_inflight_request_bytes); retry after {RETRY_AFTER_S} s",
        )
        await send_error(send, 429, body, [(b"retry-after", str(RETRY_AFTER_S).encode())])


def header_limited_http(limit: int) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol, refusing a request whose line and headers pass `limit` bytes
    with 431 (the module docstring); h11's protocol where httptools is not installed."""
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:  # uvicorn without httptools: h11, limited by `h11_max_incomplete_...`
        from uvicorn.protocols.http.h11_impl import H11Protocol

        return H11Protocol

    refusal = _encoded(431, "headers_too_large", f"the request's headers exceed {limit} bytes")

    class HeaderLimited(HttpToolsProtocol):
        """Counts the head exactly as the parser hands it over (URL, each header), and the raw
        bytes of a head still incomplete, which bound a single endless header the parser is
        still gathering."""

        _parsed = _raw = 0
        _in_head = _too_large = False

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._parsed = self._raw = 0
            self._in_head = True

        def on_url(self, url: bytes) -> None:
            self._count(len(url))
            super().on_url(url)

        def on_header(self, name: bytes, value: bytes) -> None:
            self._count(len(name) + len(value) + 4)  # ": " and CRLF
            super().on_header(name, value)

        def on_headers_complete(self) -> None:
            self._in_head = False
            super().on_headers_complete()

        def _count(self, n: int) -> None:
            self._parsed += n
            if self._parsed > limit:
                self._too_large = True
                raise ValueError("headers too large")  # stops the parser: send_400_response

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self._in_head and not self.transport.is_closing():
                self._raw += len(data)  # over-counts by at most the chunk the head began in
                if self._raw > limit + _CHUNK_SLACK:
                    self._too_large = True
                    self.send_400_response("")

        def send_400_response(self, msg: str) -> None:
            if not self._too_large:
                super().send_400_response(msg)
                return
            self.logger.info("refused a request whose headers exceed %d bytes (431)", limit)
            head = (
                b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
                b"content-type: application/json\r\n"
                b"content-length: " + str(len(refusal)).encode() + b"\r\n"
                b"connection: close\r\n\r\n"
            )
            self.transport.write(head + refusal)
            self.transport.close()

    return HeaderLimited
