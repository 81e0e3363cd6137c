"""Bootstrap intervals for weighted averages of per-prompt estimates.

A study's prompts are the unit of resampling: all samples of a prompt stay together, because the
per-prompt estimate is computed once from them (many attempts at one question are not many
questions). A `Design` says how prompts are grouped and weighted:

- one stratum, equal weights: the plain prompt-level bootstrap;
- declared task weights: prompts are resampled within their task family, and the family means are
  combined with the fixed weights (a stratified bootstrap; the weights are part of the design);
- two-level: task families are resampled first, then prompts within each drawn family, for
  studies whose families are themselves a sample (related generated puzzles).

Every resample is a row of a weight matrix W (resamples x prompts), so an estimate for all
resamples is one matrix product `W @ E` over the prompts: nothing loops over resamples. Training
seeds, when a study has several, are resampled as a crossed factor: each resample draws seeds with
replacement and applies the same prompt draw to every seed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

__all__ = ["Design", "Interval", "percentile_interval", "seeded_estimates"]

Floats = NDArray[np.float64]
Ints = NDArray[np.int64]


@dataclass(frozen=True)
class Design:
    """How the prompts of a study are grouped and weighted for averaging and resampling."""

    strata: Ints
    """Per prompt, the index (0 .. F-1) of its stratum: its task family, or 0 for everyone."""
    weights: Floats
    """Per stratum, its weight in the average (relative; they need not sum to 1)."""
    two_level: bool = False
    """Resample the strata themselves before the prompts within them."""

    def __post_init__(self) -> None:
        sizes = np.bincount(self.strata, minlength=len(self.weights))
        if len(sizes) != len(self.weights) or np.any(sizes == 0):
            raise ValueError("every stratum of a design needs at least one prompt")
        if np.any(self.weights <= 0) or not np.all(np.isfinite(self.weights)):
            raise ValueError("stratum weights must be positive and finite")

    @classmethod
    def pooled(cls, prompts: int) -> Design:
        """Every prompt counts the same; prompts are resampled as one population."""
        return cls(np.zeros(prompts, dtype=np.int64), np.ones(1))

    @property
    def sizes(self) -> Ints:
        return np.bincount(self.strata, minlength=len(self.weights)).astype(np.int64)

    @property
    def degrees_of_freedom(self) -> float:
        """Of the estimate's variance: families - 1 when families are drawn, else prompts -
        strata (at least 1)."""
        if self.two_level and len(self.weights) > 1:
            return float(len(self.weights) - 1)
        return float(max(len(self.strata) - len(self.weights), 1))

    @property
    def variance_correction(self) -> float:
        """The factor turning the bootstrap's plug-in variance into the unbiased one (n / (n-1)
        for n draws of one population; prompts / (prompts - strata) within strata)."""
        units = len(self.weights) if self.two_level and len(self.weights) > 1 else len(self.strata)
        spent = 1 if self.two_level and len(self.weights) > 1 else len(self.weights)
        return float(units / (units - spent)) if units > spent else 1.0

    def point_weights(self) -> Floats:
        """Per prompt, its weight in the study's average: its stratum's weight shared equally."""
        return (self.weights / self.sizes)[self.strata]

    def resample(self, resamples: int, rng: np.random.Generator) -> Floats:
        """W, one row per resample: per prompt, its weight in that resample's average (each row
        sums to the total weight of the strata it drew; divide by the row sum to average)."""
        strata_count = len(self.weights)
        sizes = self.sizes
        if self.two_level and strata_count > 1:
            drawn = rng.multinomial(
                strata_count, np.full(strata_count, 1.0 / strata_count), size=resamples
            )
        else:
            drawn = np.ones((resamples, strata_count), dtype=np.int64)
        weights = np.zeros((resamples, len(self.strata)))
        for stratum in range(strata_count):
            members = np.flatnonzero(self.strata == stratum)
            draws = drawn[:, stratum] * sizes[stratum]
            counts = _uniform_counts(draws, len(members), rng)
            scale = drawn[:, stratum] * self.weights[stratum] / np.maximum(draws, 1)
            weights[:, members] = counts * scale[:, None]
        return weights


def _uniform_counts(draws: Ints, size: int, rng: np.random.Generator) -> Ints:
    """Per row b, how often each of `size` members was hit by `draws[b]` uniform draws (a
    multinomial row, built from one vector of integers and one bincount: several times faster
    than numpy's multinomial over many rows)."""
    rows = np.repeat(np.arange(len(draws)), draws)
    hits = rows * size + rng.integers(0, size, size=len(rows))
    counts: Ints = np.bincount(hits, minlength=len(draws) * size).reshape(len(draws), size)
    return counts


@dataclass(frozen=True)
class Interval:
    estimate: float
    low: float
    high: float


def seeded_estimates(estimates: Floats, prompt_weights: Floats, seed_weights: Floats) -> Floats:
    """The weighted average of per-prompt estimates, for every resample at once.

    `estimates` is (seeds, prompts, K); `prompt_weights` (B, prompts) from `Design.resample` (or
    one row of `point_weights`); `seed_weights` (B, seeds). Returns (B, K): per resample, the
    seed-weighted mean over seeds of each seed's prompt-weighted mean.
    """
    seeds, prompts, ks = estimates.shape
    flat = estimates.transpose(1, 0, 2).reshape(prompts, seeds * ks)  # one 2-D BLAS product
    per_seed = (prompt_weights @ flat).reshape(len(prompt_weights), seeds, ks).transpose(1, 0, 2)
    per_seed /= prompt_weights.sum(axis=1)[None, :, None]
    combined: Floats = np.einsum("bs,sbk->bk", seed_weights, per_seed)
    combined /= seed_weights.sum(axis=1)[:, None]
    return combined


def percentile_interval(point: Floats, resampled: Floats, confidence: float) -> list[Interval]:
    """Percentile intervals per column of `resampled` (B, K) around the point estimates (K,)."""
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must lie in (0, 1)")
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(resampled, [tail, 1.0 - tail], axis=0)
    return [
        Interval(float(p), float(lo), float(hi)) for p, lo, hi in zip(point, low, high, strict=True)
    ]
