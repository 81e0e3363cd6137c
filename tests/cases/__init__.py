"""Regression tables for the math and STEM scorers: pure data, importable by any test path.

Each row is one item and the verdict it must get, with a comment saying what it exercises, in the
manner of Math-Verify's `parametrize("gold,pred,expected")` tables. The same rows run through
`score_item` (tests/test_math_domain.py, tests/test_stem_domain.py), the HTTP service and
`proctor score`; `reference` gives the item's `reference` JSON for any of them.

Three verdicts per row, one per spec, in columns: `expected` is the careful grader's
(`prorl-v1-careful`, and the default spec's, `prorl-v1-careful-2`, which grades math and STEM alike
but for unit-carrying golds, none of them here); `math_verify` is math-verify's alone
(`prorl-v1`), given only where it differs, so the table shows where the careful grader goes beyond
it; math's `prose` is the evaluation spec's (`prorl-v1-careful-eval`, prose answers read), again
only where it differs.
math-verify's column is `verify(parse("\\boxed{gold}"), parse("\\boxed{extracted}"))` (default
parse and verify settings) on the final answer prorl-v1's extractor finds, `extracted`; the tables
check that too, so a row can only disagree with our scorer, never with the reference.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from proctor_client._defaults import DEFAULT_SPEC

__all__ = ["CAREFUL", "DEFAULT", "EVALUATION", "PLAIN", "Case", "StemCase", "table_params"]

CAREFUL = "prorl-v1-careful"
"""The careful grader: `expected` is its verdict."""
DEFAULT = DEFAULT_SPEC
"""The default spec (`prorl-v1-careful-2`): `expected` is its verdict too. Its changes to the
careful grader's math and STEM are unit-aware STEM answers where the gold carries a unit
(tests/test_stem_units.py); no row here has one (tests/test_tables_paths.py checks the rows under
it)."""
PLAIN = "prorl-v1"
"""math-verify's verdicts alone: the `math_verify` (math) and `prorl_v1` (STEM) columns."""
EVALUATION = "prorl-v1-careful-eval"
"""The careful grader with prose answers read: the `prose` column (math)."""


@dataclass(frozen=True, slots=True)
class Case:
    """One math item: `response` scored against `gold` must have success == `expected`."""

    gold: str
    response: str
    expected: bool
    comment: str
    extracted: str | None = None
    """The final answer prorl-v1's extractor takes from `response` (after reasoning is stripped:
    the last box, else "the answer is"); None when there is none, and then math-verify's verdict
    is False."""
    known_issue: str = ""
    """Non-empty when our scorer is known to disagree with `expected` (a reported bug)."""
    math_verify: bool | None = None
    """math-verify's verdict (prorl-v1's) where it differs from `expected`."""
    prose: bool | None = None
    """The evaluation spec's verdict where it differs from `expected`."""
    question: str | None = None
    """The problem's text, sent in the reference (the careful grader reads its angle unit)."""

    @property
    def reference(self) -> dict[str, Any]:
        ref: dict[str, Any] = {"answer": self.gold}
        if self.question is not None:
            ref["question"] = self.question
        return ref

    def verdict(self, spec: str) -> bool:
        """The row's verdict under `spec` (CAREFUL, DEFAULT, PLAIN or EVALUATION)."""
        if spec == PLAIN and self.math_verify is not None:
            return self.math_verify
        if spec == EVALUATION and self.prose is not None:
            return self.prose
        return self.expected


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
    prorl_v1: bool | None = None
    """prorl-v1's verdict (the plain letter reader, math-verify alone) where it differs."""

    @property
    def reference(self) -> dict[str, Any]:
        ref: dict[str, Any] = {"answer": self.gold}
        if self.choices is not None:
            ref["choices"] = list(self.choices)
        if self.rel_tol is not None:
            ref["rel_tol"] = self.rel_tol
        return ref

    def verdict(self, spec: str) -> bool:
        """The row's verdict under `spec`; the evaluation spec judges STEM as the default does."""
        if spec == PLAIN and self.prorl_v1 is not None:
            return self.prorl_v1
        return self.expected


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
