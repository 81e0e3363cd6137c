r"""The careful grader's rules around math-verify: small rewrites before it parses, a check after.

math-verify is the reference; these rules only cover what it cannot read or reads too loosely.
Before parsing, `normalise` rewrites an answer that writes a number in a way math-verify misreads
inside a box (`12\,345`, `1e6`, `0.\overline{3}`, `1,22`), a set-builder set, or an angle in the
other unit than the one the question or gold names; scientific notation, the gold's too, is
written out exactly (`1.23456789012 \times 10^{11}` is 123456789012, which math-verify's floats
miss). After, `precision_differs` vetoes an "equal" verdict on two decimals that differ at the
gold's stated precision (math-verify rounds to six places). Every rule is conservative: it fires
only where the reading is not in doubt, and where a careful grader could go either way it does
not fire, so the old verdict stands:

- a separator groups digits in threes (`1,500`, `12\,345`, `1 000`), and only when the gold is
  one number, so `1,5` stays a list; `1,500` against a decimal gold `1.5` reads 1500, as before;
- a decimal comma (`1,22`) only against a decimal gold, and never before exactly three digits;
- an angle converts only when the gold (a degree sign) or the question names the unit;
- the precision check compares decimal literals only (an exact gold such as `\frac{1}{3}` keeps
  math-verify's rounding: `0.333333` stays right), and an answer more precise than the gold is
  rounded to the gold's digits first.

Pure string and `Decimal` work: no sympy, nothing here raises on any input.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from fractions import Fraction
from typing import Literal

from reward_specs.caches import Cache

__all__ = [
    "GoldFacts",
    "Rule",
    "Units",
    "decimal_literal",
    "gold_facts",
    "normalise",
    "precision_differs",
    "question_units",
]

Rule = Literal[
    "set_builder",
    "repeating_decimal",
    "thousands_sep",
    "decimal_comma",
    "scientific",
    "angle_unit",
    "relation_as_set",
    "gold_precision",
    "several_boxes",
    "prose_answer",
]
"""The names `details["rules"]` lists when a rule changed a verdict."""

Units = Literal["degrees", "radians"] | None
"""The angle unit the question asks for, when it names exactly one."""

_NUMBER = r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)"
_SCIENTIFIC = re.compile(
    r"(?P<m>" + _NUMBER + r")\s*(?:"
    r"[eE](?P<e1>[+-]?\d+)"
    r"|(?:\\times|\\cdot|×|x|\*)\s*10\s*\^\s*(?:\{\s*(?P<e2>[+-]?\d+)\s*\}|(?P<e3>[+-]?\d+))"
    r")?"
)
_FRACTION = re.compile(r"[+-]?\\[dt]?frac\s*\{\s*\d+\s*\}\s*\{\s*\d+\s*\}|[+-]?\d+\s*/\s*\d+")
_DEGREE = re.compile(r"\^\s*\{?\s*\\circ\s*\}?|°|\\degree\b")


def _strip(text: str) -> str:
    t = text.strip().strip("$").strip()
    return t.replace("−", "-").replace("\\left", "").replace("\\right", "")


def decimal_literal(text: str) -> tuple[Decimal, int] | None:
    r"""A number written as decimal digits (`-12.50`, `3e-7`, `2.5 \times 10^{3}`): its exact
    value and the exponent of its last written digit (`12.50` -> -2, `2.5e3` -> 2); else None."""
    t = _strip(text)
    m = _SCIENTIFIC.fullmatch(t)
    if m is None:
        return None
    mantissa = m.group("m")
    exponent = int(m.group("e1") or m.group("e2") or m.group("e3") or 0)
    digits = mantissa.lstrip("+-")
    places = len(digits.split(".", 1)[1]) if "." in digits else 0
    try:
        value = Decimal(mantissa) * Decimal(10) ** exponent
    except InvalidOperation:
        return None
    return value, exponent - places


@dataclass(frozen=True, slots=True)
class GoldFacts:
    """What the rules need to know of a gold answer, read once per gold."""

    single_number: bool
    """One number (a decimal, scientific or fraction literal), not a list or an expression."""
    decimal: tuple[Decimal, int] | None
    """The gold as a `decimal_literal`, when it is one (an assignment `x = 0.5` read as 0.5)."""
    has_point: bool
    """The gold is a decimal with a fractional part written out (`1.22`)."""
    degrees: bool
    """The gold carries a degree sign."""
    plain: str | None
    """The gold written out exactly when it is in scientific notation (`6.02e23`), else None."""


@Cache("math.gold_facts", 4096)
def gold_facts(gold: str) -> GoldFacts:
    t = _strip(gold)
    grouped = _GROUPED.fullmatch(t)
    if grouped is not None and _one_separator(grouped.group("groups")):
        t = _ungrouped(grouped)  # a gold written `1,500` is the number 1500, as math-verify reads
    decimal = decimal_literal(_ASSIGNMENT.sub("", t, count=1))
    single = decimal_literal(t) is not None or _FRACTION.fullmatch(t) is not None
    return GoldFacts(
        single_number=single,
        decimal=decimal,
        has_point=decimal is not None and "." in t,
        degrees=_DEGREE.search(t) is not None,
        plain=_written_out(t),
    )


def _written_out(text: str) -> str | None:
    """A number in scientific notation as its exact decimal digits (`2.5e3` -> `2500`)."""
    m = _SCIENTIFIC.fullmatch(_strip(text))
    if m is None or not (m.group("e1") or m.group("e2") or m.group("e3")):
        return None
    literal = decimal_literal(text)
    if literal is None or abs(literal[0].adjusted()) > 60:
        return None  # an absurd exponent: left to math-verify
    return format(literal[0].normalize(), "f")


_DEGREES_WORD = re.compile(r"\bdegrees?\b|°|\\circ", re.IGNORECASE)
_RADIANS_WORD = re.compile(r"\bradians?\b", re.IGNORECASE)


def question_units(question: str | None) -> Units:
    """The angle unit a question names, if it names exactly one (else None: no conversion)."""
    if not question:
        return None
    degrees = _DEGREES_WORD.search(question) is not None
    radians = _RADIANS_WORD.search(question) is not None
    if degrees == radians:
        return None
    return "degrees" if degrees else "radians"


# ---------------------------------------------------------------- the rewrites

_SET_BUILDER = re.compile(
    r"\\\{\s*[a-zA-Z]\s*(?:\\in\s*\\mathbb\s*\{?R\}?\s*)?(?:\\mid|\||:|\\colon)\s*(?P<cond>[^{}]+?)\s*\\\}"
)
_REPEATING = re.compile(
    r"(?P<sign>[+-]?)(?P<whole>\d*)\.(?P<fixed>\d*)"
    r"(?:\\overline\s*\{(?P<r1>\d+)\}|\\dot\s*\{(?P<r2>\d)\}|\\dot\s*(?P<r3>\d))"
)
_SEPARATOR = r"(?:,|\{,\}|\\,|\\ |\\;|~| |\u2009|\u202f)"
_GROUPED = re.compile(
    r"(?P<sign>[+-]?)(?P<head>\d{1,3})(?P<groups>(?:" + _SEPARATOR + r"\d{3})+)(?P<tail>\.\d+)?"
)
_DECIMAL_COMMA = re.compile(r"(?P<sign>[+-]?)(?P<whole>\d+)(?:,|\{,\})(?P<frac>\d+)")
_ASSIGNMENT = re.compile(r"^[a-zA-Z]\s*=\s*")
_PERCENT = re.compile(r"\s*\\?%$")
_RELATION = re.compile(r"[=<>,]|\\[lg]eq?\b|\\[lg]t\b|\\ne")


def _set_builder(answer: str) -> str | None:
    m = _SET_BUILDER.fullmatch(_strip(answer))
    return m.group("cond") if m else None


def _repeating_decimal(answer: str) -> str | None:
    m = _REPEATING.fullmatch(_strip(answer))
    if m is None:
        return None
    fixed, repeat = m.group("fixed"), m.group("r1") or m.group("r2") or m.group("r3")
    whole = int(m.group("whole") or 0)
    period = int(fixed + repeat) - int(fixed or "0")
    value = whole + Fraction(period, 10 ** len(fixed) * (10 ** len(repeat) - 1))
    sign = "-" if m.group("sign") == "-" else ""
    return f"{sign}\\frac{{{value.numerator}}}{{{value.denominator}}}"


def _one_separator(groups: str) -> bool:
    """The same separator between every group (`1,234,567`; not `1,234\\,567`)."""
    return len(set(re.findall(_SEPARATOR, re.sub(r"\d", "", groups)))) == 1


def _ungrouped(m: re.Match[str]) -> str:
    digits = re.sub(r"\D", "", m.group("groups"))
    return m.group("sign") + m.group("head") + digits + (m.group("tail") or "")


def _thousands_sep(answer: str, gold: GoldFacts) -> str | None:
    if not gold.single_number:
        return None
    m = _GROUPED.fullmatch(_strip(answer))
    if m is None or not _one_separator(m.group("groups")):
        return None  # one separator throughout, or it is not one number
    return _ungrouped(m)


def _decimal_comma(answer: str, gold: GoldFacts) -> str | None:
    if not (gold.single_number and gold.has_point):
        return None
    m = _DECIMAL_COMMA.fullmatch(_strip(answer))
    if m is None or len(m.group("frac")) == 3:  # `1,500`: a thousands separator, not a comma
        return None
    return f"{m.group('sign')}{m.group('whole')}.{m.group('frac')}"


def _scientific(answer: str, gold: GoldFacts) -> str | None:
    if not gold.single_number:
        return None
    return _written_out(answer)


def _angle_unit(answer: str, gold: GoldFacts, units: Units) -> str | None:
    t = _strip(answer)
    if _RELATION.search(t):
        return None
    has_degree = _DEGREE.search(t) is not None
    wants_degrees = gold.degrees or units == "degrees"
    if wants_degrees and units != "radians" and not has_degree and "\\pi" in t:
        return f"\\frac{{180}}{{\\pi}} \\cdot \\left({t}\\right)"
    if units == "radians" and not gold.degrees and has_degree:
        bare = _DEGREE.sub("", t).strip()
        return f"\\left({bare}\\right) \\cdot \\frac{{\\pi}}{{180}}"
    return None


def normalise(answer: str, gold: GoldFacts, units: Units = None) -> tuple[str, tuple[Rule, ...]]:
    """The answer rewritten where math-verify would misread it, and the rules that rewrote it
    (none: the answer is returned as it is)."""
    fired: list[Rule] = []
    text = answer
    builder = _set_builder(text)
    if builder is not None:
        text, fired = builder, ["set_builder"]
    number_rules: tuple[tuple[Rule, str | None], ...] = (
        ("repeating_decimal", _repeating_decimal(text)),
        ("thousands_sep", _thousands_sep(text, gold)),
        ("decimal_comma", _decimal_comma(text, gold)),
        ("scientific", _scientific(text, gold)),
    )
    for name, rewritten in number_rules:
        if rewritten is not None:
            return rewritten, (*fired, name)
    angle = _angle_unit(text, gold, units)
    if angle is not None:
        return angle, (*fired, "angle_unit")
    return text, tuple(fired)


# ---------------------------------------------------------------- the check after


def precision_differs(gold: GoldFacts, answer: str) -> bool:
    """Two decimal literals math-verify called equal that differ at the gold's precision: the
    answer, rounded to the gold's last digit when it has more digits, is not the gold. An
    assignment (`x = 0.5`) is read as its value; a percent answer is read both as a ratio and as
    the number (math-verify accepts `50\\%` for 50), and differs only if both readings do."""
    if gold.decimal is None:
        return False
    text = _ASSIGNMENT.sub("", _strip(answer), count=1)
    percent = _PERCENT.search(text)
    stated = decimal_literal(text[: percent.start()] if percent else text)
    if stated is None:
        return False
    readings = [stated]
    if percent:
        readings.append((stated[0] / 100, stated[1] - 2))
    return all(_differs(gold.decimal, reading) for reading in readings)


def _differs(gold: tuple[Decimal, int], stated: tuple[Decimal, int]) -> bool:
    (gold_value, gold_exp), (value, exp) = gold, stated
    if value == gold_value:
        return False
    if exp >= gold_exp:
        return True
    try:
        rounded = value.quantize(Decimal(1).scaleb(gold_exp), rounding=ROUND_HALF_UP)
    except InvalidOperation:
        return False  # beyond Decimal's precision: math-verify's verdict stands
    return rounded != gold_value
