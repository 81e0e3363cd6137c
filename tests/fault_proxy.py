"""A real HTTP proxy in front of a Proctor server that answers with scripted refusals first.

The SDK's retry and deadline tests need a server that says 503 or 429 on cue, or never answers
one chunk; the proxy produces exactly those statuses and forwards everything else unchanged to
the real app, which does all the scoring.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
import uvicorn

from tests.helpers import free_port

__all__ = ["FaultProxy", "Refusal", "fault_proxy"]


@dataclass(frozen=True)
class Refusal:
    """One scripted answer: a status and its headers."""

    status: int
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class FaultProxy:
    upstream: str
    refusals: list[Refusal] = field(default_factory=list)
    """Answered in order to the first requests (with `refuse_marker`, the first requests whose
    body contains it), before any is forwarded."""
    refuse_marker: bytes | None = None
    hold_marker: bytes | None = None
    """A request whose body contains this is never answered (until the proxy stops)."""
    arrivals: list[tuple[float, str]] = field(default_factory=list)
    """(monotonic time, path) of every request received."""
    url: str = ""

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        self.arrivals.append((time.monotonic(), scope["path"]))
        if self.refusals and (self.refuse_marker is None or self.refuse_marker in body):
            refusal = self.refusals.pop(0)
            headers = [(k.encode(), v.encode()) for k, v in refusal.headers.items()]
            await send(
                {"type": "http.response.start", "status": refusal.status, "headers": headers}
            )
            await send({"type": "http.response.body", "body": b'{"detail":"scripted"}'})
            return
        if self.hold_marker is not None and self.hold_marker in body:
            await asyncio.sleep(3600)  # cancelled when the proxy shuts down
        forwarded = {
            k.decode(): v.decode()
            for k, v in scope["headers"]
            if k.lower() not in (b"host", b"content-length")
        }
        async with httpx.AsyncClient(base_url=self.upstream, timeout=600) as client:
            reply = await client.request(
                scope["method"], scope["path"], content=body, headers=forwarded
            )
        headers = [
            (k.encode(), v.encode())
            for k, v in reply.headers.items()
            if k.lower() not in ("content-length", "content-encoding", "transfer-encoding")
        ]
        await send({"type": "http.response.start", "status": reply.status_code, "headers": headers})
        await send({"type": "http.response.body", "body": reply.content})


@contextmanager
def fault_proxy(upstream: str, **script: Any) -> Iterator[FaultProxy]:
    proxy = FaultProxy(upstream, **script)
    port = free_port()
    proxy.url = f"http://127.0.0.1:{port}"
    config = uvicorn.Config(
        proxy, host="127.0.0.1", port=port, log_level="warning", timeout_graceful_shutdown=1
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("the fault proxy did not start")
        time.sleep(0.02)
    try:
        yield proxy
    finally:
        server.should_exit = True
        thread.join(timeout=30)
