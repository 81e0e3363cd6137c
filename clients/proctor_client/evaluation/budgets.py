"""What a study cost, and pass@k at equal generated-token budgets.

The protocol asks to compare training branches at equal generated-token budgets and to report
GPU-hours for RL and sampling. From the rows:

- **tokens per sample**: the mean `response_tokens` of a model's judged rows that record it (the
  samplers record it; a row without it is left out of the mean, and the count of rows that have
  it is reported). pass@k then costs `k x tokens per sample` tokens per prompt: the report gives
  every k of the curve with its tokens.
- **equal budgets**: for a pair, the budget is the smaller of the two models' spend per prompt at
  their common sample budget n (`min(n t_a, n t_b)`); each model gets the largest k it can afford
  within it (`floor(budget / t)`, at least 1) and the difference of the two pass@k comes with
  the paired comparison's intervals (the same prompt draw for both; both levels). A model whose
  responses are twice as long is compared at half the samples.
- **sampling GPU-hours**: `proctor-eval sample` stamps each row with its run (one per process),
  the device type and count and the wall time from the run's start; a run's device-hours are its
  devices x its last row's wall time, summed over a model's runs. Unknown (null) when a run does
  not record its device count (an endpoint whose hardware was not declared).
- **training GPU-hours**: the rows' `training_gpu_hours` (proctor-train's `gpu_hours_total`,
  recorded by `sample --training-gpu-hours`), beside the sampling figure.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from proctor_client.evaluation.bootstrap import Design, Interval
from proctor_client.evaluation.estimators import pass_at_k
from proctor_client.evaluation.paired import difference

__all__ = ["Cost", "EqualTokens", "RunTime", "equal_tokens", "model_cost"]

Floats = NDArray[np.float64]
Ints = NDArray[np.int64]


@dataclass
class RunTime:
    """One sampling run as its rows record it."""

    device: str | None
    devices: int | None
    elapsed_s: float
    """The largest wall time any of its rows records."""


@dataclass
class Cost:
    tokens_per_sample: float | None
    rows_with_tokens: int
    tokens_at_k: list[float] | None
    """Per k of the model's curve, k x tokens per sample."""
    sampling_runs: int
    sampling_devices: list[str]
    sampling_gpu_hours: float | None
    training_gpu_hours: float | None
    """The rows' training_gpu_hours (the largest, if they differ: the run's total at its end)."""


@dataclass
class EqualTokens:
    tokens: float
    """The budget: generated tokens per prompt."""
    k_a: int
    k_b: int
    a: float
    b: float
    difference: Interval
    difference_recipe: Interval | None


def model_cost(
    tokens: Floats, runs: Mapping[str, RunTime], training: Sequence[float], ks: Sequence[int]
) -> Cost:
    """`tokens`: response_tokens of the model's judged rows (NaN where not recorded)."""
    known = tokens[~np.isnan(tokens)]
    per_sample = float(known.mean()) if len(known) else None
    hours: float | None = None
    if runs and all(r.devices is not None for r in runs.values()):
        hours = sum((r.devices or 0) * r.elapsed_s for r in runs.values()) / 3600.0
    return Cost(
        tokens_per_sample=per_sample,
        rows_with_tokens=len(known),
        tokens_at_k=None if per_sample is None else [k * per_sample for k in ks],
        sampling_runs=len(runs),
        sampling_devices=sorted({r.device or "unknown" for r in runs.values()}),
        sampling_gpu_hours=hours,
        training_gpu_hours=max(training) if training else None,
    )


def equal_tokens(
    counts: tuple[tuple[Ints, Ints], tuple[Ints, Ints]],
    per_sample: tuple[float, float],
    design: Design,
    options: tuple[int, float],
    rng: np.random.Generator,
) -> EqualTokens | None:
    """`counts`: each model's (n, c), (seeds, common prompts); `per_sample`: each model's tokens
    per sample; `options`: (resamples, confidence). None when a model spends no tokens."""
    (na, ca), (nb, cb) = counts
    ta, tb = per_sample
    if not (ta > 0 and tb > 0):
        return None
    n = int(min(na.min(), nb.min()))
    budget = min(n * ta, n * tb)
    ka = max(1, min(n, math.floor(budget / ta + 1e-9)))
    kb = max(1, min(n, math.floor(budget / tb + 1e-9)))
    ea = pass_at_k(na, ca, ka)[..., None]
    eb = pass_at_k(nb, cb, kb)[..., None]
    prompt, recipe = difference(ea, eb, design, options[0], options[1], rng)
    weights = design.point_weights()
    return EqualTokens(
        tokens=float(budget),
        k_a=ka,
        k_b=kb,
        a=float((ea[..., 0] @ weights).mean() / weights.sum()),
        b=float((eb[..., 0] @ weights).mean() / weights.sum()),
        difference=prompt[0],
        difference_recipe=None if recipe is None else recipe[0],
    )
