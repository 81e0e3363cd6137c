"""Bounds on the JSON values a request carries (references, `meta`), checked before any use.

A value nested hundreds of levels deep, an integer of 100,000 digits or a `NaN` can be decoded,
but then breaks whatever walks it later: pickling it for a worker, hashing it, writing it back as
JSON. Checking each value once, iteratively and in linear time, when a request is read turns such
input into an `invalid` item naming the reason instead of a failure somewhere shared.
"""

from __future__ import annotations

import math
import sys
from typing import Any

__all__ = ["DEFAULT_MAX_DEPTH", "HARD_MAX_DEPTH", "json_problem"]

DEFAULT_MAX_DEPTH = 64
"""Levels of arrays and objects a reference may nest by default; no gold data needs more."""
HARD_MAX_DEPTH = 200
"""The most any setting may allow, and what `score_item` itself enforces: whatever walks a value
later (pickle, JSON writers, pydantic) stays far from Python's recursion limit."""

_INT_LIMIT = 10**sys.int_info.default_max_str_digits
"""Integers this large cannot be written back as decimal JSON by Python (its `int_max_str_digits`
bound); a reference holding one could not be hashed or echoed."""


def json_problem(value: Any, max_depth: int) -> str | None:
    """Why `value` (decoded JSON) is out of bounds, or None: nesting deeper than `max_depth`
    levels of containers, a non-finite number (`NaN`, `Infinity`, `1e400`), or an integer too
    wide to write back as JSON. Iterative, so depth costs no recursion."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        kind = type(node)
        if kind is dict or kind is list:
            if depth >= max_depth:
                return f"nested deeper than {max_depth} levels"
            children = node.values() if kind is dict else node
            stack.extend((child, depth + 1) for child in children)
        elif kind is float:
            if not math.isfinite(node):
                return "holds NaN or an infinite number, which JSON cannot carry"
        elif kind is int and abs(node) >= _INT_LIMIT:
            return f"holds an integer of more than {sys.int_info.default_max_str_digits} digits"
    return None
