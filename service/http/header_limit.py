"""The size of a request's head (`max_header_bytes`), counted in uvicorn's HTTP protocol.

`header_limited_http(limit)` is the HTTP protocol `proctor serve` runs uvicorn with: uvicorn's
own, counting the bytes of each request's head as they arrive and answering 431 with the
service's error body once they pass `limit`.

Why uvicorn's internals, in this one place: httptools, which uvicorn prefers, has no limit on a
request's head, and uvicorn offers no public way to set one (its public `--http` option takes a
protocol class, which is how this one is handed over, but the only class to start from is
`uvicorn.protocols.http.httptools_impl.HttpToolsProtocol`, not part of its documented API). h11
has a public limit (`h11_max_incomplete_event_size`, set to the same size), but its refusal is a
plain 400 and it is the slower parser. So this module subclasses `HttpToolsProtocol`, and
therefore `pyproject.toml` pins uvicorn to one minor release, and tests/test_header_limit.py holds
a fingerprint of every method overridden or called here: a uvicorn release that changes any of
them fails that test before it can change what this protocol does.
"""

from __future__ import annotations

import asyncio

from service.http.errors import error_json

__all__ = ["EXTENDED", "header_limited_http"]

EXTENDED = (
    "uvicorn.protocols.http.httptools_impl.HttpToolsProtocol",
    (
        "data_received",
        "on_header",
        "on_headers_complete",
        "on_message_begin",
        "on_url",
        "send_400_response",
    ),
)
"""The uvicorn class this module extends, and the methods it overrides (fingerprinted by
tests/test_header_limit.py)."""

_CHUNK_SLACK = 256 * 1024
"""Bytes one read from a socket may carry beyond a head (asyncio reads up to this at once)."""


def header_limited_http(limit: int) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol, refusing a request whose line and headers pass `limit` bytes
    with 431 (the module docstring); h11's protocol where httptools is not installed."""
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:  # uvicorn without httptools: h11, limited by `h11_max_incomplete_...`
        from uvicorn.protocols.http.h11_impl import H11Protocol

        return H11Protocol

    message = f"the request's headers exceed {limit} bytes"
    refusal = error_json(431, {"code": "headers_too_large", "message": message})

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
