"""Invariants of every registered scorer, and what registration refuses.

For each `process` scorer in the default registry, every `examples()` response scores 1 and the
empty response scores 0 through `score_item` (the engine path the service and `proctor score`
share), under every spec that has its domain. Thread scorers (which need a sandbox) are added by
the code domain's tests, opt-in ones (the judge, which needs an endpoint) by their own.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from reward_specs import (
    DomainConfig,
    Item,
    Judgement,
    ReferenceModel,
    Registry,
    ScoreContext,
    Scorer,
    UnknownDomain,
    default_registry,
    load_specs,
    score_item,
)
from reward_specs.math import SCORER as MATH

REGISTRY = default_registry()
SPECS = load_specs(REGISTRY)
UNJUDGED = sorted(
    name
    for name, spec in SPECS.items()
    if not any(getattr(c, "judge", None) is not None for c in spec.domains.values())
)
"""The specs whose rule domains need no judge model (a judge stage's specs: the same invariant
against a scripted judge in tests/test_judge_stage.py)."""
PROCESS_EXAMPLES = [
    pytest.param(scorer, example, id=f"{scorer.domain}-{i}")
    for scorer in REGISTRY
    if scorer.executor == "process" and not scorer.opt_in
    for i, example in enumerate(scorer.examples())
]


def test_every_scorer_has_examples() -> None:
    assert {"math", "stem"} <= set(REGISTRY.domains())
    for scorer in REGISTRY:
        assert scorer.examples(), scorer.domain
        assert scorer.description, scorer.domain


@pytest.mark.parametrize("spec", UNJUDGED)
@pytest.mark.parametrize(("scorer", "example"), PROCESS_EXAMPLES)
def test_example_scores_one_and_empty_scores_zero(spec: str, scorer: Any, example: Any) -> None:
    good = score_item(
        REGISTRY,
        SPECS[spec],
        Item(scorer.domain, example.response, example.reference),
        ScoreContext(),
    )
    assert good.status == "ok", good.error
    assert (good.score, good.success, good.reward) == (1.0, True, 1.0), good.details
    empty = score_item(
        REGISTRY, SPECS[spec], Item(scorer.domain, "", example.reference), ScoreContext()
    )
    assert empty.status == "ok", empty.error
    assert (empty.score, empty.success) == (0.0, False), empty.details


@pytest.mark.parametrize(("scorer", "example"), PROCESS_EXAMPLES)
def test_example_reference_validates(scorer: Any, example: Any) -> None:
    scorer.reference_type.model_validate(example.reference)


def test_unknown_domain_is_invalid() -> None:
    outcome = score_item(
        REGISTRY, SPECS["prorl-v1"], Item("astrology", "x", {"answer": "1"}), ScoreContext()
    )
    assert outcome.status == "invalid"
    assert outcome.error is not None and outcome.error["code"] == "unknown_domain"
    with pytest.raises(UnknownDomain):
        REGISTRY.get("astrology")


def test_the_careful_termination_spec_is_careful_2_with_termination_2s_shaping() -> None:
    # stages 4-5 of a run trained on prorl-v1-careful-2 keep its grader (every domain, the
    # response handling) and take prorl-v1-termination-2's shaping
    shaped, careful = SPECS["prorl-v1-careful-termination-2"], SPECS["prorl-v1-careful-2"]
    assert shaped.version == careful.version == "2.0.0"
    assert shaped.parameters()["domains"] == careful.parameters()["domains"]
    assert shaped.response == careful.response
    assert shaped.termination == SPECS["prorl-v1-termination-2"].termination
    assert shaped.termination != careful.termination


# ---------------------------------------------------------------- registration


class _Config(DomainConfig):
    pass


class _Reference(ReferenceModel):
    answer: str


def _always_one(response: str, reference: Any, config: Any, ctx: ScoreContext) -> Judgement:
    return Judgement(1.0, True, True)


TOY: Scorer[Any, Any] = Scorer(
    domain="toy",
    config_type=_Config,
    reference_type=_Reference,
    score=_always_one,
    examples=list,
)


def test_a_well_formed_scorer_registers() -> None:
    registry = Registry([TOY])
    assert registry.domains() == ["toy"]
    assert "toy" in registry and registry.get("toy") is TOY


def test_duplicates_are_refused() -> None:
    with pytest.raises(ValueError, match="already registered"):
        Registry([TOY, TOY])
    with pytest.raises(ValueError, match="already registered"):
        Registry([MATH, replace(TOY, domain="math")])
    registry = Registry([TOY])
    with pytest.raises(ValueError):
        registry.register(TOY)
    assert registry.domains() == ["toy"]


@pytest.mark.parametrize(
    ("bad", "error"),
    [
        ("not a scorer", TypeError),
        ({"domain": "toy"}, TypeError),
        (replace(TOY, config_type=dict), TypeError),
        (replace(TOY, config_type=_Reference), TypeError),
        (replace(TOY, config_type="MathConfig"), TypeError),  # type: ignore[arg-type]
        (replace(TOY, reference_type=dict), TypeError),
        (replace(TOY, reference_type=_Config), TypeError),
        (replace(TOY, executor="gpu"), ValueError),  # type: ignore[arg-type]
        (replace(TOY, domain=""), ValueError),
        (replace(TOY, domain="two words"), ValueError),
        (replace(TOY, domain="a-b"), ValueError),
    ],
)
def test_wrong_types_are_refused(bad: Any, error: type[Exception]) -> None:
    registry = Registry()
    with pytest.raises(error):
        registry.register(bad)
    assert registry.domains() == []


# ---------------------------------------------------------------- Scorer.from_function


def _documented(
    response: str, reference: _Reference, config: _Config, ctx: ScoreContext
) -> Judgement:
    """Always one, whatever
    the response.

    Later paragraphs are not part of the description."""
    return Judgement(1.0, True, True)


def _undocumented(
    response: str, reference: _Reference, config: _Config, ctx: ScoreContext
) -> Judgement:
    return Judgement(1.0, True, True)


def _unannotated(response, reference, config, ctx):
    """Nothing says what the reference and config are."""
    return Judgement(1.0, True, True)


def _swapped(response: str, reference: _Config, config: _Reference, ctx: ScoreContext) -> Judgement:
    """Config and reference in each other's place."""
    return Judgement(1.0, True, True)


def _plain_config(
    response: str, reference: _Reference, config: dict[str, Any], ctx: ScoreContext
) -> Judgement:
    """A config that pydantic would not refuse unknown keys of."""
    return Judgement(1.0, True, True)


def _three(response: str, reference: _Reference, config: _Config) -> Judgement:
    """No context parameter."""
    return Judgement(1.0, True, True)


def test_from_function_reads_the_types_and_description_of_the_score_function() -> None:
    scorer = Scorer.from_function("toy", _documented, list, libraries=("sympy",))
    assert scorer.reference_type is _Reference and scorer.config_type is _Config
    assert scorer.description == "Always one, whatever the response."
    assert (scorer.score, scorer.examples, scorer.libraries) == (_documented, list, ("sympy",))
    assert scorer == replace(
        TOY, score=_documented, libraries=("sympy",), description=scorer.description
    )
    Registry([scorer])


@pytest.mark.parametrize(
    ("score", "error", "message"),
    [
        (_unannotated, TypeError, "toy: parameter 'reference' of .*_unannotated .* ReferenceModel"),
        (_swapped, TypeError, "toy: parameter 'reference' of .*_swapped .* ReferenceModel"),
        (_plain_config, TypeError, "toy: parameter 'config' of .*_plain_config .* DomainConfig"),
        (_three, TypeError, r"toy: .*_three must take \(response, reference, config, ctx\)"),
        (_undocumented, ValueError, "toy: .*_undocumented needs a docstring"),
    ],
)
def test_from_function_refuses_what_it_cannot_read(
    score: Any, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        Scorer.from_function("toy", score, list)
