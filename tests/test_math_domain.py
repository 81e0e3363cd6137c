"""The math regression table through the engine (prorl-v1), and the table against math-verify.

Every row runs through `score_item`, so reasoning is stripped as the spec says. A row marked with a
`known_issue` is a reported disagreement between our scorer and the reference: it is an expected
failure (strict, so a fix shows up as an unexpected pass to be unmarked).
"""

from __future__ import annotations

from typing import Any

import pytest
from math_verify import parse, verify

from reward_specs import Item, ScoreContext, default_registry, load_specs, score_item
from reward_specs.math_domain import MathConfig, equivalent
from tests.cases import Case, table_params
from tests.cases.math_cases import MATH_CASES

REGISTRY = default_registry()
SPEC = load_specs(REGISTRY)["prorl-v1"]


def test_table_shape() -> None:
    assert len(MATH_CASES) >= 160
    assert sum(c.expected for c in MATH_CASES) >= 40
    assert sum(not c.expected for c in MATH_CASES) >= 40
    for case in MATH_CASES:
        assert case.comment.strip()
        if case.extracted is None:
            assert case.expected is False, case


@pytest.mark.parametrize("case", table_params(MATH_CASES))
def test_math_case(case: Case) -> None:
    outcome = score_item(
        REGISTRY, SPEC, Item("math", case.response, case.reference), ScoreContext()
    )
    assert outcome.status == "ok", outcome.error
    assert outcome.success is case.expected, outcome.details
    assert outcome.score == (1.0 if case.expected else 0.0)
    assert outcome.reward == outcome.score
    assert outcome.penalties == {}
    assert outcome.parsed is (case.extracted is not None)
    assert outcome.details.get("extracted") == case.extracted


@pytest.mark.parametrize("case", [c for c in MATH_CASES if c.extracted is not None])
def test_table_agrees_with_math_verify(case: Case) -> None:
    """The table's verdicts are the reference's: math-verify on the correctly extracted answer."""
    assert case.extracted is not None
    gold = parse("\\boxed{" + case.gold + "}")
    answer = parse("\\boxed{" + case.extracted + "}")
    assert verify(gold, answer) is case.expected


def test_reference_validation() -> None:
    def status(reference: dict[str, Any]) -> tuple[str, str | None]:
        outcome = score_item(REGISTRY, SPEC, Item("math", r"\boxed{1}", reference), ScoreContext())
        return outcome.status, (outcome.error or {}).get("message")

    assert status({"answer": "1"})[0] == "ok"
    assert status({"answer": 1})[0] == "ok"  # a JSON number is accepted as the gold's text
    state, message = status({})
    assert state == "invalid"
    assert message is not None and "reference.answer" in message
    assert status({"answer": ""})[0] == "invalid"
    assert status({"answer": ["1"]})[0] == "invalid"


def test_answer_too_long_is_judged_wrong_without_parsing() -> None:
    config = MathConfig(max_answer_chars=10)
    ok, details = equivalent("1", "1+" * 10 + "0", config)
    assert (ok, details["reason"]) == (False, "answer_too_long")


def test_unparsable_answer_is_a_judged_zero() -> None:
    outcome = score_item(
        REGISTRY, SPEC, Item("math", r"\boxed{\frac{}{}}", {"answer": "1"}), ScoreContext()
    )
    assert outcome.status == "ok"
    assert outcome.score == 0.0


def test_prose_around_the_answer_does_not_change_the_verdict() -> None:
    reasoning = "Let me think about this carefully. " * 200
    for case in MATH_CASES[:20]:
        long = Item("math", reasoning + case.response, case.reference)
        outcome = score_item(REGISTRY, SPEC, long, ScoreContext())
        assert outcome.success is case.expected, case
