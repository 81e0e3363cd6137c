"""The harness's value encoding (inside the sandbox) and the scorer's decoding (outside) agree:
every plain value comes back equal, with its type, through the harness's own JSON writer."""

from __future__ import annotations

import json
import math
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from reward_specs.code.values import decode
from sandboxes.runners.py_harness import Unserialisable, dumps, encode

hashable = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=10**4000, max_value=10**4100),
    st.floats(allow_nan=False),
    st.text(),  # includes lone surrogates
    st.binary(max_size=20),
)
plain = st.recursive(
    st.one_of(hashable, st.floats(allow_nan=True), st.complex_numbers(allow_nan=False)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=5),
        st.lists(inner, max_size=5).map(tuple),
        st.dictionaries(hashable, inner, max_size=5),
        st.frozensets(hashable, max_size=5),
        st.sets(hashable, max_size=5),
    ),
    max_leaves=30,
)


def same(a: Any, b: Any) -> bool:
    """Equal with the same types all the way down (nan equals nan here)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(v, b[k]) for k, v in a.items())
    return bool(a == b)


@settings(max_examples=300, deadline=None)
@given(plain)
def test_round_trip(value: Any) -> None:
    text = dumps(encode(value))
    text.encode("utf-8")  # what the harness writes must be valid UTF-8
    assert same(decode(json.loads(text)), value)


def test_subclasses_are_read_through_the_builtin() -> None:
    class Liar(int):
        def __int__(self) -> int:
            return 3

        def __eq__(self, other: object) -> bool:
            return True

        __hash__ = int.__hash__

    class Shout(str):
        def __str__(self) -> str:
            return "LOUD"

    assert decode(json.loads(dumps(encode([Liar(7), Shout("quiet")])))) == [7, "quiet"]


def test_objects_are_not_plain_data() -> None:
    class Anything:
        def __eq__(self, other: object) -> bool:
            return True

    for value in (Anything(), [1, Anything()], {"k": object()}, len):
        try:
            encode(value)
        except Unserialisable:
            continue
        raise AssertionError(f"{value!r} was encoded")


def test_cycles_are_not_plain_data() -> None:
    cycle: list[Any] = []
    cycle.append(cycle)
    try:
        encode(cycle)
    except Unserialisable:
        return
    raise AssertionError("a cyclic list was encoded")
