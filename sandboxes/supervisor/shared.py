"""Shared files (trusted runners) a supervisor keeps across requests, and their compiled code."""

from __future__ import annotations

import base64
import builtins
import os
import types
from binascii import a2b_base64  # bound here: a module object is one more page a request writes
from typing import Any

BLOBS: dict[str, bytes] = {}
"""Shared files (trusted runners) sent once by the backend, by key; see `request_files`."""


def request_files(req: dict[str, Any]) -> tuple[dict[str, bytes], dict[str, str]]:
    """(name -> content of every file of the request, name -> key of its shared files).

    The request's `shared` says what to do with the shared files kept here: `reset` drops
    every kept one, `new` adds blobs by key, and `names` maps file names to kept keys (the
    backend mirrors what is kept here)."""
    files: dict[str, bytes] = {}
    for name, b64 in req["files"].items():
        files[name] = a2b_base64(b64)
    shared = req.get("shared")
    if not shared:
        return files, {}
    if shared.get("reset"):
        BLOBS.clear()
        SHARED_CODE.clear()
    for key, b64 in shared.get("new", {}).items():
        BLOBS[key] = base64.b64decode(b64)
    names: dict[str, str] = shared.get("names", {})
    for name, key in names.items():
        files[name] = BLOBS[key]
    return files, names


def _compile(source: bytes | str, filename: str) -> types.CodeType:
    """A shared script's code, compiled as `forked.python_main` compiles a program: with no future
    flags of this module (`dont_inherit`), as `python3` would compile it."""
    return compile(source, filename, "exec", dont_inherit=True)


MAIN_GUARD = b'\nif __name__ == "__main__":\n'
"""The line that starts a shared script's closing block (see `split_main`)."""


def split_main(source: bytes) -> tuple[bytes, bytes] | None:
    """(definitions, final block) of a script ending in `if __name__ == "__main__":`, the
    final block padded with newlines so that its line numbers are the script's; None without.

    Found as text, not on a syntax tree: the tree's thousands of objects, freed at once, would
    leave the supervisor's heap full of holes, and its every request and run would then write
    to more pages. The runners' definitions are checked by tests (tests/test_runner_preload.py)."""
    at = source.rfind(MAIN_GUARD)
    if at < 0:
        return None
    definitions = source[: at + 1]
    return definitions, b"\n" * definitions.count(b"\n") + source[at + 1 :]


def _preload(source: bytes, filename: str) -> tuple[types.CodeType, types.ModuleType | None]:
    """(code to run, `__main__` module to run it in) for a shared script.

    A script made of definitions (imports, functions, classes, constants) and then its closing
    `if __name__ == "__main__":` block (the trusted runners) has its definitions run here, once,
    in a `__main__` module made as `_become_python` makes one: each forked run then starts from
    this same module (its own copy-on-write copy, never run by the supervisor itself) and runs
    only the final block, instead of importing, creating every function and class afresh, and
    faulting on the pages that took. Any other script, or one whose definitions fail here (an
    import this interpreter cannot make), is compiled whole and run whole in each child. The
    runners' definitions depend on nothing of a run (not its files, environment or argv)."""
    parts = split_main(source)
    if parts is None:
        return _compile(source, filename), None
    main = types.ModuleType("__main__")
    main.__dict__.update(__builtins__=builtins, __cached__=None, __loader__=None, __spec__=None)
    main.__file__ = filename
    try:
        final = _compile(parts[1], filename)
        exec(_compile(parts[0], filename), main.__dict__)
    except Exception:  # noqa: BLE001 - then the script runs whole in each child
        return _compile(source, filename), None
    return final, main


SHARED_CODE: dict[tuple[str, str], tuple[types.CodeType, types.ModuleType | None]] = {}
"""Shared files compiled as scripts (`_preload`), by (blob key, file name); emptied with the
blobs."""


_SCRIPT_NAMES: dict[tuple[str, str], tuple[str, str]] = {}
"""A script argument's absolute path and its name in the work directory, by (work directory,
argument): computed from the strings alone."""
_SCRIPT_NAMES_KEPT = 64


def shared_script(
    script: str | None, workdir: str, shared_keys: dict[str, str]
) -> tuple[str, str] | None:
    """(blob key, absolute path) when the step's `script` is a shared file of this request
    (trusted, and unchanged: no program has run yet in this request), whose code the template
    then loads once (`_preload`) for every later run of it, not in every run's process, where
    compiling costs page faults on the compiler."""
    if script is None:
        return None
    names = _SCRIPT_NAMES.get((workdir, script))
    if names is None:
        if len(_SCRIPT_NAMES) >= _SCRIPT_NAMES_KEPT:
            _SCRIPT_NAMES.clear()
        filename = os.path.abspath(os.path.join(workdir, script))
        names = _SCRIPT_NAMES[workdir, script] = (filename, os.path.relpath(filename, workdir))
    filename, name = names
    key = shared_keys.get(name)
    return None if key is None else (key, filename)


def preloaded(runner: tuple[str, str]) -> tuple[types.CodeType, types.ModuleType | None] | None:
    """The loaded code of a shared script (`shared_script`), loading it here first: in the
    template, or in the supervisor itself when it forks its steps (the test-only hook)."""
    loaded = SHARED_CODE.get(runner)
    if loaded is None and runner[0] in BLOBS:
        loaded = SHARED_CODE[runner] = _preload(BLOBS[runner[0]], runner[1])
    return loaded
