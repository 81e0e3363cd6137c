"""Coverage of the evaluator's 95% intervals over simulated studies with known truth.

Per-prompt success rates are drawn as p = sigmoid(z), z ~ N(-1, 2^2); a training seed (run) of a
model shifts every logit of that run by u ~ N(0, 0.7^2). The truth is the population's pass@k,
1 - (1 - p)^k averaged over z (and u at the recipe level), by Gauss-Hermite quadrature. Each
setting runs 400 studies through the evaluator's own code (`analysis.curve`, `paired.compare`);
the coverage must lie within 0.92-0.98 for pass@1, 4 and 16.
"""

from __future__ import annotations

import numpy as np
import pytest
from numpy.polynomial.hermite_e import hermegauss

from proctor_client.evaluation.analysis import Options, curve
from proctor_client.evaluation.bootstrap import Design
from proctor_client.evaluation.estimators import pass_at_k
from proctor_client.evaluation.paired import CATEGORIES, compare

KS = [1, 4, 16]
SAMPLES = 16
MU, SD, SEED_SD = -1.0, 2.0, 0.7
STUDIES = 400
OPTIONS = Options(ks=KS, resamples=500)
NODES, QUAD_WEIGHTS = hermegauss(96)
QUAD_WEIGHTS = QUAD_WEIGHTS / QUAD_WEIGHTS.sum()


def _solve(logit: np.ndarray, k: int) -> np.ndarray:
    p = 0.5 * (1.0 + np.tanh(logit / 2.0))  # the logistic function, without overflow
    result: np.ndarray = 1.0 - (1.0 - p) ** k
    return result


def _truth(seed_sd: float) -> np.ndarray:
    """pass@k of the population: z + u is N(MU, SD^2 + seed_sd^2)."""
    logits = MU + np.sqrt(SD**2 + seed_sd**2) * NODES
    return np.array([QUAD_WEIGHTS @ _solve(logits, k) for k in KS])


def _draw(
    rng: np.random.Generator, prompts: int, seeds: int, seed_sd: float, shift: float = 0.0
) -> tuple[np.ndarray, np.ndarray]:
    z = rng.normal(MU, SD, prompts)
    return z, _runs(rng, z + shift, seeds, seed_sd)


def _runs(rng: np.random.Generator, logits: np.ndarray, seeds: int, seed_sd: float) -> np.ndarray:
    u = rng.normal(0.0, seed_sd, seeds) if seed_sd else np.zeros(seeds)
    p = 0.5 * (1.0 + np.tanh((logits[None, :] + u[:, None]) / 2.0))
    return rng.binomial(SAMPLES, p)  # (seeds, prompts) successes out of SAMPLES


def _estimates(c: np.ndarray) -> np.ndarray:
    return pass_at_k(SAMPLES, c[..., None], np.asarray(KS)[None, None, :])


def _coverage(prompts: int, seeds: int, seed_sd: float, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    truth = _truth(seed_sd)
    design = Design.pooled(prompts)
    n = np.full(prompts, SAMPLES)
    hits = {"prompt": np.zeros(len(KS)), "recipe": np.zeros(len(KS))}
    for _ in range(STUDIES):
        _, c = _draw(rng, prompts, seeds, seed_sd)
        found = curve(_estimates(c), design, n, KS, OPTIONS, rng)
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


def _paired_truth(shift: float) -> dict[str, np.ndarray]:
    """Expected fraction of prompts per category at each k: the RL model's logit is the base's
    plus `shift` plus its seed's effect."""
    z = MU + SD * NODES
    u = SEED_SD * NODES
    truth: dict[str, list[float]] = {c: [] for c in CATEGORIES}
    for k in KS:
        base = _solve(z, k)
        rl = _solve(z[:, None] + shift + u[None, :], k) @ QUAD_WEIGHTS  # over seeds, per z
        for name, value in (
            ("only_a", rl * (1 - base)),
            ("only_b", (1 - rl) * base),
            ("both", rl * base),
            ("neither", (1 - rl) * (1 - base)),
        ):
            truth[name].append(float(QUAD_WEIGHTS @ value))
    return {c: np.asarray(v) for c, v in truth.items()}


def test_solved_only_by_intervals_cover_for_a_three_seed_model_against_a_one_seed_base() -> None:
    rng = np.random.default_rng(31)
    prompts, shift = 100, 0.8
    truth = _paired_truth(shift)
    design = Design.pooled(prompts)
    names = [str(i) for i in range(prompts)]
    hits = {c: np.zeros(len(KS)) for c in CATEGORIES}
    for _ in range(STUDIES):
        z = rng.normal(MU, SD, prompts)
        rl = _runs(rng, z + shift, 3, SEED_SD)
        base = _runs(rng, z, 1, 0.0)
        n_rl, n_base = np.full_like(rl, SAMPLES), np.full_like(base, SAMPLES)
        pair = compare(
            ("rl", "base"),
            names,
            (_estimates(rl), _estimates(base)),
            ((n_rl, rl), (n_base, base)),
            KS,
            design,
            (OPTIONS.resamples, 0.95, 0.05),
            rng,
        )
        assert pair.solved_ks == KS and pair.solved_recipe is not None
        for c in CATEGORIES:
            for i, t in enumerate(truth[c] * prompts):
                hits[c][i] += pair.solved_recipe[c][i].low <= t <= pair.solved_recipe[c][i].high
    coverage = {c: h / STUDIES for c, h in hits.items()}
    # Three seeds carry little information about a skewed seed effect: coverage sits at about
    # 0.93-0.97 here (0.935-0.969 for only_a over 800 studies); only_b at k = 16 counts about
    # 3 prompts of 100 and is conservative (0.9875 over 800), the Wilson form's floor near 0.
    for c in CATEGORIES:
        upper = 0.99 if c == "only_b" else 0.98
        assert np.all((coverage[c] >= 0.92) & (coverage[c] <= upper)), coverage


def test_lists_agree_with_the_counts_at_the_common_budget() -> None:
    rng = np.random.default_rng(5)
    prompts = 60
    z = rng.normal(MU, SD, prompts)
    rl, base = _runs(rng, z + 0.8, 3, SEED_SD), _runs(rng, z, 1, 0.0)
    pair = compare(
        ("rl", "base"),
        [str(i) for i in range(prompts)],
        (_estimates(rl), _estimates(base)),
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
