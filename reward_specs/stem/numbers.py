"""Reading a final answer as a real number, with an optional unit after it.

`parse_number` accepts what a scientist writes for one quantity: `42`, `-0.5`, `12,345.6`,
`3.2e-5`, `3.2 \\times 10^{-5}`, `3.2×10^-5`, `10^{-3}`, `\\frac{3}{4}`, `3/4`, followed by a unit
that is set apart (`42 J`, `9.8 m/s^2`, `9.81 \\text{ m/s}^2`, `1.5e3 kg`, `50\\%`). The number is
read greedily from the start, so `1.5e3 kg` is 1500, never 1.5. Anything that is not plainly one
number (`2^{10}`, `2x + 1`, `\\sqrt{2}`) gives None, and the caller compares it symbolically.
"""

from __future__ import annotations

import re

__all__ = ["parse_number", "parse_quantity"]

_MANTISSA = r"[+-]?(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)"
_EXPONENT = r"[+-]?\d+"
_NUMBER = re.compile(
    r"(?P<m>" + _MANTISSA + r")"
    r"(?:"
    r"[eE](?P<e1>" + _EXPONENT + r")"
    r"|\s*(?:\\times|\\cdot|×|\*|x)\s*10\s*\^\s*(?:\{\s*(?P<e2>" + _EXPONENT + r")\s*\}"
    r"|(?P<e3>" + _EXPONENT + r"))"
    r")?"
)
_POWER_OF_TEN = re.compile(
    r"(?P<sign>[+-]?)10\s*\^\s*(?:\{\s*(?P<e1>" + _EXPONENT + r")\s*\}|(?P<e2>" + _EXPONENT + r"))"
)
_LATEX_FRACTION = re.compile(r"(?P<sign>[+-]?)\\[dt]?frac\s*\{(?P<a>[^{}]+)\}\s*\{(?P<b>[^{}]+)\}")

_UNIT_START = re.compile(r"(?:\s+|\\[,;:! ]|~)+(?=\S)|(?=\\(?:text|mathrm|rm|mbox|operatorname)\b)")
"""What sets a unit apart from the number: space, a LaTeX space, or a text command."""
_UNIT_BODY = re.compile(r"[A-Za-zµμΩÅ°%/·\s\^\{\}\-\d\.\\(),~]*")
"""A unit has no operators (+, =) and no second quantity; exponents of units may carry digits."""
_PERCENT = re.compile(r"\s*\\?%")


def _clean(text: str) -> str:
    t = text.strip().strip("$").strip()
    t = t.replace("−", "-").replace("\\!", "").replace("{,}", ",")
    t = re.sub(r"^(?:\\approx|≈|=|\\sim)\s*", "", t)
    return t.strip()


def _head(t: str) -> tuple[float, int] | None:
    """The number at the start of `t`, and where it ends."""
    m = _LATEX_FRACTION.match(t)
    if m:
        a, b = parse_number(m.group("a")), parse_number(m.group("b"))
        if a is None or b is None or b == 0.0:
            return None
        return (-1.0 if m.group("sign") == "-" else 1.0) * a / b, m.end()
    m = _POWER_OF_TEN.match(t)
    if m:
        power = int(m.group("e1") or m.group("e2"))
        return (-1.0 if m.group("sign") == "-" else 1.0) * 10.0**power, m.end()
    m = _NUMBER.match(t)
    if not m:
        return None
    value = float(m.group("m").replace(",", ""))
    exponent = m.group("e1") or m.group("e2") or m.group("e3")
    if exponent is not None:
        value *= 10.0 ** int(exponent)
    end = m.end()
    slash = re.match(r"\s*/\s*", t[end:])
    if slash and exponent is None:
        rest = _NUMBER.match(t, end + slash.end())
        if (
            rest
            and rest.group("e1") is None
            and rest.group("e2") is None
            and rest.group("e3") is None
        ):
            denominator = float(rest.group("m").replace(",", ""))
            if denominator == 0.0:
                return None
            return value / denominator, rest.end()
    return value, end


def parse_number(text: str) -> float | None:
    """The real number a final answer states, or None if it is not plainly one number."""
    quantity = parse_quantity(text)
    return None if quantity is None else quantity[0]


def parse_quantity(text: str) -> tuple[float, str] | None:
    """`parse_number`'s number and the unit written after it, as written (`""` for none, `"%"`
    for a percent sign), or None."""
    t = _clean(text)
    head = _head(t)
    if head is None:
        return None
    value, end = head
    tail = t[end:]
    if not tail:
        return value, ""
    if _PERCENT.fullmatch(tail):
        return value, "%"
    unit = _UNIT_START.match(tail)
    if unit is None:
        return None  # "2x", "2^{10}", "3.5.1": not a number followed by a unit
    body = tail[unit.end() :]
    if body[0] in "0123456789.+-=" or not _UNIT_BODY.fullmatch(body):
        return None  # a second quantity or an operator, not a unit
    return value, body.strip()
