"""Python's parser for the code scorers, one call at a time.

The code scorers run on threads (they wait on sandboxes). CPython 3.11 keeps the AST
converter's recursion depth in one interpreter-wide counter, so two threads turning source into
an AST (or an AST into code) at once can fail with "SystemError: AST constructor recursion depth
mismatch" (python/cpython#106905): a crash of ours on a good reference. Every such call of the
code domain goes through one lock; each is short, over sources the scorers have bounded.
"""

from __future__ import annotations

import ast
import threading
from types import CodeType

__all__ = ["compile_module", "parse_module"]

_LOCK = threading.Lock()


def parse_module(source: str, filename: str = "<unknown>") -> ast.Module:
    """`ast.parse(source, filename, mode="exec")`, serialised."""
    with _LOCK:
        return ast.parse(source, filename=filename, mode="exec")


def compile_module(module: ast.Module, filename: str) -> CodeType:
    """`compile(module, filename, "exec", dont_inherit=True)`, serialised."""
    with _LOCK:
        return compile(module, filename, "exec", dont_inherit=True)
