"""What the service's own ASGI middlewares share: an HTTP request is served by their `http`,
anything else (lifespan, websockets) goes to the app untouched; and an error answered before
the app has seen the request."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["HttpMiddleware", "send_error"]


class HttpMiddleware(ABC):
    """A pure ASGI middleware of HTTP requests, wrapping `app`."""

    app: ASGIApp

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await self.http(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    @abstractmethod
    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one HTTP request."""


async def send_error(
    send: Send, status: int, body: bytes, headers: Sequence[tuple[bytes, bytes]] = ()
) -> None:
    """Answer `status` with `body`, an encoded `service.http.errors.error_body`, and `headers`."""
    head = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        *headers,
    ]
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": body})
