"""Frames between the supervisor and its backend: a 4-byte big-endian length and UTF-8 JSON."""

from __future__ import annotations

import json
import os
from typing import Any, Final


def _read_exact(fd: int, n: int) -> bytes | None:
    """`n` bytes from the descriptor `fd`, or None at end of stream. Read with os.read, not a
    buffered file: the file object's Python-level methods (a socket's `SocketIO.readinto`) and
    its buffer are memory every request would write to."""
    data = os.read(fd, n)
    if len(data) == n:
        return data
    buf = bytearray(data)  # a pipe gives at most its capacity at a time
    while data and len(buf) < n:
        data = os.read(fd, n - len(buf))
        buf += data
    return bytes(buf) if len(buf) == n else None


def read_frame(fd: int) -> Any:
    head = _read_exact(fd, 4)
    if head is None:
        return None
    body = _read_exact(fd, int.from_bytes(head, "big"))
    if body is None:
        return None
    text = body.decode("utf-8")
    # The backend's frames are compact JSON: the decoder's scanner alone reads them, without the
    # whitespace matching `json.loads` adds; anything else goes to `json.loads`.
    try:
        obj, end = _SCAN(text, 0)
    except (StopIteration, ValueError):
        end = -1
    return obj if end == len(text) else json.loads(text)


_SCAN = json.JSONDecoder().scan_once  # type: ignore[attr-defined]  # set by its __init__
"""What `JSONDecoder.raw_decode` calls (the C scanner), without that Python-level method."""


class Outbox:
    """Frames for the backend, written to fd 1 with os.write when flushed.

    Not a buffered file object on purpose: a forked child inherits whatever is buffered, and a
    buffered writer could flush it into the program's stdout (which is fd 1 in the child)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buf = bytearray()

    def write(self, data: bytes) -> None:
        self.buf += data

    def flush(self) -> None:
        buf = self.buf
        written = os.write(self.fd, buf)  # usually all of it, from the buffer itself (no copy)
        if written < len(buf):
            with memoryview(buf) as view:
                while written < len(buf):
                    written += os.write(self.fd, view[written:])
        buf.clear()


KEEP: list[Any] = []
"""The interpreter's own stdout object, kept alive so that it is never finalized (and flushed)."""


_ENCODE = json.JSONEncoder(separators=(",", ":")).encode


def write_frame(out: Outbox, obj: Any, flush: bool = True) -> None:
    _write_body(out, _ENCODE(obj).encode("utf-8"))
    if flush:
        out.flush()


def _write_body(out: Outbox, body: bytes) -> None:
    out.write(len(body).to_bytes(4, "big"))
    out.write(body)


StepResult = tuple[str, int | None, int | None, bytes, bytes, float, float, bool, bool]
"""A step's result (`step.run_step`): its fields in the result frame's order, status,
exit_code, signal, stdout and stderr (base64), cpu_s, wall_s, oom_killed, stopped. A tuple, not
a dict: no keys to build and look up again for every step."""
STATUS: Final = 0
OOM_KILLED: Final = 7

_STEP_RESULT = (
    b'{"kind":"result","index":%d,"result":{"status":"%s","exit_code":%s,"signal":%s,'
    b'"stdout":"%s","stderr":"%s","cpu_s":%r,"wall_s":%r,"oom_killed":%s,"stopped":%s}}'
)
"""A step's result frame, as `write_frame` would write it (bytes' %r is the float's repr)."""


def _json_int(value: int | None) -> bytes:
    return b"null" if value is None else b"%d" % value


def write_result(out: Outbox, index: int, result: StepResult) -> None:
    """{"kind": "result", "index": index, "result": result as a dict}, not flushed. Formatted
    directly, not through the generic JSON encoder: its strings are a status name and base64,
    which JSON escapes nothing of, its floats are finite, its codes ints or None."""
    status, code, sig, stdout, stderr, cpu_s, wall_s, oom_killed, stopped = result
    body = _STEP_RESULT % (
        index,
        status.encode(),
        _json_int(code),
        _json_int(sig),
        stdout,
        stderr,
        cpu_s,
        wall_s,
        b"true" if oom_killed else b"false",
        b"true" if stopped else b"false",
    )
    _write_body(out, body)


def write_skipped(out: Outbox, index: int) -> None:
    """The result frame of a step not run (the build failed, or no budget is left)."""
    result = {"status": "skipped", "cpu_s": 0.0, "wall_s": 0.0}
    write_frame(out, {"kind": "result", "index": index, "result": result}, flush=False)


def write_done(out: Outbox, leftover: int, recycle: bool) -> None:
    """The request's last frame, flushed with those before it."""
    _write_body(out, _DONE % (leftover, b"true" if recycle else b"false"))
    out.flush()


_DONE = b'{"kind":"done","leftover_processes":%d,"recycle":%s}'
