"""Prompt-level, stratified and two-level bootstrap: the weight matrices, and coverage of the
true pass@k over simulated studies whose per-prompt success rates are known (the settings of
issue 22, seeds included, are in test_eval_coverage.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from proctor_client.evaluation.analysis import Options, curve
from proctor_client.evaluation.bootstrap import Design
from proctor_client.evaluation.estimators import pass_at_k

KS = np.array([1, 4, 16])


def _beta_pass_at_k(a: float, b: float, k: int) -> float:
    """pass@k of a population whose per-prompt p follows Beta(a, b): 1 - B(a, b+k) / B(a, b)."""
    log_ratio = math.lgamma(b + k) + math.lgamma(a + b) - math.lgamma(b) - math.lgamma(a + b + k)
    return 1.0 - math.exp(log_ratio)


def _interval_covers(
    design: Design, n: np.ndarray, c: np.ndarray, truth: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    estimates = pass_at_k(n[:, None], c[:, None], KS[None, :])[None]  # one seed
    found = curve(estimates, design, n, list(KS), Options(resamples=400), rng)
    return np.array([i.low <= t <= i.high for i, t in zip(found.intervals, truth, strict=True)])


def test_prompt_bootstrap_covers_the_true_pass_at_k_at_the_nominal_rate() -> None:
    rng = np.random.default_rng(20250601)
    a, b, prompts, samples = 0.3, 1.2, 200, 16
    truth = np.array([_beta_pass_at_k(a, b, int(k)) for k in KS])
    design = Design.pooled(prompts)
    covered = np.zeros(len(KS))
    studies = 200
    for _ in range(studies):
        p = rng.beta(a, b, size=prompts)
        c = rng.binomial(samples, p)
        covered += _interval_covers(design, np.full(prompts, samples), c, truth, rng)
    coverage = covered / studies
    assert np.all(np.abs(coverage - 0.95) <= 0.03), coverage


def test_two_level_bootstrap_covers_when_families_share_difficulty() -> None:
    # 40 task families of 5 prompts; a family's difficulty is shared by its prompts, so prompts
    # are not independent. Truth: E[p] = 0.5 (pass@1) over the family and prompt populations.
    rng = np.random.default_rng(7)
    families, size, samples, studies = 40, 5, 16, 200
    strata = np.repeat(np.arange(families), size)
    two_level = Design(strata, np.full(families, float(size)), two_level=True)
    one_level = Design.pooled(families * size)
    covered_two = covered_one = 0
    for _ in range(studies):
        family_mean = rng.beta(1.0, 1.0, size=families)
        p = rng.beta(8 * family_mean[strata] + 0.1, 8 * (1 - family_mean[strata]) + 0.1)
        c = rng.binomial(samples, p)
        n = np.full(len(p), samples)
        truth = np.array([0.5, np.nan, np.nan])
        covered_two += _interval_covers(two_level, n, c, truth, rng)[0]
        covered_one += _interval_covers(one_level, n, c, truth, rng)[0]
    # the two-level bootstrap counts within-family spread twice: it errs on the wide side
    assert 0.92 <= covered_two / studies <= 0.985, covered_two / studies
    # Resampling prompts alone treats clustered prompts as independent and under-covers.
    assert covered_one / studies < 0.88, covered_one / studies


def test_resampled_weights_keep_each_design() -> None:
    rng = np.random.default_rng(0)
    strata = np.array([0, 0, 0, 1, 1, 2])
    stratified = Design(strata, np.array([1.0, 2.0, 3.0]))
    w = stratified.resample(500, rng)
    for stratum, weight in enumerate([1.0, 2.0, 3.0]):  # every family keeps its declared weight
        assert w[:, strata == stratum].sum(axis=1) == pytest.approx(np.full(500, weight))
    assert stratified.point_weights() == pytest.approx([1 / 3, 1 / 3, 1 / 3, 1.0, 1.0, 3.0])
    two = Design(strata, np.array([3.0, 2.0, 1.0]), two_level=True).resample(500, rng)
    drawn = np.stack([two[:, strata == s].sum(axis=1) / [3.0, 2.0, 1.0][s] for s in range(3)])
    assert np.allclose(drawn, np.round(drawn)) and np.all(drawn.sum(axis=0) == pytest.approx(3))
    assert drawn.std() > 0  # families are drawn with replacement
    pooled = Design.pooled(6).resample(500, rng)
    assert pooled.sum(axis=1) == pytest.approx(np.full(500, 1.0))
    assert np.allclose(pooled * 6, np.round(pooled * 6))  # whole prompt draws


def test_designs_refuse_empty_strata_and_bad_weights() -> None:
    with pytest.raises(ValueError, match="at least one prompt"):
        Design(np.array([0, 0, 2]), np.ones(3))
    with pytest.raises(ValueError, match="positive"):
        Design(np.array([0, 1]), np.array([1.0, 0.0]))
