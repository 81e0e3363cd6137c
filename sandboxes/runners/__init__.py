"""Small trusted programs that run inside the sandbox next to the code under test.

They are data to the scorers: `runner_source(name)` returns a runner's bytes, which a scorer puts
among a `RunRequest`'s files.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

__all__ = ["CPP_HARNESS", "PY_HARNESS", "runner_source"]

PY_HARNESS = "py_harness.py"
"""Loads a Python solution once and evaluates the tests in a forked child (see its docstring)."""
CPP_HARNESS = "cpp_harness.hpp"
"""Included before a C++ solution: calls one function on JSON arguments, prints the value."""


@cache
def runner_source(name: str) -> bytes:
    if name not in (PY_HARNESS, CPP_HARNESS):
        raise ValueError(f"not a runner name: {name!r}")
    return (Path(__file__).parent / name).read_bytes()
