"""Shared files (trusted runners) a supervisor keeps across requests, and their compiled code."""

from __future__ import annotations

import _ast
import base64
import builtins
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


def _compile(source: bytes | str | _ast.Module, filename: str) -> types.CodeType:
    """A shared script's code, compiled as `_python_main` compiles a program: with no future
    flags of this module (`dont_inherit`), as `python3` would compile it."""
    return compile(source, filename, "exec", dont_inherit=True)


_DEFINING: tuple[type[_ast.stmt], ...] = (_ast.Import, _ast.ImportFrom, _ast.FunctionDef)
_DEFINING += (_ast.ClassDef, _ast.Assign, _ast.AnnAssign)


def _defines_only(body: list[_ast.stmt]) -> bool:
    """Whether these top-level statements only import and define (docstrings, and `if` blocks
    of such statements, as `if TYPE_CHECKING:`, included): no bare call or loop among them."""
    for stmt in body:
        if isinstance(stmt, _ast.If):
            if not (_defines_only(stmt.body) and _defines_only(stmt.orelse)):
                return False
        elif isinstance(stmt, _ast.Expr):
            if not isinstance(stmt.value, _ast.Constant):
                return False
        elif not isinstance(stmt, _DEFINING):
            return False
    return True


def _is_main_guard(stmt: _ast.stmt) -> bool:
    """Whether `stmt` is `if __name__ == "__main__":` (with no `else`)."""
    if not isinstance(stmt, _ast.If) or stmt.orelse or not isinstance(stmt.test, _ast.Compare):
        return False
    test = stmt.test
    return (
        isinstance(test.left, _ast.Name)
        and test.left.id == "__name__"
        and len(test.ops) == 1
        and isinstance(test.ops[0], _ast.Eq)
        and isinstance(test.comparators[0], _ast.Constant)
        and test.comparators[0].value == "__main__"
    )


def _preload(source: bytes, filename: str) -> tuple[types.CodeType, types.ModuleType | None]:
    """(code to run, `__main__` module to run it in) for a shared script.

    A script that only defines things and then ends in its `if __name__ == "__main__":` block
    (the trusted runners) has its definitions run here, once, in a `__main__` module made as
    `_become_python` makes one: each forked run then starts from this same module (its own
    copy-on-write copy, never run by the supervisor itself) and runs only the final block,
    instead of importing, creating every function and class afresh, and faulting on the pages
    that took. Any other script, or one whose definitions fail here (an import this
    interpreter cannot make), is compiled whole and run whole in each child, as before. The
    runners' definitions depend on nothing of a run (not its files, environment or argv)."""
    tree = compile(source, filename, "exec", _ast.PyCF_ONLY_AST, dont_inherit=True)
    if not isinstance(tree, _ast.Module) or not tree.body:
        return _compile(source, filename), None
    *body, last = tree.body
    if not _is_main_guard(last) or not _defines_only(body):
        return _compile(source, filename), None
    main = types.ModuleType("__main__")
    main.__dict__.update(__builtins__=builtins, __cached__=None, __loader__=None, __spec__=None)
    main.__file__ = filename
    try:
        exec(_compile(_ast.Module(body=body, type_ignores=[]), filename), main.__dict__)
    except Exception:  # noqa: BLE001 - then the script runs whole in each child
        return _compile(source, filename), None
    return _compile(_ast.Module(body=[last], type_ignores=[]), filename), main


_SHARED_CODE: dict[tuple[str, str], tuple[types.CodeType, types.ModuleType | None]] = {}
"""Shared files compiled as scripts (`_preload`), by (blob key, file name); emptied with the
blobs."""


def _shared_code(invocation: _Invocation, workdir: str, shared_keys: dict[str, str]) -> _Invocation:
    """The invocation with its script's code when the script is a shared file of this request
    (trusted, and unchanged: no program has run yet in this request); compiled here once per
    supervisor, not in every run's child, where compiling costs page faults on the compiler."""
    flags, script, code, args, _, _ = invocation
    if script is None:
        return invocation
    filename = os.path.abspath(os.path.join(workdir, script))
    key = shared_keys.get(os.path.relpath(filename, workdir))
    if key is None:
        return invocation
    loaded = _SHARED_CODE.get((key, filename))
    if loaded is None:
        loaded = _SHARED_CODE[key, filename] = _preload(_BLOBS[key], filename)
    return flags, script, code, args, *loaded
