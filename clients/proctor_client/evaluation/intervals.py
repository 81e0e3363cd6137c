"""Interval arithmetic of a study: a bounded mean from its variance, and the two levels of claim.

Every pass@k average lies in [0, 1], and the bootstrap is used here for one thing only: the
variance of the study's estimate under its design (strata, declared weights, two-level draws).
The interval is then the Wilson score interval with an effective sample size,
`n_eff = m (1 - m) / variance`, and, at the recipe level, Student's t quantile in place of the
normal one (Korn and Graubard's interval for a survey proportion). On binary per-prompt values
(pass@n, a prompt solved at least once) it is Wilson's interval on the prompts, which keeps its
coverage near 0 and 1 and on 30 prompts, where a percentile bootstrap, a Wald interval on the
same values, does not.

Two levels, side by side:

- **prompt level** (these training runs; prompts as a sample of their population): the
  variance of the seed-averaged estimate when prompts are redrawn, the same draw for every seed,
  with the normal quantile: the Wilson form already carries the small-sample behaviour of binary
  values (a t on prompts - 1 degrees of freedom on top over-covers: 0.976 for pass@16 on 30
  prompts in the simulation of tests/test_eval_coverage.py, against 0.946 without).
- **recipe level** (new training runs of the same recipe): the prompt-level variance plus the
  between-seed variance of the seeds' own estimates over the number of seeds, with Satterthwaite's
  degrees of freedom. With three seeds a seed effect makes these close to 2 (t = 4.3): resampling
  three seeds with replacement cannot carry the seed-to-seed variance, a t on their spread can.
  It needs two seeds at least; the protocol asks for three.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "bounded_interval",
    "recipe_variance",
    "satterthwaite",
    "seed_component",
    "symmetric_interval",
    "t_quantile",
    "two_levels",
]

Floats = NDArray[np.float64]

_GRID = 4001
_NORMAL_DF = 1e9
"""Degrees of freedom that make t the normal quantile (the prompt level: see the docstring)."""


@lru_cache(maxsize=1024)
def _t_quantile_cached(p: float, df: float) -> float:
    # x = sqrt(df) tan(theta) turns the t density into cos(theta)^(df - 1) on (-pi/2, pi/2)
    theta = np.linspace(0.0, math.pi / 2, _GRID)
    density = np.cos(theta) ** (df - 1.0) if df != 1.0 else np.ones_like(theta)
    steps = (density[1:] + density[:-1]) / 2.0 * (theta[1] - theta[0])
    cumulative = np.concatenate(([0.0], np.cumsum(steps)))
    half = cumulative / cumulative[-1] / 2.0  # P(0 < T < x(theta))
    angle = float(np.interp(p - 0.5, half, theta))
    return math.sqrt(df) * math.tan(angle)


def t_quantile(p: float, df: float) -> float:
    """The p-quantile (p in [0.5, 1)) of Student's t on `df` > 0 degrees of freedom (not
    necessarily an integer; Satterthwaite's are not). Numerical, accurate to about 1e-6."""
    if not 0.5 <= p < 1.0:
        raise ValueError("t_quantile takes p in [0.5, 1)")
    if not df > 0:
        raise ValueError("t_quantile needs df > 0")
    if df > 1e6:
        from statistics import NormalDist

        return float(NormalDist().inv_cdf(p))
    return _t_quantile_cached(round(p, 12), round(float(df), 6))


def _quantiles(confidence: float, df: Floats) -> Floats:
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must lie in (0, 1)")
    p = 0.5 + confidence / 2.0
    return np.asarray([t_quantile(p, float(d)) for d in np.ravel(df)]).reshape(np.shape(df))


def bounded_interval(
    estimate: Floats, variance: Floats, df: Floats, confidence: float, floor_n: float
) -> tuple[Floats, Floats]:
    """Wilson intervals with effective sample sizes, elementwise, for means of values in [0, 1].

    `floor_n` stands in for the effective size where the variance is 0 (every resample gave the
    same value: all prompts solved, or none): the interval is then Wilson's for m out of
    `floor_n` (the number of prompts), never a point.
    """
    m = np.clip(np.asarray(estimate, dtype=np.float64), 0.0, 1.0)
    var = np.asarray(variance, dtype=np.float64)
    z = _quantiles(confidence, np.broadcast_to(np.asarray(df, dtype=np.float64), m.shape))
    spread = m * (1.0 - m)
    with np.errstate(divide="ignore", invalid="ignore"):
        n_eff = np.where(var > 0, spread / var, floor_n)
    # an all-equal study (m at 0 or 1) keeps Wilson's width on its prompts
    n_eff = np.where(spread > 0, n_eff, floor_n)
    n_eff = np.maximum(n_eff, 1e-12)
    z2n = z * z / n_eff
    centre = (m + z2n / 2.0) / (1.0 + z2n)
    half = z / (1.0 + z2n) * np.sqrt(spread / n_eff + z2n / (4.0 * n_eff))
    return np.clip(centre - half, 0.0, 1.0), np.clip(centre + half, 0.0, 1.0)


def symmetric_interval(
    estimate: Floats, variance: Floats, df: Floats, confidence: float
) -> tuple[Floats, Floats]:
    """`estimate +- t * sqrt(variance)`, elementwise (for differences, which are not bounded
    to [0, 1])."""
    m = np.asarray(estimate, dtype=np.float64)
    z = _quantiles(confidence, np.broadcast_to(np.asarray(df, dtype=np.float64), m.shape))
    half = z * np.sqrt(np.maximum(np.asarray(variance, dtype=np.float64), 0.0))
    return m - half, m + half


def satterthwaite(parts: list[tuple[Floats, float]]) -> Floats:
    """Welch-Satterthwaite degrees of freedom of a sum of variance components, each given with
    its own degrees of freedom: `(sum v)^2 / sum(v^2 / df)`."""
    total = sum(v for v, _ in parts)
    denominator = sum(v * v / d for v, d in parts)
    with np.errstate(divide="ignore", invalid="ignore"):
        df = np.where(denominator > 0, np.asarray(total) ** 2 / denominator, 1e9)
    return np.asarray(np.maximum(df, 1.0), dtype=np.float64)


def recipe_variance(per_seed: Floats) -> Floats:
    """The between-seed variance of the seeds' estimates (seeds, K) over the number of seeds:
    the seed component of a recipe-level variance."""
    seeds = per_seed.shape[0]
    if seeds < 2:
        return np.zeros(per_seed.shape[1:])
    variance: Floats = per_seed.var(axis=0, ddof=1) / seeds
    return variance


def seed_component(values: Floats) -> Floats:
    """The seed part of a recipe-level variance from per-seed, per-prompt values (seeds,
    prompts, K) whose mean over both is the estimate: the between-seed variance of the seeds'
    means over the number of seeds, less what the prompt x seed interaction (sampling noise
    included) puts into it, `MS_interaction / (seeds x prompts)`, floored at 0.

    The prompt-level variance, from prompts redrawn with all their seeds, already carries that
    interaction term once; `recipe_variance` would count it a second time (two-way random
    effects: E[var of seed means] = var_seed + var_interaction / prompts).
    """
    seeds, prompts = values.shape[0], values.shape[1]
    if seeds < 2:
        return np.zeros(values.shape[2:])
    seed_means = values.mean(axis=1)
    if prompts < 2:
        return recipe_variance(seed_means)
    residual = values - seed_means[:, None] - values.mean(axis=0)[None] + values.mean(axis=(0, 1))
    interaction = (residual**2).sum(axis=(0, 1)) / ((seeds - 1) * (prompts - 1))
    component: Floats = np.maximum(recipe_variance(seed_means) - interaction / (seeds * prompts), 0)
    return component


def _chi2_median(df: float) -> float:
    """The median of chi-squared on `df` degrees of freedom (exact for 2; Wilson-Hilferty else)."""
    if df == 2.0:
        return 2.0 * math.log(2.0)
    return df * (1.0 - 2.0 / (9.0 * df)) ** 3


def two_levels(
    estimate: Floats,
    prompt_variance: Floats,
    prompt_df: float,
    seed_parts: list[tuple[Floats, int]],
    prompts: int,
    confidence: float,
    bounded: bool = True,
) -> tuple[tuple[Floats, Floats], tuple[Floats, Floats] | None]:
    """The prompt-level interval of `estimate` (K,) and its recipe-level one (None when no part
    has two seeds or more).

    `seed_parts` holds, per model taking part, the between-seed variance of its seeds' estimates
    over their number (`recipe_variance`) and that number. The recipe level adds them to the
    prompt-level variance; its degrees of freedom are Satterthwaite's, computed with every seed
    component raised to its median-unbiased value (divided by the chi-squared median): three
    seeds whose spread happens to be small would otherwise claim many degrees of freedom exactly
    when the interval is already too narrow.
    """

    def interval(variance: Floats, df: Floats) -> tuple[Floats, Floats]:
        if bounded:
            return bounded_interval(estimate, variance, df, confidence, float(prompts))
        return symmetric_interval(estimate, variance, df, confidence)

    prompt_level = interval(prompt_variance, np.full(np.shape(estimate), _NORMAL_DF))
    parts = [(v, s) for v, s in seed_parts if s >= 2]
    if not parts:
        return prompt_level, None
    total = prompt_variance + sum(v for v, _ in parts)
    df = satterthwaite(
        [(prompt_variance, float(prompt_df))]
        + [(v * (s - 1) / _chi2_median(float(s - 1)), float(s - 1)) for v, s in parts]
    )
    return prompt_level, interval(total, df)
