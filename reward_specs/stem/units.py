"""Unit-aware comparison of a free-form STEM answer with a gold that carries a unit (pint).

Used by specs whose STEM config sets `units` and only where the gold states a unit (`3000 m`,
`45%`, `9.8 m/s^2`): the answer must be a number with a unit of the same dimension (a bare number
is dimensionless, and so matches a percent or another dimensionless gold only), converted to the
gold's unit and compared within the tolerance. A percent is a unit like the others: `0.45` matches
a gold of `45%`. A gold with no unit is none of this module's business: the caller compares raw
numbers as before, so `45%` against a bare `0.45` compares 45 with 0.45 and a unit cannot be used
to hedge. Each conversion is named in `details["rules"]`.

What pint does not know as a unit (a gold of `3 apples`) leaves the gold to the caller's usual
reading; an answer whose unit pint does not know is judged 0 (`unit_unknown`).
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Any

from reward_specs.caches import Cache
from reward_specs.lazy import lazy_import
from reward_specs.stem.numbers import parse_quantity

if TYPE_CHECKING:
    import pint
else:  # imported at first use (reward_specs.lazy)
    pint = lazy_import("pint")

__all__ = ["UnitVerdict", "compare_with_units", "read_unit"]

UnitVerdict = tuple[bool, dict[str, Any]]
"""Whether the answer matches, and the details to report (value, units, rules)."""

_WRAPPERS = re.compile(r"\\(?:text|mathrm|rm|mbox|operatorname)\s*\{([^{}]*)\}")
_SPELLINGS = (
    ("\\%", "percent"),
    ("%", "percent"),
    ("\\,", " "),
    ("~", " "),
    ("\\cdot", "*"),
    ("·", "*"),
    ("\\mu", "u"),
    ("µ", "u"),
    ("μ", "u"),
    ("\\Omega", "ohm"),
    ("Ω", "ohm"),
    ("\\circ", "degree"),
    ("°C", "degC"),
    ("°F", "degF"),
    ("°", "degree"),
    ("Å", "angstrom"),
)


@Cache("stem.unit_registry", 1)
def _registry() -> pint.UnitRegistry[Any]:
    """pint's registry, built once per process on first use (it takes a moment)."""
    return pint.UnitRegistry()


@Cache("stem.units", 4096)
def read_unit(text: str) -> pint.Unit | None:
    """The unit `text` names (`km`, `m/s^2`, `\\text{kJ/mol}`, `%`), or None if pint knows none."""
    t = text
    while True:
        unwrapped = _WRAPPERS.sub(r"\1", t)
        if unwrapped == t:
            break
        t = unwrapped
    for written, spelled in _SPELLINGS:
        t = t.replace(written, spelled)
    t = t.replace("{", "(").replace("}", ")").strip()
    if not t:
        return None
    try:
        unit = _registry().parse_units(t)
    except (pint.errors.PintError, ValueError, TypeError, AttributeError, SyntaxError):
        return None  # not a unit: pint's parser refuses it in one of these ways
    return unit if isinstance(unit, pint.Unit) else None


def compare_with_units(
    answer: str, gold: str, rel_tol: float, abs_tol: float
) -> UnitVerdict | None:
    """The verdict on `answer` against a `gold` with a unit, or None where this does not apply
    (the gold has no unit pint knows, or the answer is not a number, which the caller reads)."""
    gold_quantity = parse_quantity(gold)
    if gold_quantity is None or not gold_quantity[1]:
        return None
    gold_value, gold_text = gold_quantity
    gold_unit = read_unit(gold_text)
    if gold_unit is None:
        return None
    stated = parse_quantity(answer)
    if stated is None:
        return None
    value, unit_text = stated
    details: dict[str, Any] = {"gold_unit": str(gold_unit)}
    unit = read_unit(unit_text) if unit_text else _registry().dimensionless
    if unit is None:
        return False, {**details, "unit": unit_text, "rules": ["unit_unknown"]}
    details["unit"] = str(unit)
    quantity = _registry().Quantity(value, unit)
    if quantity.dimensionality != _registry().Quantity(1, gold_unit).dimensionality:
        return False, {**details, "rules": ["unit_dimension_mismatch"]}
    converted = float(quantity.to(gold_unit).magnitude)
    ok = math.isfinite(converted) and math.isclose(
        converted, gold_value, rel_tol=rel_tol, abs_tol=abs_tol
    )
    details.update({"value": converted, "rel_tol": rel_tol})
    if unit != gold_unit:
        details["rules"] = [f"unit_conversion:{unit}->{gold_unit}"]
    return ok, details
