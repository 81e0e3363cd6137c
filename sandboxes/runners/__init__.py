"""Small trusted programs that run inside the sandbox next to the code under test.

They are data to the scorers: `runner_source(name)` returns a runner's bytes, which a scorer puts
among a `RunRequest`'s shared files (the same bytes object every time, so that a backend sends
it to each sandbox once).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

__all__ = ["CPP_HARNESS", "PY_HARNESS", "PY_PROGRAM", "runner_source"]

PY_HARNESS = "py_harness.py"
"""Loads a Python solution and runs the tests in order in its own process (see its docstring).
Run as a script: the supervisor compiles it once per sandbox (a shared file run by the forked
Python path), a fresh interpreter compiles it per run."""
PY_PROGRAM = "py_program.py"
"""Runs a `program` test (the dataset's Python test code) in its own process, calling the
solution, which `PY_HARNESS --serve` runs in another (see its docstring)."""
CPP_HARNESS = "cpp_harness.hpp"
"""Included before a C++ solution: calls one function on JSON arguments, prints the value."""


@cache
def runner_source(name: str) -> bytes:
    if name not in (PY_HARNESS, PY_PROGRAM, CPP_HARNESS):
        raise ValueError(f"not a runner name: {name!r}")
    return (Path(__file__).parent / name).read_bytes()
