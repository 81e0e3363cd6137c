"""The pass@k estimator and the closed forms of the review (sections 3, 7-9), against exact
enumeration, exact rational arithmetic and the review's worked examples."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

from proctor_client.evaluation.estimators import (
    chance_pass_at_k,
    mean_variance_bound,
    mixed_group_probability,
    pass_at_k,
    population_pass_at_k,
    wilson_interval,
    zero_success_upper_bound,
)


def _enumerated(n: int, c: int, k: int) -> Fraction:
    """The fraction of all k-subsets of n samples (c of them successes) holding a success."""
    samples = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    hits = sum(any(samples[i] for i in subset) for subset in subsets)
    return Fraction(hits, len(subsets))


def test_equals_enumeration_of_every_k_subset_up_to_n_12() -> None:
    cases = [(n, c, k) for n in range(1, 13) for c in range(n + 1) for k in range(1, n + 1)]
    n, c, k = (np.asarray(column) for column in zip(*cases, strict=True))
    estimates = pass_at_k(n, c, k)  # all cases in one vectorised call
    for (ni, ci, ki), estimate in zip(cases, estimates, strict=True):
        assert estimate == pytest.approx(float(_enumerated(ni, ci, ki)), abs=1e-12), (ni, ci, ki)


def test_is_exactly_one_when_fewer_failures_than_k() -> None:
    n = np.array([10, 10, 16, 1024])
    c = np.array([7, 10, 13, 600])
    k = np.array([4, 1, 4, 512])
    assert np.all(pass_at_k(n, c, k) == 1.0)
    assert pass_at_k(10, 0, 10) == 0.0  # k = n: one iff any sample succeeded
    assert pass_at_k(10, 1, 10) == 1.0


@pytest.mark.parametrize("c", [1, 2, 3, 10, 100, 300, 512])
def test_large_n_matches_exact_rational_arithmetic(c: int) -> None:
    n, k = 1024, 512
    exact = 1 - Fraction(math.comb(n - c, k), math.comb(n, k))
    estimate = pass_at_k(n, c, k)
    assert np.isfinite(estimate)
    assert float(estimate) == pytest.approx(float(exact), rel=1e-12)
    failure = 1 - float(estimate)  # the all-fail probability keeps its precision too
    if failure > 0:
        assert failure == pytest.approx(float(1 - exact), rel=1e-9)


def test_small_estimates_keep_their_relative_precision() -> None:
    exact = 1 - Fraction(math.comb(1023, 1), math.comb(1024, 1))  # 1/1024
    assert float(pass_at_k(1024, 1, 1)) == pytest.approx(float(exact), rel=1e-14)


def test_unequal_n_across_prompts_in_one_call() -> None:
    n = np.array([4, 8, 16, 200])
    c = np.array([1, 0, 3, 17])
    estimates = pass_at_k(n, c, 2)
    expected = [float(_enumerated(4, 1, 2)), 0.0, float(_enumerated(16, 3, 2))]
    assert estimates[:3] == pytest.approx(expected, abs=1e-12)
    assert estimates[3] == pytest.approx(float(1 - Fraction(183 * 182, 200 * 199)), rel=1e-12)


@pytest.mark.parametrize(
    ("n", "c", "k", "message"),
    [(4, 5, 1, "0 <= c <= n"), (4, -1, 1, "0 <= c <= n"), (4, 1, 5, "1 <= k <= n"),
     (4, 1, 0, "1 <= k <= n")],
)  # fmt: skip
def test_refuses_impossible_arguments(n: int, c: int, k: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        pass_at_k(n, c, k)


def test_review_equal_means_give_different_coverage() -> None:
    # Section 7.2: every prompt at p = 0.4 vs half at 0.8 and half at 0, both mean 0.4.
    homogeneous = population_pass_at_k(np.full(2, 0.4), 2).mean()
    heterogeneous = population_pass_at_k(np.array([0.8, 0.0]), 2).mean()
    assert homogeneous == pytest.approx(0.64)
    assert heterogeneous == pytest.approx(0.48)
    # Section 9: the mean-variance bound is exact at k = 2 (mu 0.4, sigma^2 0.16).
    assert mean_variance_bound(0.4, 0.16, 2) == pytest.approx(0.48)
    assert mean_variance_bound(0.4, 0.0, 2) == pytest.approx(0.64)
    with pytest.raises(ValueError, match="k >= 2"):
        mean_variance_bound(0.4, 0.16, 1)


def test_review_zero_success_bound() -> None:
    # Eq. 12: zero successes in 256 samples, alpha = 0.05.
    assert zero_success_upper_bound(256, 0.05) == pytest.approx(0.01163, abs=5e-6)
    assert zero_success_upper_bound(256, 0.05) == pytest.approx(-math.log(0.05) / 256, rel=0.01)
    # A true rate of 0.1% shows no success in 256 samples about 77.4% of the time.
    assert 1 - population_pass_at_k(0.001, 256) == pytest.approx(0.774, abs=5e-4)
    bounds = zero_success_upper_bound(np.array([1, 16, 256]), 0.05)
    assert bounds[0] == pytest.approx(0.95) and np.all(np.diff(bounds) < 0)
    with pytest.raises(ValueError, match="alpha"):
        zero_success_upper_bound(16, 1.5)


def test_review_mixed_group_probability() -> None:
    # Eq. 4 at p = 0.01: about 0.149 with G = 16, 0.275 with G = 32.
    mixed = mixed_group_probability(0.01, np.array([16, 32]))
    assert mixed == pytest.approx([0.149, 0.275], abs=5e-4)
    assert 1 / mixed == pytest.approx([6.73, 3.64], abs=0.01)


def test_chance_curve_of_multiple_choice() -> None:
    curve = chance_pass_at_k(4, np.array([1, 2, 8]))
    assert curve == pytest.approx([0.25, 1 - 0.75**2, 1 - 0.75**8])
    assert chance_pass_at_k(np.array([0, 2]), 1) == pytest.approx([0.0, 0.5])


def test_wilson_interval_of_the_review_fraction() -> None:
    z2 = 1.959963984540054**2
    assert wilson_interval(0, 10) == pytest.approx((0.0, z2 / (10 + z2)))  # closed form at 0/n
    assert wilson_interval(10, 10) == pytest.approx((10 / (10 + z2), 1.0))
    low, high = wilson_interval(3, 5)
    assert low == pytest.approx(0.2307, abs=1e-4) and high == pytest.approx(0.8824, abs=1e-4)
    with pytest.raises(ValueError, match="trials"):
        wilson_interval(3, 2)
