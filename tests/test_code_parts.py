"""The code scorer's parts that need no sandbox: extraction, stdout comparison, values decoded
outside the sandbox, assert plans, the single-flight cache, config and reference validation."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from pydantic import ValidationError

from reward_specs.code import CodeConfig, CodeReference
from reward_specs.code.asserts import Lit, Probe, ProbeError, evaluate, parse_assert
from reward_specs.code.cache import SingleFlightCache
from reward_specs.code.extract import extract_code
from reward_specs.code.stdio import compare_stdout
from reward_specs.code.values import Malformed, decode, json_equal
from tests.helpers import poll

# ----------------------------------------------------------------------------- extraction


@pytest.mark.parametrize(
    "response,language,code,source",
    [
        # The last python-tagged block wins over earlier ones and over bare fences.
        ("```python\na\n```\n```\nb\n```\n```py\nc\n```", "python", "c\n", "fenced"),
        # Tags are case-insensitive; python3 is python.
        ("```Python3\nx = 1\n```", "python", "x = 1\n", "fenced"),
        # A bare fence counts only when no tagged one exists.
        ("```\nprint(1)\n```", "python", "print(1)\n", "bare_fence"),
        ("```\nbare\n```\n```python\ntagged\n```", "python", "tagged\n", "fenced"),
        # C++ tags.
        ("```c++\nint main(){}\n```", "cpp", "int main(){}\n", "fenced"),
        ("```cpp\nint main(){}\n```", "cpp", "int main(){}\n", "fenced"),
        ("```cc\nint x;\n```", "cpp", "int x;\n", "fenced"),
        # No fence at all: the whole response.
        ("print(2)", "python", "print(2)", "whole_response"),
        # Fences only in other languages: no code of ours.
        ("```java\nclass A{}\n```", "python", None, "other_language"),
        ("```python\nx\n```", "cpp", None, "other_language"),
        # Nothing but whitespace.
        ("", "python", None, "whole_response"),
        ("  \n\t", "python", None, "whole_response"),
        # An empty tagged block is no code.
        ("```python\n```", "python", None, "fenced"),
        # An unclosed fence is not a block: the whole response is taken.
        ("```python\nx = 1", "python", "```python\nx = 1", "whole_response"),
        # Backticks inside a line do not close the block.
        ("```python\ns = '```'\n```", "python", "s = '```'\n", "fenced"),
    ],
)
def test_extract(response: str, language: Any, code: str | None, source: str) -> None:
    assert extract_code(response, language) == (code, source)


# ----------------------------------------------------------------------------- stdout


@pytest.mark.parametrize(
    "got,expected,match",
    [
        ("3\n", "3", True),
        ("3   \n\n\n", "3\n", True),  # trailing spaces and blank lines
        ("1\r\n2\r\n", "1\n2\n", True),  # CRLF
        ("1  2\t3", "1 2 3", True),  # whitespace between tokens
        ("  1 2", "1 2", True),  # leading spaces on a line
        ("\n3", "3", False),  # a leading blank line is a line
        ("yes", "YES", False),  # case-sensitive
        ("0.3333333", "0.333333333", True),  # float within 1e-6
        ("0.3334", "0.3333", False),
        ("1e-7", "0", True),  # absolute tolerance
        ("1000001", "1000000", False),  # two integers: exact
        ("1000000.5", "1000000", True),  # relative tolerance when one is a float
        ("007", "7", True),  # the same integer
        ("-0", "0", True),
        ("1" * 5000, "1" * 5000, True),  # long integers, no int() cap
        ("1" * 5000 + "2", "1" * 5000 + "3", False),
        ("nan", "nan", True),  # identical tokens
        ("inf", "1e308", False),
        ("1 2", "1 2 3", False),
        ("1\n2", "1\n2\n3", False),  # missing line
    ],
)
def test_compare_stdout(got: str, expected: str, match: bool) -> None:
    assert (compare_stdout(got, expected, 1e-6, 1e-6) is None) == match


def test_compare_stdout_reports_first_difference() -> None:
    mismatch = compare_stdout("a\nb\nc", "a\nx\nc", 1e-6, 1e-6)
    assert mismatch is not None
    assert (mismatch.line, mismatch.expected, mismatch.got) == (2, "x", "b")


# ----------------------------------------------------------------------------- values


def test_decode_rebuilds_builtin_values_only() -> None:
    tagged = [
        1,
        {"tuple": [1, "a"]},
        {"set": [1, 2]},
        {"frozenset": [3]},
        {"dict": [[{"tuple": [1, 2]}, None]]},
        {"bytes": "ff00"},
        {"float": "nan"},
        {"complex": [1.0, -2.0]},
        {"range": [0, 6, 2]},
        {"int": hex(3**9000)},
    ]
    got = decode(tagged)
    assert got[:6] == [1, (1, "a"), {1, 2}, frozenset({3}), {(1, 2): None}, b"\xff\x00"]
    assert got[6] != got[6]  # nan
    assert got[7:] == [complex(1, -2), range(0, 6, 2), 3**9000]


@pytest.mark.parametrize(
    "bad",
    [
        {"object": "x"},  # unknown tag
        {"tuple": [1], "set": [2]},  # two tags
        {"dict": [[[1], 2]]},  # unhashable key
        {"set": [[1]]},  # unhashable element
        {"bytes": "zz"},
        {"float": "1.5"},  # only non-finite floats are tagged
        {"range": [1]},
        {"tuple": "abc"},
    ],
)
def test_decode_refuses_anything_else(bad: Any) -> None:
    with pytest.raises(Malformed):
        decode(bad)


def test_decode_refuses_deep_nesting() -> None:
    value: Any = 1
    for _ in range(300):
        value = [value]
    with pytest.raises(Malformed):
        decode(value)


@pytest.mark.parametrize("tagged", [False, True])
def test_decode_depth_limit_counts_the_innermost_scalar(tagged: bool) -> None:
    """A scalar 200 levels down is read, 201 levels down refused; a list and a tag are a level
    each."""
    for levels, ok in ((200, True), (201, False)):
        value: Any = 1
        for _ in range(levels):
            value = {"tuple": [value]} if tagged else [value]
        if ok:
            decode(value)
        else:
            with pytest.raises(Malformed):
                decode(value)


@pytest.mark.parametrize(
    "got,expected,equal",
    [
        ((1, 2), [1, 2], True),  # tuples are JSON lists
        ([1, [2, (3,)]], [1, [2, [3]]], True),
        ({1: "a"}, {"1": "a"}, True),  # keys as json.dumps writes them
        ({True: 1}, {"true": 1}, True),
        ({1, 2}, [1, 2], False),  # a set is no JSON value
        (True, 1, False),  # booleans are not numbers
        (1, True, False),
        (1, 1.0, True),
        (0.1 + 0.2, 0.3, True),
        (10**12, 10**12 + 1, False),  # two ints: exact
        (None, None, True),
        ("a", "a ", False),
        (b"a", "a", False),
        ([1, 2], [1, 2, 3], False),
        ({"a": 1}, {"a": 1, "b": 2}, False),
    ],
)
def test_json_equal(got: Any, expected: Any, equal: bool) -> None:
    assert json_equal(got, expected, 1e-6, 1e-6) is equal


# ----------------------------------------------------------------------------- assert plans


def test_literal_side_stays_outside() -> None:
    plan = parse_assert("assert f(3) == [1, 2]")
    assert plan.probes == ("f(3)",)
    assert plan.root.rest == (("==", Lit([1, 2])),)  # type: ignore[union-attr]


def test_literal_on_the_left() -> None:
    plan = parse_assert("assert (1, 2) == f()")
    assert plan.probes == ("f()",)


@pytest.mark.parametrize(
    "source,probes",
    [
        ("assert f(1)", ("f(1)",)),
        ("assert not f(1)", ("f(1)",)),
        ("assert f(1) == g(1)", ("f(1)", "g(1)")),
        ("assert 0 < f(1) < 5", ("f(1)",)),
        ("assert f(1) == 2 and f(2) == 3", ("f(1)", "f(2)")),
        ("assert abs(f(2) - 3.5) < 1e-6", ("abs(f(2) - 3.5)",)),
        ("assert math.isclose(f(2), 3.5, rel_tol=1e-3)", ("f(2)",)),
        ("assert isclose(f(2), 3.5)", ("f(2)",)),
        ("assert f(1) == 2, 'message'", ("f(1)",)),
        ("assert f(x=1) is None", ("f(x=1)",)),
    ],
)
def test_probes(source: str, probes: tuple[str, ...]) -> None:
    assert parse_assert(source).probes == probes


@pytest.mark.parametrize(
    "source",
    ["x = 1", "assert f(1) == 1\nassert f(2) == 2", "assert (", "print('assert')", ""],
)
def test_not_one_assert(source: str) -> None:
    with pytest.raises(ValueError):
        parse_assert(source)


def _verdict(source: str, values: list[Any]) -> Any:
    plan = parse_assert(source)

    def probe(i: int) -> Any:
        if isinstance(values[i], Exception):
            raise ProbeError(i, {"err": str(values[i])})
        return values[i]

    return evaluate(plan.root, probe)


@pytest.mark.parametrize(
    "source,values,verdict",
    [
        ("assert f() == 1", [True], True),  # Python's own ==
        ("assert f() == (1, 2)", [[1, 2]], False),
        ("assert f() == {1, 2}", [{2, 1}], True),
        ("assert f() is None", [None], True),
        ("assert f() is None", [0], False),
        ("assert f() is not None", [0], True),
        ("assert f() is True", [1], False),
        ("assert 0 < f() <= 5", [5], True),
        ("assert 0 < f() <= 5", [6], False),
        ("assert f() in [1, 2]", [2], True),
        ("assert 'b' not in f()", ["abc"], False),
        ("assert math.isclose(f(), 0.5)", [0.5000000001], True),
        ("assert math.isclose(f(), 0.5)", [0.6], False),
        ("assert f() or g()", [1, RuntimeError("not needed")], 1),
        ("assert f() and g()", [0, RuntimeError("not needed")], 0),
        ("assert not f()", [[]], True),
    ],
)
def test_evaluate(source: str, values: list[Any], verdict: Any) -> None:
    assert _verdict(source, values) == verdict


def test_evaluate_needs_a_failed_probe() -> None:
    with pytest.raises(ProbeError):
        _verdict("assert f() and g()", [1, RuntimeError("needed")])


def test_probe_nodes_are_indexed_in_order() -> None:
    plan = parse_assert("assert f(1) == g(2)")
    assert plan.root.left == Probe(0)  # type: ignore[union-attr]


# ----------------------------------------------------------------------------- cache


def test_single_flight_runs_identical_work_once() -> None:
    cache: SingleFlightCache[int] = SingleFlightCache("tests.single_flight.once", 8)
    calls = []
    gate = threading.Event()

    def compute() -> int:
        calls.append(1)
        gate.wait(5)
        return 42

    results: list[int] = []
    arrived = threading.Semaphore(0)

    def ask() -> None:
        arrived.release()
        results.append(cache.get_or_compute("k", compute))

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for _ in threads:  # every thread is past its release, so in get_or_compute or about to be
        assert arrived.acquire(timeout=30)
    poll(lambda: len(calls) == 1, 30)  # the first one computes, behind the gate
    gate.set()
    for t in threads:
        t.join()
    assert results == [42] * 8
    assert len(calls) == 1


def test_single_flight_waiter_recomputes_after_a_failure() -> None:
    cache: SingleFlightCache[int] = SingleFlightCache("tests.single_flight.retry", 8)
    attempts = []

    def flaky() -> int:
        attempts.append(1)
        if len(attempts) == 1:
            raise RuntimeError("sandbox fell over")
        return 7

    with pytest.raises(RuntimeError):
        cache.get_or_compute("k", flaky)
    assert cache.get_or_compute("k", flaky) == 7
    assert len(cache) == 1


def test_cache_is_bounded() -> None:
    cache: SingleFlightCache[int] = SingleFlightCache("tests.single_flight.bounded", 3)
    for i in range(10):
        cache.get_or_compute(str(i), lambda i=i: i)  # type: ignore[misc]
    assert len(cache) == 3
    assert cache.get_or_compute("9", lambda: -1) == 9
    assert cache.get_or_compute("0", lambda: -1) == -1


# ----------------------------------------------------------------------------- config, reference


def test_config_defaults_pin_the_prorl_budget() -> None:
    config = CodeConfig()
    assert config.budget_s == 5.0
    assert config.wall_cap_s >= config.budget_s


def test_config_refuses_a_backstop_below_the_budget() -> None:
    with pytest.raises(ValidationError):
        CodeConfig(budget_s=5.0, wall_cap_s=2.0)


def test_config_is_frozen_and_strict() -> None:
    with pytest.raises(ValidationError):
        CodeConfig(budget=5)  # type: ignore[call-arg]


@pytest.mark.parametrize(
    "reference",
    [
        {"language": "fortran", "tests": {"stdio": [{"input": "", "output": "1"}]}},
        {"language": "python", "tests": {"stdio": []}},
        {"language": "python", "tests": {"fn_name": "f", "cases": []}},
        {"language": "python", "tests": {"asserts": []}},
        {"language": "python", "tests": {"asserts": ["x = 1"]}},
        {"language": "python", "tests": {"fn_name": "not a name", "cases": [{"args": []}]}},
        {"language": "python", "tests": {"fn_name": "f", "cases": [{"expected": 1}]}},
        {"language": "python", "tests": {"stdio": [{"input": "1"}]}},
        {"language": "python", "tests": {"unknown": 1}},
        {"language": "python"},
    ],
)
def test_invalid_references(reference: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        CodeReference.model_validate(reference)


def test_numbers_in_stdio_are_text() -> None:
    ref = CodeReference.model_validate(
        {"language": "python", "tests": {"stdio": [{"input": 5, "output": 25}]}}
    )
    assert ref.tests.stdio[0].output == "25"  # type: ignore[union-attr]


_PLANNED = [
    "assert f() == 1",
    "assert f() != g()",
    "assert 0 < f() <= g() < 9",
    "assert f() in [1, 2] or not g()",
    "assert f() and g() and 3",
    "assert (f() or 0) == 2",
    "assert f() is None or g() is not True",
    "assert math.isclose(f(), g(), rel_tol=0.1)",
    "assert isclose(f(), 2.0) and f() == g()",
    "assert not (f() < g())",
    "assert 1 == 1",
    "assert f(1) == f(1) == g(2)",
]
_VALUES = [0, 1, 2, 2.05, None, True, False, [], [1], "a", ProbeError(0, {"err": "x"})]


@pytest.mark.parametrize("source", _PLANNED)
def test_compiled_plan_is_evaluate(source: str) -> None:
    """`plan.check` gives `evaluate`'s value, asks for the same probes in the same order, and
    raises the same exceptions, over every pair of values (errors included)."""
    plan = parse_assert(source)
    for a in _VALUES:
        for b in _VALUES:
            outcomes = []
            for run in (plan.check, lambda p: evaluate(plan.root, p)):
                asked: list[int] = []

                def probe(i: int, asked: list[int] = asked, pair: tuple[Any, Any] = (a, b)) -> Any:
                    asked.append(i)
                    value = pair[i % 2]
                    if isinstance(value, Exception):
                        raise value
                    return value

                try:
                    outcome: Any = ("value", run(probe))
                except Exception as exc:  # compared below, not swallowed
                    outcome = ("raised", type(exc), str(exc))
                outcomes.append((outcome, asked))
            assert outcomes[0] == outcomes[1], (source, a, b)


# -- the judge's shortcut for a plainly passing assert -----------------------------------------

_SHORTCUT_ASSERTS = [
    "assert f(1) == 2",
    "assert f(1) != 2",
    "assert f(1) < 2",
    "assert f(1) >= 2.5",
    "assert f(1) in [1, 2, (3, 4)]",
    "assert f(1) not in 'abc'",
    "assert f(1) is None",
    "assert f(1) is not True",
    "assert f(1) == [1, [2, 3]]",
    "assert f(1) == (1, 2)",
    "assert f(1) == {1: 'a'}",
    "assert f(1) == {1, 2}",
    "assert f(1) == b'ab'",
    "assert f(1)",  # not the simple shape: always the full judge
    "assert 2 == f(1)",
    "assert f(1) == g(2)",
]
_SHORTCUT_VALUES: list[Any] = [
    2,
    2.0,
    True,
    False,
    None,
    "a",
    "abc",
    1,
    3,
    2.5,
    float("nan"),
    [],
    [1, [2, 3]],
    [1, 2],
    {"tuple": [1, 2]},
    {"tuple": [3, 4]},
    {"dict": [[1, "a"]]},
    {"set": [1, 2]},
    {"bytes": "6162"},
    {"bytes": "zz"},
    {"int": "ff"},
    {"float": "inf"},
    {"nope": 1},
    {"tuple": 3},
    [{"tuple": [1, 2]}, 3],
    10**30,
]
_SHORTCUT_LINES: list[Any] = [
    *({"values": [{"ok": v}], "cpu_s": 0.25} for v in _SHORTCUT_VALUES),
    {"values": [{"err": "ZeroDivisionError"}], "cpu_s": 0.0},
    {"values": [{"ok": 2}, {"ok": 2}], "cpu_s": 0.0},
    {"values": [["ok", 2]], "cpu_s": 0.0},
    {"values": [{"ok": 2}], "too_large": True},
    {"values": {"ok": 2}},
    {"values": [{"ok": 2}], "cpu_s": "soon"},
]


@pytest.mark.parametrize("source", _SHORTCUT_ASSERTS)
def test_the_passing_shortcut_judges_as_the_full_judge(source: str) -> None:
    """Every line, with the shortcut and with it disabled (`simple=None`): the same results,
    and the fatal, tampered and missing cases left to the full judge."""
    import dataclasses

    from reward_specs.code.harness import _HarnessOutput, _judge_harness
    from reward_specs.code.reference import AssertTests
    from sandboxes.api import ExecutionResult

    tests = AssertTests(asserts=[source] * len(_SHORTCUT_LINES))
    plan = parse_assert(source)
    full = [dataclasses.replace(plan, simple=None)] * len(_SHORTCUT_LINES)
    config = CodeConfig()
    runs = [ExecutionResult(status="ok")]
    for fatal, tampered in ((None, set()), (None, {3, 5}), ("boom", set())):
        lines = {i: dict(m) for i, m in enumerate(_SHORTCUT_LINES) if i != 7}

        def judged(plans: list[Any], case: tuple[Any, ...] = (fatal, tampered, lines)) -> Any:
            fatal_error, void, reported = case
            out = _HarnessOutput(fatal_error, dict(reported), {}, set(void), fatal_from=4)
            return [r.as_dict() for r in _judge_harness(runs, out, tests, plans, config)]

        assert judged([plan] * len(_SHORTCUT_LINES)) == judged(full)


class _TaggedDict(dict):  # type: ignore[type-arg]
    """A dict subclass: `decode` takes it by its general path, never a shortcut."""


@pytest.mark.parametrize(
    "tagged",
    [
        {"tuple": [1, 2]},
        {"tuple": []},
        {"tuple": [{"tuple": [1]}, [2, {"set": [3]}]]},
        {"tuple": 3},
        {"tuple": [{"nope": 1}]},
        {"tuple": [{"int": "zz"}]},
        {"tuple": [{"set": [[1]]}]},
        {"set": [1, 2]},
    ],
)
def test_the_tuple_shortcut_decodes_as_the_general_path(tagged: dict[str, Any]) -> None:
    def outcome(value: Any) -> Any:
        try:
            return ("value", decode(value))
        except Malformed as exc:
            return ("malformed", str(exc))

    assert outcome(tagged) == outcome(_TaggedDict(tagged))
    deep: Any = tagged
    for _ in range(250):  # past the depth limit, through the shortcut and the general path
        deep = {"tuple": [deep]}
    assert outcome(deep) == outcome(_TaggedDict(deep))
