"""The STEM regression table through the engine (prorl-v1 and the careful grader, prorl-v1-careful),
plus reference validation.

Rows with a `known_issue` are reported disagreements with the right verdict: strict expected
failures, so a fix shows up as an unexpected pass to be unmarked.
"""

from __future__ import annotations

from typing import Any

import pytest
from math_verify import parse, verify

from reward_specs import Item, ScoreContext, default_registry, load_specs, score_item
from reward_specs.extract import last_boxed
from reward_specs.stem import parse_number
from tests.cases import CAREFUL, PLAIN, StemCase, table_params
from tests.cases.stem_cases import COLOURS, STEM_CASES

REGISTRY = default_registry()
SPECS = load_specs(REGISTRY)
SPEC = SPECS[PLAIN]


def _score(response: str, reference: dict[str, Any]) -> Any:
    return score_item(REGISTRY, SPEC, Item("stem", response, reference), ScoreContext())


def test_table_shape() -> None:
    assert len(STEM_CASES) >= 130
    beyond = [c for c in STEM_CASES if c.prorl_v1 is not None]
    assert len(beyond) >= 20 and any(c.prorl_v1 for c in beyond)
    multiple_choice = [c for c in STEM_CASES if c.choices is not None]
    free_form = [c for c in STEM_CASES if c.choices is None]
    assert len(multiple_choice) >= 25 and len(free_form) >= 25
    assert any(c.rel_tol is not None for c in STEM_CASES)
    for case in STEM_CASES:
        assert case.comment.strip()
        assert {case.expected} <= {True, False}


@pytest.mark.parametrize("case", table_params(STEM_CASES))
@pytest.mark.parametrize("spec", [PLAIN, CAREFUL])
def test_stem_case(case: StemCase, spec: str) -> None:
    outcome = score_item(
        REGISTRY, SPECS[spec], Item("stem", case.response, case.reference), ScoreContext()
    )
    expected = case.verdict(spec)
    assert outcome.status == "ok", outcome.error
    assert outcome.success is expected, outcome.details
    assert outcome.score == (1.0 if expected else 0.0)
    assert outcome.reward == outcome.score
    if spec == CAREFUL:
        assert bool(outcome.details.get("rules")) is (case.prorl_v1 is not None), outcome.details


@pytest.mark.parametrize(
    "case",
    [c for c in STEM_CASES if c.choices is None and parse_number(c.gold) is None],
    ids=lambda c: c.comment[:50],
)
def test_symbolic_rows_agree_with_math_verify(case: StemCase) -> None:
    answer = last_boxed(case.response)
    assert answer is not None
    assert verify(parse("\\boxed{" + case.gold + "}"), parse("\\boxed{" + answer + "}")) is (
        case.verdict(PLAIN)
    )


def test_multiple_choice_details_name_the_letters() -> None:
    outcome = _score("Answer: B", {"answer": "blue", "choices": list(COLOURS)})
    assert outcome.details["extracted"] == "B"
    assert outcome.details["gold"] == "C"
    assert outcome.parsed is True
    unparsed = _score("no idea", {"answer": "C", "choices": list(COLOURS)})
    assert (unparsed.parsed, unparsed.score) == (False, 0.0)


@pytest.mark.parametrize(
    ("reference", "field"),
    [
        ({}, "reference.answer"),
        ({"answer": ""}, "reference.answer"),
        ({"answer": "A", "choices": ["only one"]}, "reference.choices"),
        ({"answer": "A", "choices": ["same", "Same"]}, "reference.choices"),
        ({"answer": "1", "rel_tol": 2.0}, "reference.rel_tol"),
        ({"answer": "1", "rel_tol": -0.1}, "reference.rel_tol"),
    ],
)
def test_malformed_reference_is_invalid_and_names_the_field(
    reference: dict[str, Any], field: str
) -> None:
    outcome = _score("Answer: A", reference)
    assert outcome.status == "invalid"
    assert outcome.error is not None and field in outcome.error["message"]


@pytest.mark.parametrize("gold", ["E", "7", "purple"])
def test_gold_outside_the_choices_is_invalid(gold: str) -> None:
    outcome = _score("Answer: A", {"answer": gold, "choices": list(COLOURS)})
    assert outcome.status == "invalid"


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("42", 42.0),
        ("-3.5", -3.5),
        ("1,234,567", 1234567.0),
        ("12{,}000", 12000.0),
        ("3.2e-5", 3.2e-5),
        (r"3.2 \times 10^{-5}", 3.2e-5),
        (r"6.02 \cdot 10^{23}", 6.02e23),
        ("1/8", 0.125),
        (r"\frac{3}{4}", 0.75),
        (r"\dfrac{1}{4}", 0.25),
        (r"9.8 \text{ m/s}", 9.8),
        ("42 J", 42.0),
        (r"$5$", 5.0),
        (r"\approx 2.5", 2.5),
        ("\u22124", -4.0),
        ("3/4 kg", 0.75),
    ],
)
def test_parse_number(text: str, value: float) -> None:
    assert parse_number(text) == pytest.approx(value, rel=1e-12)


@pytest.mark.parametrize("text", ["x^2", r"\sqrt{2}", "blue", "", ("1/0"), r"\pi"])
def test_parse_number_declines(text: str) -> None:
    assert parse_number(text) is None
