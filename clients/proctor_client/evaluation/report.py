"""DIR/report.json and DIR/report.md from a study's statistics.

report.json: `{"spec", "study", "models": {MODEL: {"prompts", "samples", "parse_rate",
"mean_score", "pass_at_k": {"K": {"estimate", "ci": [lo, hi], "capped_prompts"}}, ...}},
"paired": {"A|B": {...}}, "costs": {MODEL: {...}}, "equal_tokens": {"A|B": {...}}, "review",
"review_judge", "contamination", "warnings", "skipped_rows"}`
("contamination" is null unless `--exclude` named a contamination result; "review_judge" unless
`--review-judge` labelled the review sample: the judge spec, its labels' verified pass@k per model
as "review" has them, the lines it left unlabelled, and its agreement with the human labels).
The Markdown (`report_markdown`) says the same for a person.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from proctor_client.evaluation.analysis import Curve, ModelSummary, Study
from proctor_client.evaluation.bootstrap import Interval
from proctor_client.evaluation.budgets import EqualTokens
from proctor_client.evaluation.estimators import wilson_interval
from proctor_client.evaluation.paired import OnlyBy, Paired
from proctor_client.evaluation.review_judge import Agreement
from proctor_client.evaluation.rows import BadRow
from proctor_client.evaluation.scoring import SpecSummary

__all__ = [
    "LISTED",
    "Decontaminated",
    "JudgeReview",
    "Verified",
    "bootstrap_rule",
    "build_json",
    "correct_fraction",
    "success_rule",
    "write_json",
]

LISTED = 25
"""Prompts listed by name in the Markdown per list (report.json has them all)."""


@dataclass(frozen=True)
class Verified:
    """pass@k after the reasoning review, bracketed (see review.py)."""

    low: Study
    high: Study
    labelled: dict[str, tuple[int, int]]
    """Per model, (labels read, judged correct)."""
    sampled: dict[str, int]


@dataclass(frozen=True)
class JudgeReview:
    """The review sample labelled by a judge model (review_judge.py)."""

    spec: SpecSummary
    verified: Verified
    unlabelled: dict[str, int]
    """Lines the judge left unlabelled, by reason."""
    agreement: Agreement | None
    """With the human labels, where both exist."""


@dataclass(frozen=True)
class Decontaminated:
    """The study again without the prompts a contamination check flagged (contamination.py)."""

    source: str
    flagged: frozenset[str]
    study: Study | None
    """None when no judged prompt is left."""


def _ci(interval: Interval | None) -> list[float] | None:
    return None if interval is None else [interval.low, interval.high]


def _padded(intervals: list[Interval] | None, size: int) -> list[Interval | None]:
    return [None] * size if intervals is None else [*intervals]


def _curve_json(curve: Curve) -> dict[str, Any]:
    recipe = _padded(curve.recipe, len(curve.ks))
    return {
        str(k): {
            "estimate": i.estimate,
            "ci": _ci(i),
            "ci_recipe": _ci(r),
            "capped_prompts": capped,
        }
        for k, i, r, capped in zip(curve.ks, curve.intervals, recipe, curve.capped, strict=True)
    }


def _chance_json(curve: Curve) -> dict[str, float] | None:
    if curve.chance is None:
        return None
    return {str(k): v for k, v in zip(curve.ks, curve.chance, strict=True)}


def _model_json(s: ModelSummary, study: Study) -> dict[str, Any]:
    return {
        "prompts": len(s.prompts),
        "samples": s.samples,
        "seeds": s.seeds,
        "excluded_rows": study.excluded.get(s.name, {}),
        "decoding": study.decoding.get(s.name, []),
        "parse_rate": s.parse_rate,
        "correct_given_parsed": s.correct_given_parsed,
        "strict_success": s.strict_success,
        "mean_score": s.mean_score,
        "mean_reward": s.mean_reward,
        "continuous_scores": s.continuous,
        "pass_at_k": _curve_json(s.curve),
        "chance": _chance_json(s.curve),
        "families": {
            f: {"pass_at_k": _curve_json(c), "chance": _chance_json(c)}
            for f, c in sorted(s.families.items())
        },
        "unsolved": [{"prompt_id": p, "samples": n, "upper_bound": u} for p, n, u in s.unsolved],
        "short_prompts": [{"prompt_id": p, "samples": n} for p, n in s.short],
        "dropped_prompts": s.dropped,
    }


def _only_json(listed: Sequence[OnlyBy], other: str) -> list[dict[str, Any]]:
    return [
        {
            "prompt_id": q.prompt_id,
            "probability": q.probability,
            f"{other}_samples": q.other_samples,
            f"{other}_successes": q.other_successes,
            f"{other}_upper_bound": q.other_upper_bound,
        }
        for q in listed
    ]


def _paired_json(p: Paired) -> dict[str, Any]:
    recipe = _padded(p.difference_recipe, len(p.ks))
    solved: dict[str, Any] = {}
    for i, k in enumerate(p.solved_ks):
        solved[str(k)] = {
            name: {
                "estimate": values[i].estimate,
                "ci": _ci(values[i]),
                "ci_recipe": _ci(p.solved_recipe[name][i]) if p.solved_recipe else None,
            }
            for name, values in p.solved.items()
        }
    return {
        "a": p.a,
        "b": p.b,
        "prompts": p.prompts,
        "pass_at_k": {
            str(k): {"a": a, "b": b, "difference": d.estimate, "ci": _ci(d), "ci_recipe": _ci(r)}
            for k, a, b, d, r in zip(p.ks, p.a_curve, p.b_curve, p.difference, recipe, strict=True)
        },
        "budget": p.budget,
        "solved": solved,
        "only_a": _only_json(p.only_a, "b"),
        "only_b": _only_json(p.only_b, "a"),
    }


def success_rule(study: Study) -> str:
    t = study.options.threshold
    return "the scorer's `success` (full success)" if t is None else f"score >= {t:g}"


def bootstrap_rule(study: Study) -> str:
    o = study.options
    if o.two_level:
        first = "task families, then prompts within each drawn family"
    elif o.weights is not None:
        first = "prompts within each task family (declared family weights held fixed)"
    else:
        first = "prompts (all samples of a prompt together)"
    rule = (
        f"prompt level: the variance of {o.resamples} bootstrap resamples of {first}, the same "
        "draw for every seed, made a Wilson interval with that effective sample size and the "
        "normal quantile"
    )
    seeded = any(len(s.seeds) > 1 for s in study.models.values())
    if seeded:
        rule += (
            "; recipe level: plus the between-seed variance over the number of seeds, on "
            "Satterthwaite's degrees of freedom (training seeds are not resampled)"
        )
    else:
        rule += "; no recipe level (no model has two training seeds or more)"
    return rule


LEVELS = {
    "ci": "prompt level: these training runs, prompts as a sample of their population",
    "ci_recipe": "recipe level: new training runs of the same recipe too (null with one seed)",
}


def build_json(
    study: Study,
    spec: SpecSummary,
    skipped: Sequence[BadRow],
    verified: Verified | None,
    decontaminated: Decontaminated | None = None,
    judged: JudgeReview | None = None,
) -> dict[str, Any]:
    o = study.options
    report: dict[str, Any] = {
        "spec": {"name": spec.name, "version": spec.version, "hash": spec.hash},
        "study": {
            "success": success_rule(study),
            "threshold": o.threshold,
            "bootstrap": bootstrap_rule(study),
            "intervals": LEVELS,
            "confidence": o.confidence,
            "weights": dict(o.weights) if o.weights is not None else None,
            "alpha": o.alpha,
            "rng_seed": o.rng_seed,
        },
        "models": {name: _model_json(s, study) for name, s in study.models.items()},
        "paired": {name: _paired_json(p) for name, p in study.paired.items()},
        "costs": {name: asdict(c) for name, c in study.costs.items()},
        "equal_tokens": {name: _equal_json(e) for name, e in study.equal_tokens.items()},
        "review": None,
        "review_judge": None,
        "contamination": None if decontaminated is None else _clean_json(study, decontaminated),
        "warnings": study.warnings,
        "skipped_rows": [{"line": b.line, "message": b.message} for b in skipped],
    }
    if verified is not None:
        report["review"] = _review_json(study, verified)
    if judged is not None:
        report["review_judge"] = {
            "spec": {
                "name": judged.spec.name,
                "version": judged.spec.version,
                "hash": judged.spec.hash,
            },
            "models": _review_json(study, judged.verified),
            "unlabelled": judged.unlabelled,
            "agreement": _agreement_json(judged.agreement),
        }
    report["spec"]["parameters"] = spec.parameters
    return report


def _review_json(study: Study, verified: Verified) -> dict[str, Any]:
    review: dict[str, Any] = {}
    for name in study.models:
        read, correct = verified.labelled.get(name, (0, 0))
        low, high = verified.low.models.get(name), verified.high.models.get(name)
        review[name] = {
            "sampled": verified.sampled.get(name, 0),
            "labelled": read,
            "judged_correct": correct,
            "fraction_correct": correct_fraction(correct, read, study.options.confidence),
            "pass_at_k_verified": {
                str(k): {
                    "low": low.curve.intervals[i].estimate if low else None,
                    "high": high.curve.intervals[i].estimate if high else None,
                }
                for i, k in enumerate(study.models[name].curve.ks)
            },
        }
    return review


def _agreement_json(agreement: Agreement | None) -> dict[str, Any] | None:
    if agreement is None:
        return None
    return {
        "rows": agreement.rows,
        "table": [list(r) for r in agreement.table],
        "table_rows": "human correct, human incorrect",
        "table_columns": "judge correct, judge incorrect",
        "kappa": agreement.kappa,
    }


def _equal_json(e: EqualTokens) -> dict[str, Any]:
    return {
        "tokens_per_prompt": e.tokens,
        "k_a": e.k_a,
        "k_b": e.k_b,
        "pass_a": e.a,
        "pass_b": e.b,
        "difference": {
            "estimate": e.difference.estimate,
            "ci": _ci(e.difference),
            "ci_recipe": _ci(e.difference_recipe),
        },
    }


def _clean_json(study: Study, clean: Decontaminated) -> dict[str, Any]:
    models: dict[str, Any] = {}
    for name, s in study.models.items():
        left = clean.study.models.get(name) if clean.study is not None else None
        models[name] = {
            "flagged_prompts": sum(p in clean.flagged for p in s.prompts),
            "prompts_left": len(left.prompts) if left else 0,
            "pass_at_k": _curve_json(s.curve),
            "pass_at_k_clean": _curve_json(left.curve) if left else None,
        }
    return {"source": clean.source, "flagged": sorted(clean.flagged), "models": models}


def correct_fraction(correct: int, read: int, confidence: float) -> dict[str, Any] | None:
    if read == 0:
        return None
    low, high = wilson_interval(correct, read, confidence)
    return {"estimate": correct / read, "ci": [low, high]}


def write_json(path: Path, report: dict[str, Any]) -> None:
    path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
