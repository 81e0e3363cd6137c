"""`sandboxes.jsonread.loads` gives what `json.loads` gives: the same value or the same error."""

from __future__ import annotations

import json
import math
import random
from typing import Any

import pytest

from sandboxes import jsonread

SEEDS = [
    b'{"i":3,"values":[{"ok":[1,2,{"tuple":["a",1.5]}]},{"ok":{"int":"ff"}}],"cpu_s":0.0012}',
    b'{"i":0,"exit":1,"signal":null,"cpu_s":1e-05}',
    b'{"fatal":"x\\u00e9\\n"}',
    b'[true,false,null,-0,1E+2,"\\ud83d\\ude00"]',
]
ALPHABET = b' \t\r\n\x0c\x00\x01{}[]",:.-+eE0123456789abfnrtu\\\xc3\xa9\xed\xa0\x80\xff'


def _same(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    return bool(a == b)


def _outcome(loads: Any, data: bytes) -> tuple[str, Any]:
    try:
        return "ok", loads(data)
    except RecursionError:
        return "RecursionError", None
    except ValueError:
        return "ValueError", None


@pytest.mark.parametrize(
    "data",
    [
        b"NaN",
        b"[Infinity,-Infinity]",
        b"1e400",
        b'"\\ud800"',
        b'"\xed\xa0\x80"',  # a surrogate in UTF-8: json.loads reads it (surrogatepass)
        b"18446744073709551616",
        b"-9223372036854775809",
        b"1" + b"0" * 1000,
        b"1" + b"0" * 5000,
        b'{"a":1,"a":2}',
        b"\xef\xbb\xbf{}",
        b"[" * 150 + b"]" * 150,
        b"[" * 5000 + b"]" * 5000,
        b"",
        b"[1,]",
    ],
)
def test_edge_cases_match_json(data: bytes) -> None:
    fast, slow = _outcome(jsonread.loads, data), _outcome(json.loads, data)
    assert fast[0] == slow[0] and _same(fast[1], slow[1])


def test_mutated_result_lines_match_json() -> None:
    rng = random.Random(7)
    for _ in range(20_000):
        data = bytearray(rng.choice(SEEDS))
        for _ in range(rng.randint(1, 3)):
            p = rng.randrange(len(data) + 1)
            roll = rng.random()
            if roll < 0.4:
                data[p:p] = bytes([rng.choice(ALPHABET)])
            elif p < len(data):
                if roll < 0.7:
                    del data[p]
                else:
                    data[p] = rng.choice(ALPHABET)
        fast, slow = _outcome(jsonread.loads, bytes(data)), _outcome(json.loads, bytes(data))
        assert fast[0] == slow[0] and _same(fast[1], slow[1]), bytes(data)
