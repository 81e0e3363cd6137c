"""The parse lock of `reward_specs.code.pyparse` against the race it exists for.

CPython 3.11 counts the AST converter's recursion depth in one interpreter-wide counter
(python/cpython#106905). A thread switch in the middle of a conversion lets a second thread's
conversion move that counter, and the first one then fails with "SystemError: AST constructor
recursion depth mismatch". A conversion allocates many tracked objects, so collections run in
it; a `gc.callbacks` hook that sleeps hands the GIL over in each of them, which makes the switch
certain instead of rare. The first test shows the race is there on this interpreter; the second
shows the scorers' parses never meet it and return what a parse alone returns. (Compiling an AST
makes no tracked objects, so no collection and no switch happens in it here: its lock in
`pyparse` has no reproduction of its own.)"""

from __future__ import annotations

import ast
import gc
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from reward_specs.code.pyparse import parse_module

_SOURCE = (
    "x = "
    + "(" * 40
    + "1"
    + ")" * 40
    + "\n"
    + "\n".join(
        f"def f{i}(a, b):\n    return [a + b * {i} for _ in range(3)] or {{'k': (a, b)}}"
        for i in range(150)
    )
)
_THREADS = 4
_ROUNDS = 20


@pytest.fixture
def switching() -> Iterator[None]:
    """Collections every few allocations, each handing the GIL to another thread."""

    def hand_over(phase: str, info: dict[str, Any]) -> None:
        time.sleep(0)

    threshold, interval = gc.get_threshold(), sys.getswitchinterval()
    gc.callbacks.append(hand_over)
    gc.set_threshold(50)
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        gc.callbacks.remove(hand_over)
        gc.set_threshold(*threshold)
        sys.setswitchinterval(interval)


def _in_threads(call: Callable[[], object]) -> tuple[list[object], list[BaseException]]:
    """`call` `_ROUNDS` times on each of `_THREADS` threads at once: its results and errors."""
    results: list[object] = []
    errors: list[BaseException] = []
    start = threading.Barrier(_THREADS)

    def work() -> None:
        start.wait()
        for _ in range(_ROUNDS):
            try:
                results.append(call())
            except BaseException as exc:  # what the test is about
                errors.append(exc)
                return

    threads = [threading.Thread(target=work) for _ in range(_THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results, errors


@pytest.mark.skipif(sys.version_info >= (3, 13), reason="the counter is per thread from 3.13")
def test_unserialised_parses_race_on_this_interpreter(switching: None) -> None:
    _, errors = _in_threads(lambda: ast.parse(_SOURCE))
    assert errors, "no race reproduced: the lock in pyparse may no longer be needed"
    assert all(isinstance(e, SystemError) and "recursion depth" in str(e) for e in errors)


def test_parse_module_is_safe_from_threads(switching: None) -> None:
    alone = ast.dump(ast.parse(_SOURCE))
    results, errors = _in_threads(lambda: ast.dump(parse_module(_SOURCE, "solution.py")))
    assert errors == []
    assert len(results) == _THREADS * _ROUNDS
    assert set(results) == {alone}
