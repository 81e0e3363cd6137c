"""Canonical JSON: sorted keys and no whitespace, so that equal JSON values give equal text. The
spec hash, cache keys and reference keys are all computed from it."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import orjson

__all__ = ["canonical_json", "canonical_text"]


def canonical_text(
    value: Any, *, default: Callable[[Any], Any] | None = None, allow_nan: bool = True
) -> str:
    """Sorted keys, compact separators, everything past ASCII escaped: the form the spec hash is
    computed from, so its bytes must never change. `default` and `allow_nan` as in `json.dumps`."""
    if default is None and allow_nan:
        return _CANONICAL.encode(value)  # what json.dumps would build for these arguments
    return json.dumps(
        value,
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=True,
        default=default,
        allow_nan=allow_nan,
    )


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=True)
"""`canonical_text`'s encoder for the usual arguments, made once (it holds no state)."""


def canonical_json(value: Any) -> bytes:
    """The same sorting and separators as bytes, by orjson where it can (the service encodes
    every reference this way); `canonical_text` for what orjson refuses, such as lone
    surrogates. orjson writes floats and non-ASCII text its own way, so a key is computed by
    this function or by `canonical_text`, never by a mixture."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except (TypeError, orjson.JSONEncodeError):
        return canonical_text(value, default=str).encode("utf-8", "surrogatepass")
