"""Values reported by the sandbox, decoded and compared outside it.

The harness (`sandboxes/runners/py_harness.py`) sends plain data in a tagged JSON form. `decode`
rebuilds builtin Python values from it and nothing else, so whatever the program returned, the
comparison below runs on ints, floats, strings, lists, tuples, dicts, sets and bytes with their
builtin `==`: an object whose `__eq__` always says True never leaves the sandbox.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["PLAIN", "Malformed", "close", "decode", "json_equal", "short"]


class Malformed(ValueError):
    """The sandbox sent something that is not a tagged value (the program tampered with it)."""


_MAX_DEPTH = 200


PLAIN: frozenset[type] = frozenset({bool, int, float, str, type(None)})
"""The exact types JSON decodes scalars to, each its own decoded value; a subclass takes the
general path."""


def decode(tagged: Any, depth: int = 0) -> Any:
    if depth > _MAX_DEPTH:
        raise Malformed("nested too deeply")
    d = depth + 1
    kind = type(tagged)
    if kind in PLAIN:
        return tagged
    if kind is list:
        return _decode_items(tagged, d)
    if kind is dict and len(tagged) == 1 and "tuple" in tagged:  # the usual tag, directly
        try:
            return tuple(_decode_items(_list(tagged["tuple"]), d))
        except (TypeError, ValueError) as exc:  # as the match below words it
            raise Malformed(f"bad tuple: {exc}") from None
    if tagged is None or isinstance(tagged, (bool, int, float, str)):
        return tagged
    if isinstance(tagged, list):
        return [decode(v, d) for v in tagged]
    if not (isinstance(tagged, dict) and len(tagged) == 1):
        raise Malformed(f"unexpected {type(tagged).__name__}")
    ((tag, body),) = tagged.items()
    try:
        match tag:
            case "tuple":
                return tuple(_decode_items(_list(body), d))
            case "set":
                return {decode(v, d) for v in _list(body)}
            case "frozenset":
                return frozenset(decode(v, d) for v in _list(body))
            case "dict":
                return {decode(k, d): decode(v, d) for k, v in _list(body)}
            case "bytes":
                return bytes.fromhex(body)
            case "int" if isinstance(body, str):
                return int(body, 16)
            case "float" if body in ("inf", "-inf", "nan"):
                return float(body)
            case "complex":
                re_, im = (decode(part, d) for part in _list(body))
                if not (isinstance(re_, float) and isinstance(im, float)):
                    raise TypeError("parts must be floats")
                return complex(re_, im)
            case "range":
                start, stop, step = (int(x) for x in _list(body))
                return range(start, stop, step)
    except (TypeError, ValueError) as exc:  # unhashable keys, bad hex, wrong arity
        raise Malformed(f"bad {tag}: {exc}") from None
    raise Malformed(f"unknown tag {tag!r}")


def _decode_items(items: list[Any], depth: int) -> list[Any]:
    """`[decode(v, depth) for v in items]`, a scalar taken as it is without a call, and a list of
    scalars only (the usual return value) copied whole, its types checked in one C loop."""
    if depth > _MAX_DEPTH:
        return [decode(v, depth) for v in items]
    if PLAIN.issuperset(map(type, items)):
        return items.copy()
    return [v if type(v) in PLAIN else decode(v, depth) for v in items]


def _list(body: Any) -> list[Any]:
    if not isinstance(body, list):
        raise Malformed("expected a list")
    return body


def close(a: float, b: float, rel_tol: float, abs_tol: float) -> bool:
    """Equal within max(abs_tol, rel_tol * max(|a|, |b|)); infinities only equal themselves."""
    if a == b:
        return True
    if math.isnan(a) or math.isnan(b) or math.isinf(a) or math.isinf(b):
        return False
    return abs(a - b) <= max(abs_tol, rel_tol * max(abs(a), abs(b)))


def _json_key(key: Any) -> Any:
    """A dict key as `json.dumps` would write it; keys JSON cannot hold stay as they are."""
    if isinstance(key, bool):
        return "true" if key else "false"
    if key is None:
        return "null"
    if isinstance(key, (int, float)):
        return str(int(key)) if isinstance(key, int) else repr(key)
    return key


def json_equal(got: Any, expected: Any, rel_tol: float, abs_tol: float) -> bool:
    """`got` (a decoded return value) equals `expected` (JSON data) as JSON would see it.

    Tuples compare as lists and dict keys as their JSON strings; booleans are not numbers; two
    integers must be equal exactly; a comparison involving a float uses the tolerance. Sets,
    bytes and other values JSON cannot express never equal JSON data.
    """
    if isinstance(expected, bool) or isinstance(got, bool):
        return isinstance(expected, bool) and isinstance(got, bool) and got == expected
    if isinstance(expected, (int, float)) and isinstance(got, (int, float)):
        if isinstance(expected, int) and isinstance(got, int):
            return got == expected
        return close(float(got), float(expected), rel_tol, abs_tol)
    if expected is None or isinstance(expected, str):
        return type(got) is type(expected) and got == expected
    if isinstance(expected, list):
        if not isinstance(got, (list, tuple)) or len(got) != len(expected):
            return False
        return all(json_equal(g, e, rel_tol, abs_tol) for g, e in zip(got, expected, strict=True))
    if isinstance(expected, dict):
        if not isinstance(got, dict) or len(got) != len(expected):
            return False
        normalised = {_json_key(k): v for k, v in got.items()}
        if normalised.keys() != expected.keys():
            return False
        return all(json_equal(normalised[k], v, rel_tol, abs_tol) for k, v in expected.items())
    return False


def short(value: Any, limit: int) -> str:
    """A value's repr, cut to `limit` characters (for the per-test diff)."""
    try:
        text = value if isinstance(value, str) else repr(value)
    except ValueError:  # an int too long to print in decimal
        text = f"<{type(value).__name__} too long to print>"
    return text if len(text) <= limit else text[: max(0, limit - 3)] + "..."
