"""Reading a final answer as one number with an optional unit (reward_specs/stem/numbers.py)."""

from __future__ import annotations

import math

import pytest

from reward_specs.stem.numbers import parse_number


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("42", 42.0),
        ("$-0.5$", -0.5),
        ("−3", -3.0),  # a Unicode minus sign
        (".25", 0.25),
        ("12,345.5", 12345.5),
        ("3.2E-5", 3.2e-5),
        (r"3.2\times10^{-5}", 3.2e-5),
        ("3.2×10^-5 per second", 3.2e-5),
        (r"10^{-3}", 1e-3),
        (r"-\frac{1}{2}", -0.5),
        (r"\dfrac{3}{4}\ \text{m}", 0.75),
        ("3/4 kg", 0.75),
        ("1.5e3 kg", 1500.0),  # the exponent is part of the number, not of the unit
        ("42 J", 42.0),
        (r"9.81 \text{ m/s}^2", 9.81),
        ("9.8 m/s^2", 9.8),
        (r"50\%", 50.0),
        (r"\approx 2.72", 2.72),
        (r"6.0\,\mathrm{mol}", 6.0),
    ],
)
def test_numbers_and_units_are_read(text: str, value: float) -> None:
    parsed = parse_number(text)
    assert parsed is not None and math.isclose(parsed, value, rel_tol=1e-12), (text, parsed)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "x",
        "2x",  # a variable, not a unit: it is not set apart
        "2^{10}",
        r"\sqrt{2}",
        "2 3",  # two quantities
        "5 - 3",
        "1/0",
        r"\frac{1}{0}",
        "1,5",  # a decimal comma or a list: ambiguous, so not a number
        "3.5.1",
        "2 x + 1",
    ],
)
def test_what_is_not_plainly_one_number_is_declined(text: str) -> None:
    assert parse_number(text) is None
