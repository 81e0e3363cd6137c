"""The code benchmarks' responses: Python answers to 8 small problems, each with its assert
tests and the score it should earn (60% correct, 25% partly wrong, 10% raising on some inputs, 5%
syntax errors), every response unique so that no cache hit flatters a figure. Shared by
`code_throughput.py` and `scale_out.py`."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

__all__ = ["PROBLEMS", "Problem", "Response", "make_responses", "request_item"]


@dataclass(frozen=True)
class Problem:
    name: str
    correct: str
    wrong: str
    """Right on some inputs only."""
    raising: str
    """Raises on some inputs."""
    inputs: tuple[Any, ...]


PROBLEMS = [
    Problem(
        "square",
        "def square(x):\n    return x * x",
        "def square(x):\n    return x * abs(x)",
        "def square(x):\n    if x > 3:\n        raise ValueError(x)\n    return x * x",
        tuple(range(-4, 6)),
    ),
    Problem(
        "rev",
        "def rev(s):\n    return s[::-1]",
        "def rev(s):\n    return s[::-1] if len(s) % 2 else s",
        "def rev(s):\n    return s[::-1] if s else [][0]",
        ("", "a", "ab", "abc", "abcd", "hello", "xy", "level", "python", "racecar"),
    ),
    Problem(
        "fib",
        "def fib(n):\n    a, b = 0, 1\n    for _ in range(n):\n"
        "        a, b = b, a + b\n    return a",
        "def fib(n):\n    return n if n < 4 else fib(n - 1) + fib(n - 2) + 1",
        "def fib(n):\n    if n > 6:\n        raise RecursionError\n"
        "    return n if n < 2 else fib(n - 1) + fib(n - 2)",
        tuple(range(10)),
    ),
    Problem(
        "is_prime",
        "def is_prime(n):\n    return n > 1 and all(n % d for d in range(2, int(n ** 0.5) + 1))",
        "def is_prime(n):\n    return n % 2 == 1",
        "def is_prime(n):\n    return {2: True, 3: True, 4: False, 5: True}[n]",
        (1, 2, 3, 4, 5, 9, 11, 15, 17, 21),
    ),
    Problem(
        "dedup",
        "def dedup(xs):\n    return sorted(set(xs))",
        "def dedup(xs):\n    return sorted(xs)",
        "def dedup(xs):\n    return sorted(set(xs)) if len(xs) < 4 else xs.nope()",
        ([], [1], [1, 1], [2, 1], [3, 3, 1], [1, 2, 3, 4], [5, 5, 5, 5], [9, 8, 7, 8], [0], [4, 4]),
    ),
    Problem(
        "count_vowels",
        "def count_vowels(s):\n    return sum(c in 'aeiou' for c in s.lower())",
        "def count_vowels(s):\n    return sum(c in 'aeiou' for c in s)",
        "def count_vowels(s):\n    return sum(c in 'aeiou' for c in s) // (len(s) - 3) * 0 + "
        "sum(c in 'aeiou' for c in s)",
        ("", "a", "AbE", "xyz", "Queue", "IOU", "rhythm", "Banana", "EeE", "code"),
    ),
    Problem(
        "digits_sum",
        "def digits_sum(n):\n    return sum(int(d) for d in str(abs(n)))",
        "def digits_sum(n):\n    return sum(int(d) for d in str(n) if d != '-') % 10",
        "def digits_sum(n):\n    return sum(int(d) for d in str(n))",
        (0, 5, 19, 99, -12, 1234, 808, -7, 55555, 10),
    ),
    Problem(
        "pairs",
        "def pairs(n):\n    return [(i, n - i) for i in range(n + 1)]",
        "def pairs(n):\n    return [[i, n - i] for i in range(n + 1)]",
        "def pairs(n):\n    return [(i, n // (i - 2)) for i in range(n + 1)]",
        tuple(range(10)),
    ),
]


def _call(code: str, name: str, arg: Any) -> tuple[bool, Any]:
    namespace: dict[str, Any] = {}
    exec(code, namespace)  # our own problem definitions, never a response
    try:
        return True, namespace[name](arg)
    except Exception as exc:
        return False, exc


@dataclass(frozen=True)
class Response:
    text: str
    code: str
    asserts: tuple[str, ...]
    expected: float


def make_responses(n: int, seed: int = 0, tag: str = "") -> list[Response]:
    rng = random.Random(seed)
    out = []
    for k in range(n):
        problem = rng.choice(PROBLEMS)
        asserts = []
        for arg in problem.inputs:
            ok, value = _call(problem.correct, problem.name, arg)
            if not ok:
                raise RuntimeError(f"{problem.name}({arg!r}) raised in the correct solution")
            asserts.append(f"assert {problem.name}({arg!r}) == {value!r}")
        roll = rng.random()
        if roll < 0.60:
            code = problem.correct
        elif roll < 0.85:
            code = problem.wrong
        elif roll < 0.95:
            code = problem.raising
        else:
            code = problem.correct.replace("):", ")", 1)  # a syntax error
        if code == problem.correct.replace("):", ")", 1):
            expected = 0.0
        else:
            passed = 0
            for arg in problem.inputs:
                ok, value = _call(code, problem.name, arg)
                good = _call(problem.correct, problem.name, arg)[1]
                passed += ok and value == good
            expected = passed / len(problem.inputs)
        code = f"# response {tag}{k}\n{code}\n"
        text = f"Let me write the function.\n\n```python\n{code}```\n"
        out.append(Response(text, code, tuple(asserts), expected))
    return out


def request_item(r: Response) -> dict[str, Any]:
    """`r` as a `/v1/score` item."""
    return {
        "domain": "code",
        "response": r.text,
        "reference": {"language": "python", "tests": {"asserts": list(r.asserts)}},
    }
