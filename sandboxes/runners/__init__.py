"""Small trusted programs that run inside the sandbox next to the code under test.

They are data to the scorers: `runner_source(name)` returns a runner's bytes, which a scorer puts
among a `RunRequest`'s files.
"""

from __future__ import annotations

import importlib.util
import marshal
from functools import cache
from pathlib import Path

__all__ = [
    "CPP_HARNESS",
    "PY_HARNESS",
    "PY_HARNESS_BIN",
    "PY_RUN",
    "harness_bytecode",
    "runner_source",
]

PY_HARNESS = "py_harness.py"
"""Loads a Python solution and runs the tests in order in its own process (see its docstring)."""
PY_RUN = "py_run.py"
"""Starts the harness from byte code compiled by the scorer (`harness_bytecode`), if it can."""
PY_HARNESS_BIN = "py_harness.bin"
CPP_HARNESS = "cpp_harness.hpp"
"""Included before a C++ solution: calls one function on JSON arguments, prints the value."""


@cache
def runner_source(name: str) -> bytes:
    if name not in (PY_HARNESS, PY_RUN, CPP_HARNESS):
        raise ValueError(f"not a runner name: {name!r}")
    return (Path(__file__).parent / name).read_bytes()


@cache
def harness_bytecode() -> tuple[str, bytes]:
    """(magic number in hex, marshalled code of py_harness.py) for this interpreter.

    `py_run.py` uses the code only where the sandbox's interpreter has the same magic number,
    i.e. the same byte code; any other compiles the source."""
    # optimize=2: no docstrings (less to load in every run; the harness has no asserts)
    code = compile(runner_source(PY_HARNESS), PY_HARNESS, "exec", dont_inherit=True, optimize=2)
    return importlib.util.MAGIC_NUMBER.hex(), marshal.dumps(code)
