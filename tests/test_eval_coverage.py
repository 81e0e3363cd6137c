"""Coverage of the evaluator's 95% intervals over simulated studies with known truth.

The simulation is tests/eval_simulation.py's. The truth of a curve is the population's pass@k,
1 - (1 - p)^k averaged over z (and u at the recipe level). Each curve setting runs 400 studies
through the evaluator's own code (`analysis.curve`) and must cover within 0.92-0.98 for pass@1,
4 and 16; the paired solved-by counts (`paired.compare`) run 300 within 0.91-0.985.
"""

from __future__ import annotations

import numpy as np
import pytest

from proctor_client.evaluation.analysis import Options, curve
from proctor_client.evaluation.bootstrap import Design
from proctor_client.evaluation.paired import CATEGORIES, compare
from tests.eval_simulation import (
    KS,
    MU,
    NODES,
    QUAD_WEIGHTS,
    RESAMPLES,
    SAMPLES,
    SD,
    SEED_SD,
    estimates,
    paired_coverage,
    runs,
    solve,
)

STUDIES = 400
OPTIONS = Options(ks=KS, resamples=RESAMPLES)


def _truth(seed_sd: float) -> np.ndarray:
    """pass@k of the population: z + u is N(MU, SD^2 + seed_sd^2)."""
    logits = MU + np.sqrt(SD**2 + seed_sd**2) * NODES
    return np.array([QUAD_WEIGHTS @ solve(logits, k) for k in KS])


def _draw(
    rng: np.random.Generator, prompts: int, seeds: int, seed_sd: float
) -> tuple[np.ndarray, np.ndarray]:
    z = rng.normal(MU, SD, prompts)
    return z, runs(rng, z, seeds, seed_sd)


def _coverage(prompts: int, seeds: int, seed_sd: float, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    truth = _truth(seed_sd)
    design = Design.pooled(prompts)
    n = np.full(prompts, SAMPLES)
    hits = {"prompt": np.zeros(len(KS)), "recipe": np.zeros(len(KS))}
    for _ in range(STUDIES):
        _, c = _draw(rng, prompts, seeds, seed_sd)
        found = curve(estimates(c), design, n, KS, OPTIONS, rng)
        hits["prompt"] += [
            i.low <= t <= i.high for i, t in zip(found.intervals, truth, strict=True)
        ]
        if found.recipe is not None:
            hits["recipe"] += [
                i.low <= t <= i.high for i, t in zip(found.recipe, truth, strict=True)
            ]
    return {level: h / STUDIES for level, h in hits.items()}


@pytest.mark.parametrize("prompts", [100, 30])
def test_one_seed_prompt_level_intervals_cover(prompts: int) -> None:
    coverage = _coverage(prompts, 1, 0.0, seed=prompts)
    assert np.all((coverage["prompt"] >= 0.92) & (coverage["prompt"] <= 0.98)), coverage


def test_three_seeds_with_a_seed_effect_recipe_level_intervals_cover() -> None:
    coverage = _coverage(100, 3, SEED_SD, seed=3)
    assert np.all((coverage["recipe"] >= 0.92) & (coverage["recipe"] <= 0.98)), coverage
    # the prompt-level interval is not about new seeds: it misses the recipe's value far more often
    assert np.all(coverage["prompt"] < 0.85), coverage


def test_solved_only_by_intervals_cover_for_a_three_seed_model_against_a_one_seed_base() -> None:
    # 300 studies at a fixed seed (benchmarks/eval_coverage.py runs 2,000: each cell within
    # 0.93-0.97 there). Before the seed part lost the interaction it double-counted and the
    # counts their half-prompt correction, only_b at k = 16 (about 3 prompts of 100) sat at
    # 0.98-0.99 and k = 1 near 0.925.
    coverage = paired_coverage(300, seed=31)
    for c in CATEGORIES:
        assert np.all((coverage[c] >= 0.91) & (coverage[c] <= 0.985)), coverage


def test_lists_agree_with_the_counts_at_the_common_budget() -> None:
    rng = np.random.default_rng(5)
    prompts = 60
    z = rng.normal(MU, SD, prompts)
    rl, base = runs(rng, z + 0.8, 3, SEED_SD), runs(rng, z, 1, 0.0)
    pair = compare(
        ("rl", "base"),
        [str(i) for i in range(prompts)],
        (estimates(rl), estimates(base)),
        ((np.full_like(rl, SAMPLES), rl), (np.full_like(base, SAMPLES), base)),
        KS,
        Design.pooled(prompts),
        (200, 0.95, 0.05),
        rng,
    )
    # the budget is 16 samples per draw for both models, although the RL model has 48 in all
    assert pair.budget == SAMPLES
    top = pair.solved_ks.index(SAMPLES)
    assert sum(q.probability for q in pair.only_a) == pytest.approx(
        pair.solved["only_a"][top].estimate
    )
    assert sum(q.probability for q in pair.only_b) == pytest.approx(
        pair.solved["only_b"][top].estimate
    )
    for q in pair.only_a:  # at k = n, a prompt is listed when some RL seed solved it, base did not
        i = int(q.prompt_id)
        assert base[0, i] == 0 and np.any(rl[:, i] > 0)
        assert q.probability == pytest.approx(np.mean(rl[:, i] > 0))
