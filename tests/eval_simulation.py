"""The simulated studies with known truth behind the coverage checks of the evaluator's intervals
(tests/test_eval_coverage.py, and benchmarks/eval_coverage.py at 2,000 studies).

Per-prompt success rates are drawn as p = sigmoid(z), z ~ N(-1, 2^2); a training seed (run) of a
model shifts every logit of that run by u ~ N(0, 0.7^2). The truth is the population's value,
averaged over z (and u at the recipe level) by Gauss-Hermite quadrature.
"""

from __future__ import annotations

import numpy as np
from numpy.polynomial.hermite_e import hermegauss

from proctor_client.evaluation.bootstrap import Design
from proctor_client.evaluation.estimators import pass_at_k
from proctor_client.evaluation.paired import CATEGORIES, compare

KS = [1, 4, 16]
SAMPLES = 16
MU, SD, SEED_SD = -1.0, 2.0, 0.7
RESAMPLES = 500
NODES, QUAD_WEIGHTS = hermegauss(96)
QUAD_WEIGHTS = QUAD_WEIGHTS / QUAD_WEIGHTS.sum()


def solve(logit: np.ndarray, k: int) -> np.ndarray:
    """pass@k of a prompt with this logit."""
    p = 0.5 * (1.0 + np.tanh(logit / 2.0))  # the logistic function, without overflow
    result: np.ndarray = 1.0 - (1.0 - p) ** k
    return result


def runs(rng: np.random.Generator, logits: np.ndarray, seeds: int, seed_sd: float) -> np.ndarray:
    """(seeds, prompts) successes out of SAMPLES, each seed with its own logit shift."""
    u = rng.normal(0.0, seed_sd, seeds) if seed_sd else np.zeros(seeds)
    p = 0.5 * (1.0 + np.tanh((logits[None, :] + u[:, None]) / 2.0))
    drawn: np.ndarray = rng.binomial(SAMPLES, p)
    return drawn


def estimates(c: np.ndarray) -> np.ndarray:
    """pass@k per seed, prompt and k of KS."""
    found: np.ndarray = pass_at_k(SAMPLES, c[..., None], np.asarray(KS)[None, None, :])
    return found


def paired_truth(shift: float) -> dict[str, np.ndarray]:
    """Expected fraction of prompts per category at each k: the RL model's logit is the base's
    plus `shift` plus its seed's effect."""
    z = MU + SD * NODES
    u = SEED_SD * NODES
    truth: dict[str, list[float]] = {c: [] for c in CATEGORIES}
    for k in KS:
        base = solve(z, k)
        rl = solve(z[:, None] + shift + u[None, :], k) @ QUAD_WEIGHTS  # over seeds, per z
        for name, value in (
            ("only_a", rl * (1 - base)),
            ("only_b", (1 - rl) * base),
            ("both", rl * base),
            ("neither", (1 - rl) * (1 - base)),
        ):
            truth[name].append(float(QUAD_WEIGHTS @ value))
    return {c: np.asarray(v) for c, v in truth.items()}


def paired_coverage(
    studies: int, seed: int, prompts: int = 100, shift: float = 0.8
) -> dict[str, np.ndarray]:
    """Per category, per k of KS: how often the recipe-level 95% interval of the solved-by count
    of a three-seed RL model (a) against a one-seed base (b) holds the true count."""
    rng = np.random.default_rng(seed)
    truth = paired_truth(shift)
    design = Design.pooled(prompts)
    names = [str(i) for i in range(prompts)]
    hits = {c: np.zeros(len(KS)) for c in CATEGORIES}
    for _ in range(studies):
        z = rng.normal(MU, SD, prompts)
        rl = runs(rng, z + shift, 3, SEED_SD)
        base = runs(rng, z, 1, 0.0)
        pair = compare(
            ("rl", "base"),
            names,
            (estimates(rl), estimates(base)),
            ((np.full_like(rl, SAMPLES), rl), (np.full_like(base, SAMPLES), base)),
            KS,
            design,
            (RESAMPLES, 0.95, 0.05),
            rng,
        )
        assert pair.solved_ks == KS and pair.solved_recipe is not None
        for c in CATEGORIES:
            for i, t in enumerate(truth[c] * prompts):
                hits[c][i] += pair.solved_recipe[c][i].low <= t <= pair.solved_recipe[c][i].high
    return {c: h / studies for c, h in hits.items()}
