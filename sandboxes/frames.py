"""The wire between a backend and its supervisors (see `sandboxes/supervisor/`): frames of a
4-byte big-endian length and UTF-8 JSON, the request frame, the results, and the shared files a
supervisor already holds."""

from __future__ import annotations

import base64
import binascii
import functools
import json
import struct
from collections.abc import Iterable, Mapping
from dataclasses import fields
from importlib import resources
from typing import Any, get_args

from sandboxes import jsonread
from sandboxes.api import (
    Execution,
    ExecutionResult,
    ExecutionStatus,
    Limits,
    RunRequest,
    SandboxError,
)
from sandboxes.supervisor import JAIL_MODULES

__all__ = [
    "BlobCache",
    "FrameBuffer",
    "bootstrap_payload",
    "decode_result",
    "encode_frame",
    "encode_request",
    "supervisor_sources",
]

_STATUSES: frozenset[str] = frozenset(get_args(ExecutionStatus))
_MAX_FRAME = 256 * 1024 * 1024


def supervisor_sources() -> list[tuple[str, str]]:
    """The supervisor's modules as (name in `sys.modules`, source), in `JAIL_MODULES` order."""
    package = resources.files("sandboxes.supervisor")
    return [
        (f"sandboxes.supervisor.{name}", package.joinpath(f"{name}.py").read_text("utf-8"))
        for name in JAIL_MODULES
    ]


def bootstrap_payload() -> bytes:
    """What the interpreter started with `BOOTSTRAP` reads on stdin: the supervisor's sources."""
    return encode_frame(supervisor_sources())


_ENCODER = json.JSONEncoder(separators=(",", ":"))
"""What `json.dumps(obj, separators=(",", ":"))` builds on every call, made once (no state)."""


def encode_frame(obj: Any) -> bytes:
    body = _ENCODER.encode(obj).encode()
    return struct.pack(">I", len(body)) + body


class FrameBuffer:
    """Accumulates bytes from a stream and splits them into decoded JSON frames."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> None:
        self._buf += data

    def next(self) -> dict[str, Any] | None:
        if len(self._buf) < 4:
            return None
        (n,) = struct.unpack(">I", self._buf[:4])
        if n > _MAX_FRAME:
            raise SandboxError(f"supervisor sent an oversized frame ({n} bytes)")
        if len(self._buf) < 4 + n:
            return None
        body = bytes(self._buf[4 : 4 + n])
        del self._buf[: 4 + n]
        frame = jsonread.loads(body)
        if not isinstance(frame, dict):
            raise SandboxError("supervisor sent a malformed frame")
        return frame

    def rest(self) -> bytes:
        """The bytes fed but not yet returned as frames (and forget them)."""
        data = bytes(self._buf)
        self._buf.clear()
        return data


@functools.lru_cache(maxsize=256)
def _check_name(name: str) -> str:
    """`name`, when it is a relative path without empty, `.` or `..` parts (the same few names
    recur in every request: remembered); raises ValueError otherwise (never remembered)."""
    parts = name.split("/")
    if not name or name.startswith("/") or "\0" in name or any(p in ("", ".", "..") for p in parts):
        raise ValueError(f"invalid sandbox file name: {name!r}")
    return name


_ESCAPE = json.encoder.encode_basestring_ascii
"""How `_ENCODER` writes a str (it escapes as `ensure_ascii` does, quotes included)."""


def _b64(data: bytes) -> str:
    """`base64.b64encode(data).decode()`, without its wrapper."""
    return binascii.b2a_base64(data, newline=False).decode("ascii")


def _b64_object(pairs: Iterable[tuple[str, str]]) -> str:
    """A JSON object of names to base64 text exactly as `_ENCODER` writes it: base64's alphabet
    needs no escape, so only the names go through `_ESCAPE`."""
    return "{" + ",".join([f'{_ESCAPE(name)}:"{text}"' for name, text in pairs]) + "}"


def _encode_execution(ex: Execution) -> str:
    """`{"argv": [...], "stdin": base64}` as `_ENCODER` writes it."""
    if not ex.argv or not all(isinstance(a, str) and "\0" not in a for a in ex.argv):
        raise ValueError(f"invalid argv: {ex.argv!r}")
    return f'{{"argv":[{",".join(map(_ESCAPE, ex.argv))}],"stdin":"{_b64(ex.stdin)}"}}'


_LIMIT_FIELDS = tuple(f.name for f in fields(Limits))
"""`Limits`' fields, all plain numbers: read directly, where `asdict` deep-copies each one."""


_LIMITS_TEXT: dict[int, tuple[Limits, str]] = {}
"""Limits objects recently encoded, by identity (an entry holds its object, so the id cannot be
reused while it is kept): a caller that builds its limits once per configuration sends the same
object in every request. Not by value: `Limits(cpu_budget_s=5)` equals `...=5.0`, but its JSON
differs."""


def _encode_limits(limits: Limits) -> str:
    """The limits as a JSON object, all plain numbers, as `_ENCODER` writes it."""
    held = _LIMITS_TEXT.get(id(limits))
    if held is not None and held[0] is limits:
        return held[1]
    text = _ENCODER.encode({name: getattr(limits, name) for name in _LIMIT_FIELDS})
    if len(_LIMITS_TEXT) >= 64:
        _LIMITS_TEXT.clear()
    _LIMITS_TEXT[id(limits)] = (limits, text)
    return text


_BLOB_CAP = 32 * 1024 * 1024
"""Bytes of shared files a supervisor keeps; past that it drops them all and is sent anew."""


class BlobCache:
    """What one supervisor holds of `RunRequest.shared_files`, mirrored on the service's side.

    A shared file is recognised by the identity of its bytes object (kept referenced here, so
    the id cannot be reused); the supervisor stores it under a key and the next request only
    names the key. The supervisor applies `reset` and new blobs before reading the names, so
    both sides always agree on what it holds."""

    def __init__(self) -> None:
        self._keys: dict[int, tuple[bytes, str]] = {}
        self._bytes = 0

    def encode(self, shared: Mapping[str, bytes]) -> dict[str, Any]:
        for name in shared:
            _check_name(name)  # before any change: a malformed request leaves this as it was
        needed = sum(len(v) for v in shared.values() if self._key(v) is None)
        reset = self._bytes + needed > _BLOB_CAP
        if reset:
            self._keys.clear()
            self._bytes = 0
        new: dict[str, str] = {}
        names: dict[str, str] = {}
        for name, data in shared.items():
            key = self._key(data)
            if key is None:
                key = str(len(self._keys))
                self._keys[id(data)] = (data, key)
                self._bytes += len(data)
                new[key] = base64.b64encode(data).decode()
            names[name] = key
        return {"reset": reset, "new": new, "names": names}

    def _key(self, data: bytes) -> str | None:
        held = self._keys.get(id(data))
        return held[1] if held is not None and held[0] is data else None


def _encode_shared(shared: dict[str, Any] | None) -> str:
    """`BlobCache.encode`'s value (or None) as `_ENCODER` writes it."""
    if shared is None:
        return "null"
    names = ",".join([f"{_ESCAPE(name)}:{_ESCAPE(key)}" for name, key in shared["names"].items()])
    return (
        f'{{"reset":{"true" if shared["reset"] else "false"},'
        f'"new":{_b64_object(shared["new"].items())},"names":{{{names}}}}}'
    )


def encode_request(request: RunRequest, blobs: BlobCache | None = None) -> bytes:
    """The request as one frame; raises ValueError for a malformed request (the caller's bug).

    `blobs`: what the receiving supervisor already holds of the shared files (updated here);
    without it they are sent as plain files. The frame's text is put together here, piece by
    piece, exactly as `encode_frame` would write the request's JSON object (the pieces are
    base64 text, escaped names and a few fixed keys: the general encoder is slower on them)."""
    files = [(_check_name(k), _b64(v)) for k, v in request.files.items()]
    both = request.files.keys() & request.shared_files.keys()
    if both:
        raise ValueError(f"files both plain and shared: {sorted(both)!r}")
    build = "null" if request.build is None else _encode_execution(request.build)
    executions = ",".join([_encode_execution(e) for e in request.executions])
    limits = _encode_limits(request.limits)
    shared = None
    if blobs is not None:  # last: once it has changed `blobs`, nothing may raise
        shared = blobs.encode(request.shared_files)
    else:
        files.extend((_check_name(k), _b64(v)) for k, v in request.shared_files.items())
    body = (
        f'{{"files":{_b64_object(files)},"shared":{_encode_shared(shared)},"build":{build},'
        f'"executions":[{executions}],"limits":{limits}}}'
    ).encode()
    return struct.pack(">I", len(body)) + body


def _unb64(text: Any) -> bytes:
    """`base64.b64decode(text)`; a str (what a frame holds) without the wrapper."""
    return binascii.a2b_base64(text) if type(text) is str else base64.b64decode(text)


def decode_result(obj: Any) -> ExecutionResult:
    if not isinstance(obj, dict) or obj.get("status") not in _STATUSES:
        raise SandboxError(f"supervisor sent a malformed result: {str(obj)[:200]}")
    status: ExecutionStatus = obj["status"]
    return ExecutionResult(
        status=status,
        exit_code=obj.get("exit_code"),
        signal=obj.get("signal"),
        stdout=_unb64(obj.get("stdout", "")),
        stderr=_unb64(obj.get("stderr", "")),
        cpu_s=float(obj.get("cpu_s", 0.0)),
        wall_s=float(obj.get("wall_s", 0.0)),
        stopped=bool(obj.get("stopped", False)),
    )
