r"""The math fast path: math-verify's verdict, reached without its costly steps where it is certain.

Two layers, each answering only where math-verify's own code path leads to one verdict, and
otherwise declining (None) so that math-verify decides:

- `string_verdict`, before parsing: two plain decimal numbers that are exactly equal (match), two
  plain integers that differ (no match), and two exact rationals (integers and `\frac{p}{q}`,
  which math-verify parses to sympy's `Integer`/`Rational` and compares exactly: `verify` on two
  such numbers is their equality, with no rounding, since neither is a `Float`).
- `parsed_verdict`, after both sides are parsed, for two plain expressions (sums, products and
  powers of integers, rationals, symbols, `pi` and `e`; no numbers alone, no relations, sets,
  tuples, floats or functions). Such a pair reaches `verify`'s last resort, `simplify(gold -
  answer).is_zero`, once its structural (`==`) and numeric (`evalf(chop=True) == 0`) tests have
  failed. The fast path runs those same two tests, then, instead of `simplify`: a constant
  difference that evaluates clearly away from zero is not zero (no match); a polynomial
  difference is zero exactly when its expansion is (match or no match). Everything else is left
  to math-verify, as is any pair whose texts are identical.

`tests/test_math_fast_path.py` and `tests/test_math_differential.py` check both against
math-verify.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from reward_specs.lazy import lazy_import
from reward_specs.math.verifier import math_verify_errors, math_verify_utils

if TYPE_CHECKING:
    import sympy
else:  # imported at first use (reward_specs.lazy)
    sympy = lazy_import("sympy")

__all__ = ["parsed_verdict", "string_verdict"]

# No trailing dot: math-verify reads "5." as text, so "5." == "5" is not certain.
_PLAIN_NUMBER = re.compile(r"^[+-]?(\d+(\.\d+)?|\.\d+)$")
_PLAIN_INTEGER = re.compile(r"^[+-]?\d+$")
_FRACTION = re.compile(r"^(-?)\\[dt]?frac\{(\d{1,15})\}\{(\d{1,15})\}$")

_EXACT_DIGITS = 12
"""Equal decimals of more digits can be unequal to math-verify, whose floats carry the
precision the text gives (`10000000000000.1` against `10000000000000.10`): those go to it."""

_INTEGER_DIGITS = 15
"""Longer integers are left to math-verify (its parser's reading of them is not checked here)."""


def _digits(number: str) -> int:
    return sum(c.isdigit() for c in number)


def _rational(text: str) -> Fraction | None:
    """An integer of at most 15 characters or a `\\frac{p}{q}` of plain digits, q not 0."""
    if _PLAIN_INTEGER.match(text):
        return Fraction(int(text)) if len(text) <= _INTEGER_DIGITS else None
    m = _FRACTION.match(text)
    if m is None or int(m.group(3)) == 0:
        return None
    value = Fraction(int(m.group(2)), int(m.group(3)))
    return -value if m.group(1) else value


def string_verdict(gold: str, answer: str) -> bool | None:
    """math-verify's verdict on two number strings where it is certain, else None."""
    g, a = gold.strip(), answer.strip()
    if _PLAIN_NUMBER.match(g) and _PLAIN_NUMBER.match(a):
        integers = bool(_PLAIN_INTEGER.match(g) and _PLAIN_INTEGER.match(a))
        if integers and max(len(g), len(a)) <= _INTEGER_DIGITS:
            return Fraction(g) == Fraction(a)
        if Fraction(g) == Fraction(a) and max(_digits(g), _digits(a)) <= _EXACT_DIGITS:
            return True
        return None
    exact_g, exact_a = _rational(g), _rational(a)
    if exact_g is None or exact_a is None:
        return None
    return exact_g == exact_a


# ---------------------------------------------------------------- after parsing

_MAX_NODES = 200
_MAX_EXPONENT = 12
_NONZERO = 1e-6
"""A constant difference whose 15-digit value is this far from zero is not zero."""


def _plain(expr: Any) -> bool:
    """A sum, product or power of integers, rationals, symbols, pi and e, of bounded size,
    integer powers of symbols only, and not itself a number or a symbol."""
    if not isinstance(expr, sympy.Expr) or isinstance(expr, (sympy.Number, sympy.Symbol)):
        return False
    if not isinstance(expr, (sympy.Add, sympy.Mul, sympy.Pow)):
        return False
    for count, node in enumerate(sympy.preorder_traversal(expr)):
        if count > _MAX_NODES:
            return False
        if node is sympy.pi or node is sympy.E:
            continue
        if isinstance(node, sympy.Pow):
            exponent = node.exp
            if not isinstance(exponent, sympy.Rational) or abs(exponent.p) > _MAX_EXPONENT:
                return False
            if node.base.free_symbols and not isinstance(exponent, sympy.Integer):
                return False
        elif not isinstance(
            node, (sympy.Integer, sympy.Rational, sympy.Symbol, sympy.Add, sympy.Mul, sympy.Pow)
        ):
            return False
    return True


def _differs(gold: sympy.Expr, answer: sympy.Expr, numeric_precision: int) -> bool | None:
    if gold == answer:
        return None  # math-verify's first test: it says True
    difference = gold - answer
    value = difference.evalf(chop=True, n=numeric_precision)
    if value == 0:
        return None  # math-verify's numeric test: it says True
    if not difference.free_symbols:
        if isinstance(value, sympy.Number) and value.is_finite and abs(value) > _NONZERO:
            return False
        return None
    if any(
        isinstance(node, sympy.Pow) and node.base.free_symbols and node.exp < 0
        for node in sympy.preorder_traversal(difference)
    ):
        return None  # a rational function, not a polynomial: left to simplify
    return bool(sympy.expand(difference) == 0)


def parsed_verdict(
    gold: Sequence[Any], answer: Sequence[Any], numeric_precision: int, timeout_s: int
) -> bool | None:
    """math-verify's `verify` on two parses (each `[expression, text]`), where certain."""
    if len(gold) != 2 or len(answer) != 2:
        return None
    (g, g_text), (a, a_text) = gold, answer
    if not (isinstance(g_text, str) and isinstance(a_text, str)):
        return None
    if g_text.strip() == a_text.strip() or not (_plain(g) and _plain(a)):
        return None
    try:
        verdict: bool | None = math_verify_utils.timeout(timeout_seconds=timeout_s)(_differs)(
            g, a, numeric_precision
        )
    except math_verify_errors.TimeoutException:
        return None
    except (ArithmeticError, TypeError, ValueError, RecursionError, sympy.PolynomialError):
        return None  # math-verify meets the same difficulty and decides
    return verdict
