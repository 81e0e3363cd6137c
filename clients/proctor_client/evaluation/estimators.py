"""Closed-form quantities of a pass@k study, vectorised over prompts.

The unbiased estimator of pass@k from n samples with c successes (review eq. 11), the one-sided
upper bound on a success rate after zero successes (eq. 12), the chance-level coverage of guessing
among m options, and the population formulas the review's worked examples use (eqs. 4, 10, 14).
"""

from __future__ import annotations

from statistics import NormalDist

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "chance_pass_at_k",
    "mean_variance_bound",
    "mixed_group_probability",
    "pass_at_k",
    "population_pass_at_k",
    "wilson_interval",
    "zero_success_upper_bound",
]

Floats = NDArray[np.float64]


def pass_at_k(n: ArrayLike, c: ArrayLike, k: ArrayLike) -> Floats:
    """`1 - C(n-c, k) / C(n, k)` elementwise (arguments broadcast), for integers 0 <= c <= n and
    1 <= k <= n; exactly 1 where n - c < k.

    The ratio of binomials is the product over i in (n-c, n] of (1 - k/i) (every factor lies in
    (0, 1) when n - c >= k); it is summed in log space from a cumulative table per distinct k, so
    no binomial is ever formed and n = 1024, k = 512 costs the same as n = 16. `expm1` keeps the
    relative precision of estimates near 0.
    """
    n_, c_, k_ = np.broadcast_arrays(
        np.asarray(n, dtype=np.int64), np.asarray(c, dtype=np.int64), np.asarray(k, dtype=np.int64)
    )
    if np.any(c_ < 0) or np.any(c_ > n_):
        raise ValueError("pass_at_k needs 0 <= c <= n for every prompt")
    if np.any(k_ < 1) or np.any(k_ > n_):
        raise ValueError("pass_at_k needs 1 <= k <= n; cap k at n first (analysis does)")
    out = np.ones(n_.shape, dtype=np.float64)
    feasible = (n_ - c_) >= k_
    for kv in np.unique(k_[feasible]):
        sel = feasible & (k_ == kv)
        ns, cs = n_[sel], c_[sel]
        i = np.arange(kv + 1, int(ns.max()) + 1, dtype=np.float64)
        # table[m - kv] = sum_{i=kv+1}^{m} log(1 - kv/i)
        table = np.concatenate(([0.0], np.cumsum(np.log1p(-float(kv) / i))))
        log_ratio = table[ns - kv] - table[ns - cs - kv]
        out[sel] = -np.expm1(log_ratio)
    return out


def zero_success_upper_bound(n: ArrayLike, alpha: float = 0.05) -> Floats:
    """`1 - alpha^(1/n)`: the largest per-sample success rate still giving zero successes in n
    independent samples with probability at least `alpha` (one-sided, review eq. 12)."""
    if not 0.0 < alpha < 1.0:
        raise ValueError("alpha must lie in (0, 1)")
    n_ = np.asarray(n, dtype=np.float64)
    if np.any(n_ < 1):
        raise ValueError("the bound needs n >= 1 samples")
    bound: Floats = -np.expm1(np.log(alpha) / n_)
    return bound


def chance_pass_at_k(options: ArrayLike, k: ArrayLike) -> Floats:
    """`1 - (1 - 1/m)^k`: coverage of k uniform guesses among m options (0 where m is 0, the
    code for "no options": a free-form answer is not guessed this way)."""
    m = np.asarray(options, dtype=np.float64)
    k_ = np.asarray(k, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        value = -np.expm1(k_ * np.log1p(-1.0 / m))
    return np.where(m >= 1, value, 0.0)


def population_pass_at_k(p: ArrayLike, k: ArrayLike) -> Floats:
    """`1 - (1 - p)^k`: pass@k of a prompt whose samples succeed with probability p (eq. 10)."""
    p_ = np.asarray(p, dtype=np.float64)
    return -np.expm1(np.asarray(k, dtype=np.float64) * np.log1p(-p_))


def mixed_group_probability(p: ArrayLike, group_size: ArrayLike) -> Floats:
    """`1 - (1-p)^G - p^G`: the chance a GRPO group of G samples holds both a success and a
    failure, i.e. carries a learning signal (eq. 4)."""
    p_ = np.asarray(p, dtype=np.float64)
    g = np.asarray(group_size, dtype=np.float64)
    return 1.0 - (1.0 - p_) ** g - p_**g


def mean_variance_bound(mean: ArrayLike, variance: ArrayLike, k: ArrayLike) -> Floats:
    """`1 - ((1-mu)^2 + sigma^2)^(k/2)`: the upper bound on aggregate pass@k (k >= 2) from the mean
    and variance of per-prompt success rates (eq. 14); exact at k = 2."""
    k_ = np.asarray(k, dtype=np.float64)
    if np.any(k_ < 2):
        raise ValueError("the mean-variance bound holds for k >= 2 only")
    mu = np.asarray(mean, dtype=np.float64)
    return 1.0 - ((1.0 - mu) ** 2 + np.asarray(variance, dtype=np.float64)) ** (k_ / 2.0)


def wilson_interval(successes: int, trials: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson's score interval for a binomial proportion: sensible at 0/n and n/n and for small n,
    where the normal approximation is not (for the fraction of reviewed successes judged correct).
    """
    if trials < 1 or not 0 <= successes <= trials:
        raise ValueError("the Wilson interval needs 0 <= successes <= trials and trials >= 1")
    z = float(NormalDist().inv_cdf(0.5 + confidence / 2.0))
    p = successes / trials
    centre = (p + z * z / (2 * trials)) / (1 + z * z / trials)
    half = z / (1 + z * z / trials) * float(np.sqrt(p * (1 - p) / trials + z * z / (4 * trials**2)))
    return max(0.0, centre - half), min(1.0, centre + half)
