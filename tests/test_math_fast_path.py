"""The math fast path never disagrees with math-verify; it may only decline to answer (None).

`_fast_verdict(gold, answer)` answers without sympy for plain numbers. Whenever it answers, its
verdict must equal math-verify's on the same pair, both as the reference computes it (default
`parse` of `\\boxed{...}`, `verify`) and as our scorer's slow path does (`fast_path=False`).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from math_verify import parse, verify

from reward_specs.math.domain import MathConfig, _fast_verdict, equivalent
from tests.cases.math_cases import MATH_CASES

SLOW = MathConfig(fast_path=False)
FAST = MathConfig(fast_path=True)


def reference(gold: str, answer: str) -> bool:
    return bool(verify(parse("\\boxed{" + gold + "}"), parse("\\boxed{" + answer + "}")))


def check(gold: str, answer: str) -> None:
    fast = _fast_verdict(gold, answer)
    event(f"fast path: {fast}")
    if fast is None:
        return
    assert fast is reference(gold, answer), (gold, answer)
    assert fast is equivalent(gold, answer, SLOW)[0], (gold, answer)


# ---------------------------------------------------------------- number strings

signs = st.sampled_from(["", "", "-", "+"])
digits = st.text(alphabet="0123456789", min_size=1, max_size=22)
leading_zeros = st.sampled_from(["", "", "0", "00"])
trailing_zeros = st.sampled_from(["", "", "0", "000"])


@st.composite
def numbers(draw: st.DrawFn) -> str:
    """A plain number as a model might write it: sign, leading zeros, decimals, trailing zeros."""
    whole = draw(leading_zeros) + draw(digits)
    form = draw(st.sampled_from(["int", "int", "decimal", "no_whole", "trailing_dot"]))
    if form == "int":
        body = whole
    elif form == "decimal":
        body = whole + "." + draw(digits) + draw(trailing_zeros)
    elif form == "no_whole":
        body = "." + draw(digits) + draw(trailing_zeros)
    else:
        body = whole + "."
    return draw(signs) + body


@st.composite
def rewritten(draw: st.DrawFn, number: str) -> str:
    """The same value written differently (so equal pairs are common, not a fluke)."""
    sign = ""
    if number[:1] in "+-":
        sign, number = number[0], number[1:]
    if sign == "" and draw(st.booleans()):
        sign = "+"
    if "." not in number and draw(st.booleans()):
        number += "." + draw(st.sampled_from(["0", "00", ""]))
    elif "." in number and not number.endswith(".") and draw(st.booleans()):
        number += draw(trailing_zeros)
    if draw(st.booleans()):
        number = draw(leading_zeros) + number
    return sign + number


@st.composite
def pairs(draw: st.DrawFn) -> tuple[str, str]:
    gold = draw(numbers())
    kind = draw(st.sampled_from(["independent", "rewritten", "neighbour"]))
    if kind == "independent":
        return gold, draw(numbers())
    if kind == "rewritten":
        return gold, draw(rewritten(gold))
    # an integer one apart, possibly beyond the fast path's 15-digit bound
    whole = gold.lstrip("+-").split(".")[0] or "0"
    value = int(gold[0] + whole if gold[0] == "-" else whole) + draw(st.sampled_from([-1, 1]))
    return gold, str(value)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pairs())
@example(("5", "5."))
@example(("1", "1."))
@example(("-0", "0"))
@example(("007", "7"))
@example(("0.5", ".5"))
@example(("999999999999999", "999999999999998"))
@example(("1234567890123456", "1234567890123457"))
@example(("10000000000000.1", "10000000000000.10"))  # equal, yet not to math-verify
@example(("-10000000000.01", "-10000000000.01000"))
def test_fast_path_agrees_with_math_verify(pair: tuple[str, str]) -> None:
    check(*pair)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(min_value=-(10**30), max_value=10**30), st.integers(-(10**30), 10**30))
def test_fast_path_on_integers(gold: int, answer: int) -> None:
    check(str(gold), str(answer))


# ---------------------------------------------------------------- targeted


@pytest.mark.parametrize(
    ("gold", "answer", "verdict"),
    [
        ("3", "3", True),  # identical integers
        ("3", "4", False),  # different integers
        ("-7", "7", False),  # sign
        ("7", "007", True),  # leading zeros
        ("5", "+5", True),  # explicit plus
        ("0", "-0", True),  # negative zero
        ("12", "12.00", True),  # integer vs decimal with trailing zeros
        ("0.5", ".5", True),  # missing leading zero
        ("2.50", "2.5", True),  # trailing zero on the gold
        ("999999999999999", "999999999999998", False),  # 15 digits: still fast
    ],
)
def test_fast_path_answers_where_certain(gold: str, answer: str, verdict: bool) -> None:
    assert _fast_verdict(gold, answer) is verdict
    assert reference(gold, answer) is verdict


@pytest.mark.parametrize(
    ("gold", "answer"),
    [
        ("1234567890123456", "1234567890123457"),  # 16 digits: left to sympy
        ("0.1", "0.10000001"),  # close decimals: math-verify's rounding decides
        ("1/2", "0.5"),  # not a plain number
        (r"\frac{1}{2}", "0.5"),
        ("1e3", "1000"),  # math-verify reads e as Euler's number
        ("1,000", "1000"),  # separators are math-verify's business
        ("5", "5."),  # math-verify reads "5." as text
        ("50", r"50\%"),
        ("", "1"),
    ],
)
def test_fast_path_declines(gold: str, answer: str) -> None:
    assert _fast_verdict(gold, answer) is None


def test_table_verdicts_do_not_depend_on_the_fast_path() -> None:
    for case in MATH_CASES:
        if case.extracted is None:
            continue
        fast = equivalent(case.gold, case.extracted, FAST)[0]
        slow = equivalent(case.gold, case.extracted, SLOW)[0]
        assert fast is slow, case
