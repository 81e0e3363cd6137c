"""Regression tables for the math and STEM scorers: pure data, importable by any test path.

Each row is one item and the verdict it must get, with a comment saying what it exercises, in the
manner of Math-Verify's `parametrize("gold,pred,expected")` tables. The same rows run through
`score_item` (tests/test_math_domain.py, tests/test_stem_domain.py), the HTTP service and
`proctor score`; `reference` gives the item's `reference` JSON for any of them.

Math verdicts are math-verify's (`verify(parse("\\boxed{gold}"), parse("\\boxed{extracted}"))`,
default parse and verify settings) on the final answer a correct extractor finds, `extracted`; the
tables check that too, so a row can only disagree with our scorer, never with the reference.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

__all__ = ["Case", "StemCase", "table_params"]


@dataclass(frozen=True, slots=True)
class Case:
    """One math item: `response` scored against `gold` must have success == `expected`."""

    gold: str
    response: str
    expected: bool
    comment: str
    extracted: str | None = None
    """The final answer a correct extractor takes from `response` (after reasoning is stripped);
    None when there is none, in which case `expected` is False."""
    known_issue: str = ""
    """Non-empty when our scorer is known to disagree with `expected` (a reported bug)."""

    @property
    def reference(self) -> dict[str, Any]:
        return {"answer": self.gold}


@dataclass(frozen=True, slots=True)
class StemCase:
    """One STEM item: multiple choice when `choices` is given, free form otherwise."""

    gold: str
    response: str
    expected: bool
    comment: str
    choices: tuple[str, ...] | None = None
    rel_tol: float | None = None
    """The item's own relative tolerance, overriding the spec's (free form only)."""
    known_issue: str = ""
    """Non-empty when our scorer is known to disagree with `expected` (a reported bug)."""

    @property
    def reference(self) -> dict[str, Any]:
        ref: dict[str, Any] = {"answer": self.gold}
        if self.choices is not None:
            ref["choices"] = list(self.choices)
        if self.rel_tol is not None:
            ref["rel_tol"] = self.rel_tol
        return ref


def table_params(cases: list[Case] | list[StemCase]) -> list[Any]:
    """One pytest param per row, named by its comment; a row with a `known_issue` is a strict
    xfail, so a fix shows up as an unexpected pass."""
    return [
        pytest.param(
            case,
            id=f"{i:03d}-{case.comment[:50]}",
            marks=[pytest.mark.xfail(strict=True, reason=case.known_issue)]
            if case.known_issue
            else [],
        )
        for i, case in enumerate(cases)
    ]
