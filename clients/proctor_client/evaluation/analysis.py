"""From scored rows to a study's statistics: per model, per task family, and per pair of models.

Rows whose result is not `ok` were not judged (an unusable reference, a failure of ours): they are
counted per model and kept out of every statistic, never read as failures. Success is the scorer's
`success` (its full-success event), or `score >= threshold` when a threshold is declared.
Per prompt and seed the judged rows give n and c; the estimator then runs over every prompt at
once, with k capped at n where a prompt has fewer samples (the capped prompts are listed).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from proctor_client.evaluation.bootstrap import Design, Interval, seeded_estimates
from proctor_client.evaluation.budgets import Cost, EqualTokens, equal_tokens, model_cost
from proctor_client.evaluation.checks import decoding_warnings, seed_warning
from proctor_client.evaluation.estimators import (
    chance_pass_at_k,
    pass_at_k,
    zero_success_upper_bound,
)
from proctor_client.evaluation.intervals import recipe_variance, two_levels
from proctor_client.evaluation.paired import Paired, compare

__all__ = [
    "Curve",
    "ModelSummary",
    "Options",
    "Paired",
    "Study",
    "Table",
    "analyse",
    "build_table",
    "curve",
    "default_ks",
    "succeeded",
]

from proctor_client.evaluation.table import Floats, Ints, Table, build_table, succeeded


@dataclass(frozen=True)
class Options:
    ks: Sequence[int] | None = None
    """The k of the curves; None: 1, 2, 4, ... up to each model's largest n (and n itself)."""
    weights: Mapping[str, float] | None = None
    """Declared task-family weights; None: every prompt counts the same."""
    two_level: bool = False
    resamples: int = 2000
    confidence: float = 0.95
    alpha: float = 0.05
    """One-sided level of the zero-success upper bound."""
    threshold: float | None = None
    pairs: Sequence[tuple[str, str]] | None = None
    """Model pairs to compare; None: every pair, in order of first appearance."""
    rng_seed: int = 0


def default_ks(largest_n: int) -> list[int]:
    """1, 2, 4, ... up to `largest_n`, and `largest_n` itself."""
    ks = [1 << i for i in range(max(largest_n, 1).bit_length()) if 1 << i <= largest_n]
    if ks[-1] != largest_n:
        ks.append(largest_n)
    return ks


@dataclass
class Curve:
    ks: list[int]
    intervals: list[Interval]
    """Per k, the estimate with its prompt-level interval (these runs; prompts redrawn)."""
    recipe: list[Interval] | None
    """Per k, the recipe-level interval (new training runs too); None with one seed."""
    capped: list[int]
    """Per k, how many prompts have fewer than k samples (their estimate is pass@n)."""
    chance: list[float] | None = None
    """Per k, what guessing among the options of multiple-choice prompts would reach (other
    prompts count 0); None when no prompt is multiple choice."""


@dataclass
class ModelSummary:
    name: str
    prompts: list[str]
    """The prompts this model's statistics cover (judged in every one of its seeds)."""
    seeds: list[str]
    """The training seeds its rows name (empty when they name none)."""
    samples: int
    parse_rate: float
    correct_given_parsed: float | None
    strict_success: float
    mean_score: float
    mean_reward: float
    continuous: bool
    """Some score lies strictly between 0 and 1: mean score and success rate differ in kind."""
    curve: Curve
    families: dict[str, Curve]
    unsolved: list[tuple[str, int, float]]
    """(prompt, samples, upper bound on its success rate) for prompts never solved."""
    short: list[tuple[str, int]]
    """(prompt, smallest n over seeds) for prompts with fewer samples than the largest k."""
    dropped: list[str]
    """Prompts judged in some of the model's seeds only, left out of its statistics."""
    success_rates: Floats
    """Per prompt (in `prompts` order), c / n pooled over seeds."""
    counts: tuple[Ints, Ints] = field(repr=False)
    """(n, c) per seed and prompt, for paired comparisons."""
    estimates: Floats = field(repr=False)
    """Per seed, prompt and k, the estimated pass@k."""


@dataclass
class Study:
    models: dict[str, ModelSummary]
    paired: dict[str, Paired]
    options: Options
    excluded: dict[str, dict[str, int]]
    decoding: dict[str, list[dict[str, object]]]
    warnings: list[str]
    training_specs: dict[str, set[str]] = field(default_factory=dict)
    costs: dict[str, Cost] = field(default_factory=dict)
    """Per model: tokens per sample, sampling and training GPU-hours (budgets.py)."""
    equal_tokens: dict[str, EqualTokens] = field(default_factory=dict)
    """Per pair (the keys of `paired`), the comparison at the smaller token budget."""


def _design(
    families: Sequence[str], options: Options, restrict: Sequence[int] | None = None
) -> Design:
    chosen = list(range(len(families))) if restrict is None else list(restrict)
    names = [families[i] for i in chosen]
    if options.weights is None and not options.two_level:
        return Design.pooled(len(names))
    order = sorted(set(names))
    strata = np.asarray([order.index(n) for n in names], dtype=np.int64)
    if options.weights is None:
        weights = np.bincount(strata).astype(np.float64)  # pooled: a family weighs its prompts
    else:
        missing = [f for f in order if f not in options.weights]
        if missing:
            raise ValueError(f"no declared weight for task famil(ies) {', '.join(missing)}")
        weights = np.asarray([float(options.weights[f]) for f in order])
    return Design(strata, weights, two_level=options.two_level)


def curve(
    estimates: Floats,
    design: Design,
    n_min: Ints,
    ks: Sequence[int],
    options: Options,
    rng: np.random.Generator,
) -> Curve:
    seeds, prompts = estimates.shape[:2]
    weights = design.point_weights()
    per_seed = np.einsum("p,spk->sk", weights, estimates) / weights.sum()
    estimate = per_seed.mean(axis=0)
    drawn = design.resample(options.resamples, rng)
    resampled = seeded_estimates(estimates, drawn, np.ones((options.resamples, seeds)))
    variance = resampled.var(axis=0, ddof=1) * design.variance_correction
    prompt, recipe = two_levels(
        estimate,
        variance,
        design.degrees_of_freedom,
        [(recipe_variance(per_seed), seeds)],
        prompts,
        options.confidence,
    )
    return Curve(
        ks=list(ks),
        intervals=_intervals(estimate, prompt),
        recipe=None if recipe is None else _intervals(estimate, recipe),
        capped=[int(np.sum(n_min < k)) for k in ks],
    )


def _intervals(estimate: Floats, bounds: tuple[Floats, Floats]) -> list[Interval]:
    return [
        Interval(float(e), float(lo), float(hi))
        for e, lo, hi in zip(estimate, bounds[0], bounds[1], strict=True)
    ]


def _chance(options: Ints, design: Design, ks: Sequence[int]) -> list[float] | None:
    if not np.any(options > 0):
        return None
    weights = design.point_weights()
    per_prompt = chance_pass_at_k(options[:, None], np.asarray(ks)[None, :])
    return [float(v) for v in weights @ per_prompt / weights.sum()]


def _estimates(n: Ints, c: Ints, ks: Sequence[int]) -> Floats:
    """(seeds, prompts, K) pass@k with k capped at each (seed, prompt)'s n."""
    k = np.asarray(ks, dtype=np.int64)[None, None, :]
    return pass_at_k(n[..., None], c[..., None], np.minimum(k, n[..., None]))


def _summarise(
    table: Table, index: int, options: Options, rng: np.random.Generator
) -> ModelSummary:
    name = table.models[index]
    rows = table.model == index
    seed_ids = np.unique(table.seed[rows])
    prompt_ids = np.unique(table.prompt[rows])
    s_pos = np.searchsorted(seed_ids, table.seed[rows])
    p_pos = np.searchsorted(prompt_ids, table.prompt[rows])
    shape = (len(seed_ids), len(prompt_ids))
    n = np.zeros(shape, dtype=np.int64)
    c = np.zeros(shape, dtype=np.int64)
    np.add.at(n, (s_pos, p_pos), 1)
    np.add.at(c, (s_pos, p_pos), table.success[rows].astype(np.int64))
    complete = np.all(n > 0, axis=0)
    dropped = [table.prompts[p] for p in prompt_ids[~complete]]
    prompt_ids, n, c = prompt_ids[complete], n[:, complete], c[:, complete]
    n_min = n.min(axis=0)
    ks = list(options.ks) if options.ks is not None else default_ks(int(n.max()))
    estimates = _estimates(n, c, ks)
    families = [table.family_of[p] for p in prompt_ids]
    design = _design(families, options)
    choice_counts = table.options_of[prompt_ids]
    overall = curve(estimates, design, n_min, ks, options, rng)
    overall.chance = _chance(choice_counts, design, ks)
    family_curves: dict[str, Curve] = {}
    for family in sorted(set(families)):
        members = [i for i, f in enumerate(families) if f == family]
        pooled = Design.pooled(len(members))
        family_curves[family] = curve(
            estimates[:, members, :], pooled, n_min[members], ks, options, rng
        )
        family_curves[family].chance = _chance(choice_counts[members], pooled, ks)
    total_n, total_c = n.sum(axis=0), c.sum(axis=0)
    never = np.flatnonzero(total_c == 0)
    bounds = zero_success_upper_bound(total_n[never], options.alpha)
    kept = np.isin(table.prompt, prompt_ids) & rows
    parsed, success, score = table.parsed[kept], table.success[kept], table.score[kept]
    return ModelSummary(
        name=name,
        prompts=[table.prompts[p] for p in prompt_ids],
        seeds=[table.seeds[s] for s in seed_ids if table.seeds[s] != ""],
        samples=int(kept.sum()),
        parse_rate=float(parsed.mean()),
        correct_given_parsed=float(success[parsed].mean()) if parsed.any() else None,
        strict_success=float(success.mean()),
        mean_score=float(score.mean()),
        mean_reward=float(table.reward[kept].mean()),
        continuous=bool(np.any((score > 0.0) & (score < 1.0))),
        curve=overall,
        families=family_curves,
        unsolved=[
            (table.prompts[prompt_ids[i]], int(total_n[i]), float(b))
            for i, b in zip(never, bounds, strict=True)
        ],
        short=[
            (table.prompts[p], int(m))
            for p, m in zip(prompt_ids, n_min, strict=True)
            if m < max(ks)
        ],
        dropped=dropped,
        success_rates=total_c / total_n,
        counts=(n, c),
        estimates=estimates,
    )


def _paired(
    table: Table, a: ModelSummary, b: ModelSummary, options: Options, rng: np.random.Generator
) -> Paired:
    ks = [k for k in a.curve.ks if k in b.curve.ks]  # differ when default k met different n
    ka = [a.curve.ks.index(k) for k in ks]
    kb = [b.curve.ks.index(k) for k in ks]
    in_a = {p: i for i, p in enumerate(a.prompts)}
    in_b = {p: i for i, p in enumerate(b.prompts)}
    common = [p for p in a.prompts if p in in_b]
    ia = np.asarray([in_a[p] for p in common], dtype=np.int64)
    ib = np.asarray([in_b[p] for p in common], dtype=np.int64)
    position = {p: i for i, p in enumerate(table.prompts)}
    design = _design([table.family_of[position[p]] for p in common], options)
    return compare(
        (a.name, b.name),
        common,
        (a.estimates[:, ia][:, :, ka], b.estimates[:, ib][:, :, kb]),
        (
            (a.counts[0][:, ia], a.counts[1][:, ia]),
            (b.counts[0][:, ib], b.counts[1][:, ib]),
        ),
        ks,
        design,
        (options.resamples, options.confidence, options.alpha),
        rng,
    )


def _common(
    table: Table, a: ModelSummary, b: ModelSummary, options: Options
) -> tuple[Ints, Ints, Design]:
    in_b = {p: i for i, p in enumerate(b.prompts)}
    common = [p for p in a.prompts if p in in_b]
    in_a = {p: i for i, p in enumerate(a.prompts)}
    position = {p: i for i, p in enumerate(table.prompts)}
    design = _design([table.family_of[position[p]] for p in common], options)
    ia = np.asarray([in_a[p] for p in common], dtype=np.int64)
    ib = np.asarray([in_b[p] for p in common], dtype=np.int64)
    return ia, ib, design


def _equal_tokens(
    table: Table,
    a: ModelSummary,
    b: ModelSummary,
    per_sample: tuple[float, float],
    options: Options,
    rng: np.random.Generator,
) -> EqualTokens | None:
    ia, ib, design = _common(table, a, b, options)
    counts = (
        (a.counts[0][:, ia], a.counts[1][:, ia]),
        (b.counts[0][:, ib], b.counts[1][:, ib]),
    )
    return equal_tokens(counts, per_sample, design, (options.resamples, options.confidence), rng)


def _pairs(models: Sequence[str], options: Options) -> list[tuple[str, str]]:
    if options.pairs is not None:
        unknown = sorted({m for pair in options.pairs for m in pair} - set(models))
        if unknown:
            raise ValueError(f"--pair names unknown model(s) {', '.join(unknown)}")
        return list(options.pairs)
    return [(a, b) for i, a in enumerate(models) for b in models[i + 1 :]]


def analyse(table: Table, options: Options) -> Study:
    rng = np.random.default_rng(options.rng_seed)
    summaries: dict[str, ModelSummary] = {}
    warnings: list[str] = []
    for index, name in enumerate(table.models):
        if not np.any(table.model == index):
            warnings.append(f"{name}: no judged rows; it has no statistics")
            continue
        summary = _summarise(table, index, options, rng)
        summaries[name] = summary
        seed_note = seed_warning(name, summary.seeds)
        if seed_note is not None:
            warnings.append(seed_note)
        if summary.dropped:
            warnings.append(
                f"{name}: {len(summary.dropped)} prompt(s) lack judged rows in some seeds and "
                "are left out"
            )
        largest = max(summary.curve.ks)
        if summary.short:
            warnings.append(
                f"{name}: {len(summary.short)} prompt(s) have fewer than {largest} samples; "
                "their pass@k at larger k is their pass@n (listed in the report)"
            )
    costs = {
        name: model_cost(
            table.tokens[table.model == table.models.index(name)],
            table.runs.get(name, {}),
            table.training_hours.get(name, []),
            s.curve.ks,
        )
        for name, s in summaries.items()
    }
    paired: dict[str, Paired] = {}
    equal: dict[str, EqualTokens] = {}
    budget_rng = np.random.default_rng([options.rng_seed, 1])  # leaves the other draws alone
    for a, b in _pairs(list(summaries), options):
        if set(summaries[a].prompts).isdisjoint(summaries[b].prompts):
            warnings.append(f"{a} and {b} share no judged prompt; they are not compared")
            continue
        paired[f"{a}|{b}"] = _paired(table, summaries[a], summaries[b], options, rng)
        ta, tb = costs[a].tokens_per_sample, costs[b].tokens_per_sample
        if ta is not None and tb is not None:
            found = _equal_tokens(table, summaries[a], summaries[b], (ta, tb), options, budget_rng)
            if found is not None:
                equal[f"{a}|{b}"] = found
    warnings += decoding_warnings(table.decoding, table.unrecorded)
    return Study(
        summaries,
        paired,
        options,
        table.excluded,
        table.decoding,
        warnings,
        table.training_specs,
        costs,
        equal,
    )
