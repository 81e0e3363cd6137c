"""Shared files (trusted runners) a supervisor keeps across requests, and their compiled code."""

from __future__ import annotations

import base64
import os
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .forked import _Invocation

_BLOBS: dict[str, bytes] = {}
"""Shared files (trusted runners) sent once by the backend, by key; see `_shared_files`."""


def _shared_files(shared: dict[str, Any] | None) -> dict[str, str]:
    """The request's shared files, name -> key: `reset` drops every kept one, `new` adds blobs
    by key, and `names` maps file names to kept keys (the backend mirrors what is kept here)."""
    if not shared:
        return {}
    if shared.get("reset"):
        _BLOBS.clear()
        _SHARED_CODE.clear()
    for key, b64 in shared.get("new", {}).items():
        _BLOBS[key] = base64.b64decode(b64)
    names: dict[str, str] = shared.get("names", {})
    return names


def _compile(source: bytes | str, filename: str) -> types.CodeType:
    """A shared script's code, compiled as `_python_main` compiles a program: with no future
    flags of this module (`dont_inherit`), as `python3` would compile it."""
    return compile(source, filename, "exec", dont_inherit=True)


_SHARED_CODE: dict[tuple[str, str], types.CodeType] = {}
"""Shared files compiled as scripts, by (blob key, file name); emptied with the blobs."""


def _shared_code(invocation: _Invocation, workdir: str, shared_keys: dict[str, str]) -> _Invocation:
    """The invocation with its script's code when the script is a shared file of this request
    (trusted, and unchanged: no program has run yet in this request); compiled here once per
    supervisor, not in every run's child, where compiling costs page faults on the compiler."""
    flags, script, code, args, _ = invocation
    if script is None:
        return invocation
    filename = os.path.abspath(os.path.join(workdir, script))
    key = shared_keys.get(os.path.relpath(filename, workdir))
    if key is None:
        return invocation
    compiled = _SHARED_CODE.get((key, filename))
    if compiled is None:
        compiled = _SHARED_CODE[key, filename] = _compile(_BLOBS[key], filename)
    return flags, script, code, args, compiled
