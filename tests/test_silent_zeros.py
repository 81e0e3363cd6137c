"""No failure of ours is scored as a wrong answer: a verifier that is broken (a scorer that
raises, math-verify failing through its seam, a missing module) makes items `infra_error`, while
what the response causes (LaTeX math-verify cannot read) stays a judged 0 with its reason."""

from __future__ import annotations

import itertools
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
    caches,
    default_registry,
    load_specs,
    score_item,
)
from reward_specs.math import domain as math_domain
from reward_specs.stem import domain as stem_domain

REGISTRY = default_registry()
SPECS = load_specs(REGISTRY)
CTX = ScoreContext()
_fresh = itertools.count(2)


def symbolic() -> Item:
    """A math item past the fast path (through math-verify), new each time: verdicts are
    cached, and a cached one would hide the seam."""
    n = next(_fresh)
    answer = f"\\sin^2(x) + \\cos^2(x) + {n}"  # not plain rationals nor a plain expression
    return Item("math", f"so \\boxed{{{answer}}}", {"answer": str(n + 1)})


def closed_form() -> Item:
    n = next(_fresh)
    return Item("stem", f"the answer is \\sqrt{{{n * n}}}", {"answer": f"{n}.0"})


def _score(item: Item, spec: str = "prorl-v1") -> Any:
    return score_item(REGISTRY, SPECS[spec], item, CTX)


class _Config(DomainConfig):
    pass


class _Reference(ReferenceModel):
    answer: str


def _buggy(response: str, reference: Any, config: Any, ctx: ScoreContext) -> Judgement:
    raise KeyError("a bug in a scorer of ours")


def test_a_scorer_that_raises_is_infra_error_never_a_zero() -> None:
    broken: Scorer[Any, Any] = Scorer(
        domain="toy", config_type=_Config, reference_type=_Reference, score=_buggy, examples=list
    )
    registry = Registry([*REGISTRY, broken])
    spec = load_specs(registry)["prorl-v1"]
    outcome = score_item(registry, spec, Item("toy", "x", {"answer": "1"}), CTX)
    assert outcome.status == "infra_error" and outcome.score is None
    assert outcome.error is not None and outcome.error["code"] == "scorer_error"


@pytest.mark.parametrize("spec", ["prorl-v1", "prorl-v1-careful"])
@pytest.mark.parametrize(
    "failure", [ImportError("no module named latex2sympy2_extended"), ValueError("grammar gone")]
)
def test_math_verify_broken_through_its_seam_is_infra_error(
    monkeypatch: pytest.MonkeyPatch, failure: Exception, spec: str
) -> None:
    assert _score(symbolic(), spec).score == 1.0

    def broken_parse(*args: Any, **kwargs: Any) -> Any:
        raise failure

    monkeypatch.setattr(math_domain, "parse", broken_parse)
    caches.clear_all()  # the gold's cached parse too
    outcome = _score(symbolic(), spec)
    assert outcome.status == "infra_error", outcome
    assert outcome.error is not None and outcome.error["code"] == "scorer_error"


def test_a_broken_verify_is_infra_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken_verify(*args: Any, **kwargs: Any) -> bool:
        raise TypeError("verify() got an unexpected keyword argument")

    monkeypatch.setattr(math_domain, "verify", broken_verify)
    outcome = _score(symbolic())
    assert outcome.status == "infra_error", outcome


def test_what_only_the_response_breaks_stays_a_judged_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    # math-verify raising on this one answer, and working on the canary: the response's fault.
    real = math_domain.parse
    item = symbolic()
    bad = item.response.removeprefix("so \\boxed{").removesuffix("}")

    def picky_parse(text: str, *args: Any, **kwargs: Any) -> Any:
        if bad in text:
            raise ValueError("unparsable LaTeX")
        return real(text, *args, **kwargs)

    monkeypatch.setattr(math_domain, "parse", picky_parse)
    outcome = _score(item)
    assert (outcome.status, outcome.score) == ("ok", 0.0)
    assert outcome.details["reason"] == "parse_error"
    assert outcome.details["error"] == "ValueError"


def test_stem_closed_forms_with_a_broken_parser_are_infra_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert _score(closed_form()).score == 1.0

    def broken_parse(*args: Any, **kwargs: Any) -> Any:
        raise AttributeError("module 'sympy' has no attribute 'Expr'")

    monkeypatch.setattr(stem_domain, "parse", broken_parse)
    monkeypatch.setattr(math_domain, "parse", broken_parse)
    caches.clear_all()  # the gold's cached parse too
    outcome = _score(closed_form())
    assert outcome.status == "infra_error", outcome


def test_unreadable_latex_in_a_response_is_still_a_judged_zero() -> None:
    outcome = _score(Item("math", "\\boxed{\\frac{1}{}}}", {"answer": "\\frac{1}{2}"}))
    assert outcome.status == "ok" and outcome.score == 0.0
