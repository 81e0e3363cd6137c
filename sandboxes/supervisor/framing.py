"""Frames between the supervisor and its backend: a 4-byte big-endian length and UTF-8 JSON."""

from __future__ import annotations

import json
import os
import struct
from typing import Any, BinaryIO


def _read_exact(stream: BinaryIO, n: int) -> bytes | None:
    data = stream.read(n)
    if data is None or len(data) < n:
        return None
    return data


def _read_frame(stream: BinaryIO) -> Any:
    head = _read_exact(stream, 4)
    if head is None:
        return None
    (n,) = struct.unpack(">I", head)
    body = _read_exact(stream, n)
    if body is None:
        return None
    return json.loads(body.decode("utf-8"))


class _Outbox:
    """Frames for the backend, written to fd 1 with os.write when flushed.

    Not a buffered file object on purpose: a forked child inherits whatever is buffered, and a
    buffered writer could flush it into the program's stdout (which is fd 1 in the child)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buf = bytearray()

    def write(self, data: bytes) -> None:
        self.buf += data

    def flush(self) -> None:
        data = bytes(self.buf)
        self.buf.clear()
        while data:
            data = data[os.write(self.fd, data) :]


_KEEP: list[Any] = []
"""The interpreter's own stdout object, kept alive so that it is never finalized (and flushed)."""


def _write_frame(out: _Outbox, obj: Any, flush: bool = True) -> None:
    body = json.dumps(obj, separators=(",", ":")).encode("utf-8")
    out.write(struct.pack(">I", len(body)) + body)
    if flush:
        out.flush()
