"""Unit-aware STEM answers (`units` on, prorl-v1-careful-2): only where the gold carries a unit,
the answer converted to it and its dimension required to match; each conversion named."""

from __future__ import annotations

import pytest

from reward_specs import ScoreContext
from reward_specs.stem import StemConfig, StemReference
from reward_specs.stem.domain import score_stem
from reward_specs.stem.units import read_unit

UNITS = StemConfig(careful=True, units=True)
BEFORE = StemConfig(careful=True)


def _judge(gold: str, answer: str, config: StemConfig = UNITS) -> tuple[bool | None, list[str]]:
    reference = StemReference.model_validate({"answer": gold})
    judged = score_stem(f"\\boxed{{{answer}}}", reference, config, ScoreContext())
    return judged.success, list(judged.details.get("rules", []))


@pytest.mark.parametrize(
    ("gold", "answer", "success", "rules"),
    [
        ("3000 m", "3 km", True, ["unit_conversion:kilometer->meter"]),  # the case
        ("3000 m", "3000 m", True, []),  # same unit: nothing converted
        ("3000 m", "3 s", False, ["unit_dimension_mismatch"]),  # another dimension
        ("3000 m", "3000", False, ["unit_dimension_mismatch"]),  # a bare number has none
        ("45%", "0.45", True, ["unit_conversion:dimensionless->percent"]),  # percent is a unit
        ("45\\%", "45 \\%", True, []),
        ("0.45", "45%", False, []),  # a unitless gold compares the raw number: 45 vs 0.45
        ("0.45", "0.45", True, []),
        (
            "9.8 m/s^2",
            "980 \\text{cm/s}^2",
            True,
            ["unit_conversion:centimeter / second ** 2->meter / second ** 2"],
        ),
        (
            "25 \\text{kJ/mol}",
            "25000 J/mol",
            True,
            ["unit_conversion:joule / mole->kilojoule / mole"],
        ),
        ("3000 m", "3 furlongs of cheese", False, ["unit_unknown"]),
        ("300 K", "26.85 °C", True, ["unit_conversion:degree_Celsius->kelvin"]),
    ],
)
def test_unit_conversions_name_their_rule(
    gold: str, answer: str, success: bool, rules: list[str]
) -> None:
    assert _judge(gold, answer) == (success, rules)


def test_specs_without_units_keep_their_verdicts() -> None:
    assert _judge("3000 m", "3 km", BEFORE)[0] is False  # as before: 3 against 3000
    assert _judge("3000 m", "3000", BEFORE)[0] is True
    assert _judge("45%", "0.45", BEFORE)[0] is False


def test_a_gold_whose_unit_pint_does_not_know_is_read_as_before() -> None:
    assert read_unit("apples") is None
    assert _judge("3 apples", "3 apples") == (True, [])
    assert read_unit("\\text{m/s}^2") == read_unit("m/s^2")
