"""Two models on their common prompts: the pass@k difference and the problems solved only by one.

Both come with a prompt-level and, where a model has two seeds or more, a recipe-level interval
(intervals.py); the prompt draw is the same for both models (paired). A model with one seed is
taken as a fixed checkpoint (as a base model is: it has no training seed).

Solved-by counts are at **equal sample budgets**: at budget k each model's chance of solving a
prompt is the mean over its seeds of its per-seed pass@k, so a model with three seeds of 8 samples
is compared with a one-seed base of 8 on 8 samples a draw, never on the 24 it has in all. Per
prompt, `only_a` = P_a (1 - P_b), `both` = P_a P_b, and so on; a count is their sum over the
prompts. The budgets are the k no larger than the common budget (the fewest samples any seed of
either model has on a common prompt), and the common budget itself. The prompt lists are taken at
the common budget with the same definition: a prompt is listed with its `probability`, its term
of the sum, when that is positive, so the list's probabilities add up to the count.

The counts' intervals. Prompt level: the bootstrap's variance of the count (prompts redrawn with
all their seeds), in Wilson's form with an effective sample size (intervals.py). Recipe level:
per model with two seeds or more, a seed part is added: the between-seed variance of its per-seed
counts (the other model's per-prompt chance held at its mean) over the number of seeds, less the
prompt x seed interaction, `intervals.seed_component`; degrees of freedom are Satterthwaite's,
the seed part at its median-unbiased value (`two_levels`). The interaction (at k = 1 mostly the
binomial noise of n samples) is already in the prompt-level variance: counted twice it made the
intervals wide where the seed part is small and the chi-squared on two degrees of freedom then
left them short where it is large. Both levels are then widened by `CONTINUITY`, half a prompt on
each side, a continuity correction for a count of prompts: a rare category (about 3 prompts of
100 solved only by the base at k = 16 in the simulation) is near-binary per prompt, and without
it misses its value from above more often than the level says, as any interval on a proportion
near 0 does. In the simulation of tests/eval_simulation.py (a three-seed RL model against a
one-seed base) every category covers within 0.93-0.97 for k in 1, 4, 16 over 2,000 studies
(benchmarks/eval_coverage.py). Seeds are never resampled: three seeds drawn with replacement
cannot carry their spread.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from proctor_client.evaluation.bootstrap import Design, Interval, seeded_estimates
from proctor_client.evaluation.estimators import pass_at_k, zero_success_upper_bound
from proctor_client.evaluation.intervals import recipe_variance, seed_component, two_levels

__all__ = ["CATEGORIES", "CONTINUITY", "OnlyBy", "Paired", "compare", "difference"]

Floats = NDArray[np.float64]
Ints = NDArray[np.int64]

CATEGORIES = ("only_a", "only_b", "both", "neither")
CONTINUITY = 0.5
"""Prompts added to each side of a solved-by count's intervals (see the module's docstring)."""


@dataclass(frozen=True)
class OnlyBy:
    """A prompt solved only by one model at the common budget."""

    prompt_id: str
    probability: float
    """Its term in the count: P(this model solves it) x P(the other does not), at the budget."""
    other_samples: int
    other_successes: int
    other_upper_bound: float | None
    """With no success of the other model in all its samples, the one-sided bound on its rate."""


@dataclass
class Paired:
    a: str
    b: str
    prompts: int
    ks: list[int]
    a_curve: list[float]
    b_curve: list[float]
    difference: list[Interval]
    """pass@k of a minus pass@k of b, prompt-level interval."""
    difference_recipe: list[Interval] | None
    budget: int
    """The common sample budget per draw (see the module's docstring)."""
    solved_ks: list[int]
    solved: dict[str, list[Interval]]
    """Per category of CATEGORIES, per k of `solved_ks`: expected prompts, prompt-level CI."""
    solved_recipe: dict[str, list[Interval]] | None
    only_a: list[OnlyBy]
    only_b: list[OnlyBy]


def _intervals(estimate: Floats, bounds: tuple[Floats, Floats], scale: float) -> list[Interval]:
    low, high = bounds
    return [
        Interval(float(e) * scale, float(lo) * scale, float(hi) * scale)
        for e, lo, hi in zip(estimate, low, high, strict=True)
    ]


def _per_seed(estimates: Floats, weights: Floats) -> Floats:
    """(seeds, K): each seed's weighted mean over prompts."""
    per_seed: Floats = np.einsum("p,spk->sk", weights, estimates) / weights.sum()
    return per_seed


def _difference(
    ea: Floats, eb: Floats, design: Design, resamples: Floats, confidence: float
) -> tuple[Floats, Floats, list[Interval], list[Interval] | None]:
    weights = design.point_weights()
    sa, sb = _per_seed(ea, weights), _per_seed(eb, weights)
    ones_a, ones_b = np.ones((len(resamples), ea.shape[0])), np.ones((len(resamples), eb.shape[0]))
    drawn = seeded_estimates(ea, resamples, ones_a) - seeded_estimates(eb, resamples, ones_b)
    variance = drawn.var(axis=0, ddof=1) * design.variance_correction
    diff = sa.mean(axis=0) - sb.mean(axis=0)
    parts = [(recipe_variance(sa), ea.shape[0]), (recipe_variance(sb), eb.shape[0])]
    prompt, recipe = two_levels(
        diff, variance, design.degrees_of_freedom, parts, ea.shape[1], confidence, bounded=False
    )
    return (
        sa.mean(axis=0),
        sb.mean(axis=0),
        _intervals(diff, prompt, 1.0),
        None if recipe is None else _intervals(diff, recipe, 1.0),
    )


def difference(
    ea: Floats,
    eb: Floats,
    design: Design,
    resamples: int,
    confidence: float,
    rng: np.random.Generator,
) -> tuple[list[Interval], list[Interval] | None]:
    """Mean of `ea` minus mean of `eb` ((seeds, common prompts, K) each, any per-prompt values
    in [0, 1]), with the prompt- and recipe-level intervals the pass@k difference gets."""
    drawn = design.resample(resamples, rng)
    _, _, prompt, recipe = _difference(ea, eb, design, drawn, confidence)
    return prompt, recipe


def _widened(bounds: tuple[Floats, Floats], prompts: int) -> tuple[Floats, Floats]:
    low, high = bounds
    step = CONTINUITY / prompts
    return np.clip(low - step, 0.0, 1.0), np.clip(high + step, 0.0, 1.0)


def _solved(
    fa: Floats, fb: Floats, rng: np.random.Generator, resamples: int, confidence: float
) -> tuple[Floats, dict[str, list[Interval]], dict[str, list[Interval]] | None]:
    """Per category, the expected counts with their intervals; and the per-prompt terms
    (4, prompts, K)."""
    prompts = fa.shape[1]
    sides = {"only_a": (True, False), "only_b": (False, True), "both": (True, True)}
    sides["neither"] = (False, False)
    terms = np.empty((len(CATEGORIES), prompts, fa.shape[2]))
    design = Design.pooled(prompts)  # counts of prompts: every prompt counts once
    weights = design.resample(resamples, rng)
    weights /= weights.sum(axis=1, keepdims=True)
    solved: dict[str, list[Interval]] = {}
    recipe: dict[str, list[Interval]] = {}
    for index, name in enumerate(CATEGORIES):
        solves_a, solves_b = sides[name]
        xa = fa if solves_a else 1.0 - fa  # (seeds_a, prompts, K)
        xb = fb if solves_b else 1.0 - fb
        ma, mb = xa.mean(axis=0), xb.mean(axis=0)
        terms[index] = ma * mb
        fraction = terms[index].mean(axis=0)
        variance = (weights @ terms[index]).var(axis=0, ddof=1) * design.variance_correction
        parts = [
            (seed_component(xa * mb[None]), fa.shape[0]),
            (seed_component(ma[None] * xb), fb.shape[0]),
        ]
        prompt_ci, recipe_ci = two_levels(
            fraction, variance, design.degrees_of_freedom, parts, prompts, confidence
        )
        solved[name] = _intervals(fraction, _widened(prompt_ci, prompts), float(prompts))
        if recipe_ci is not None:
            recipe[name] = _intervals(fraction, _widened(recipe_ci, prompts), float(prompts))
    return terms, solved, recipe or None


def _listed(
    common: list[str], probability: Floats, n_other: Ints, c_other: Ints, alpha: float
) -> list[OnlyBy]:
    chosen = np.flatnonzero(probability > 0)
    chosen = chosen[np.argsort(-probability[chosen], kind="stable")]
    listed = []
    for i in chosen:
        bound = None
        if c_other[i] == 0:
            bound = float(zero_success_upper_bound(n_other[i], alpha))
        listed.append(
            OnlyBy(common[i], float(probability[i]), int(n_other[i]), int(c_other[i]), bound)
        )
    return listed


def compare(
    names: tuple[str, str],
    common: list[str],
    estimates: tuple[Floats, Floats],
    counts: tuple[tuple[Ints, Ints], tuple[Ints, Ints]],
    ks: list[int],
    design: Design,
    options: tuple[int, float, float],
    rng: np.random.Generator,
) -> Paired:
    """`estimates`: each model's (seeds, common prompts, len(ks)) pass@k; `counts`: each
    model's (n, c), (seeds, common prompts); `options`: (resamples, confidence, alpha)."""
    resamples, confidence, alpha = options
    (na, ca), (nb, cb) = counts
    drawn = design.resample(resamples, rng)
    a_curve, b_curve, difference, difference_recipe = _difference(
        estimates[0], estimates[1], design, drawn, confidence
    )
    budget = int(min(na.min(), nb.min()))
    solved_ks = sorted({k for k in ks if k <= budget} | {budget})
    k = np.asarray(solved_ks, dtype=np.int64)[None, None, :]
    fa = pass_at_k(na[..., None], ca[..., None], k)
    fb = pass_at_k(nb[..., None], cb[..., None], k)
    terms, solved, solved_recipe = _solved(fa, fb, rng, resamples, confidence)
    return Paired(
        a=names[0],
        b=names[1],
        prompts=len(common),
        ks=ks,
        a_curve=[float(v) for v in a_curve],
        b_curve=[float(v) for v in b_curve],
        difference=difference,
        difference_recipe=difference_recipe,
        budget=budget,
        solved_ks=solved_ks,
        solved=solved,
        solved_recipe=solved_recipe,
        only_a=_listed(common, terms[0][:, -1], nb.sum(axis=0), cb.sum(axis=0), alpha),
        only_b=_listed(common, terms[1][:, -1], na.sum(axis=0), ca.sum(axis=0), alpha),
    )
