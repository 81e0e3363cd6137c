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
    text = body.decode("utf-8")
    # The backend's frames are compact JSON: the decoder's scanner alone reads them, without the
    # whitespace matching `json.loads` adds; anything else goes to `json.loads`.
    try:
        obj, end = _DECODER.raw_decode(text)
    except ValueError:
        end = -1
    return obj if end == len(text) else json.loads(text)


_DECODER = json.JSONDecoder()


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


_ENCODE = json.JSONEncoder(separators=(",", ":")).encode


def _write_frame(out: _Outbox, obj: Any, flush: bool = True) -> None:
    _write_body(out, _ENCODE(obj).encode("utf-8"))
    if flush:
        out.flush()


def _write_body(out: _Outbox, body: bytes) -> None:
    out.write(struct.pack(">I", len(body)))
    out.write(body)


_STEP_RESULT = (
    '{"kind":"result","index":%d,"result":{"status":"%s","exit_code":%s,"signal":%s,'
    '"stdout":"%s","stderr":"%s","cpu_s":%r,"wall_s":%r,"oom_killed":%s,"stopped":%s}}'
)
"""A step's result frame (`step._run_step`'s result), as `_write_frame` would write it."""
_STEP_RESULT_KEYS = (
    "status",
    "exit_code",
    "signal",
    "stdout",
    "stderr",
    "cpu_s",
    "wall_s",
    "oom_killed",
    "stopped",
)


def _write_result(out: _Outbox, index: int, result: dict[str, Any]) -> None:
    """{"kind": "result", "index": index, "result": result}, not flushed. A step's full result
    is formatted directly, not through the generic JSON encoder: its strings are a status name
    and base64, which JSON escapes nothing of, its floats are finite, its codes ints or None."""
    if tuple(result) != _STEP_RESULT_KEYS:
        _write_frame(out, {"kind": "result", "index": index, "result": result}, flush=False)
        return
    code, sig = result["exit_code"], result["signal"]
    body = _STEP_RESULT % (
        index,
        result["status"],
        "null" if code is None else str(int(code)),
        "null" if sig is None else str(int(sig)),
        result["stdout"],
        result["stderr"],
        float(result["cpu_s"]),
        float(result["wall_s"]),
        "true" if result["oom_killed"] else "false",
        "true" if result["stopped"] else "false",
    )
    _write_body(out, body.encode("ascii"))


def _write_done(out: _Outbox, leftover: int, recycle: bool) -> None:
    """The request's last frame, flushed with those before it."""
    flag = "true" if recycle else "false"
    body = f'{{"kind":"done","leftover_processes":{leftover:d},"recycle":{flag}}}'
    _write_body(out, body.encode("ascii"))
    out.flush()
