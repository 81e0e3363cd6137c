"""DIR/report.md from a study's statistics: what report.json says (`report`), for a person, with
the figures inline and every definition a reader needs to interpret a number."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from proctor_client.evaluation.analysis import Curve, Study
from proctor_client.evaluation.bootstrap import Interval
from proctor_client.evaluation.paired import CATEGORIES, Paired
from proctor_client.evaluation.report import (
    LISTED,
    Decontaminated,
    JudgeReview,
    Verified,
    bootstrap_rule,
    correct_fraction,
    success_rule,
)
from proctor_client.evaluation.rows import BadRow
from proctor_client.evaluation.scoring import SpecSummary

__all__ = ["write_markdown"]


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def _cell(interval: Interval) -> str:
    return f"{interval.estimate:.3f} [{interval.low:.3f}, {interval.high:.3f}]"


def _curve_table(models: dict[str, Curve], chance: list[float] | None = None) -> list[str]:
    ks = sorted({k for c in models.values() for k in c.ks})
    head = ["k", *models] + (["chance"] if chance is not None else [])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for k in ks:
        cells = [str(k)]
        for curve in models.values():
            if k in curve.ks:
                i = curve.ks.index(k)
                capped = f" ({curve.capped[i]} capped)" if curve.capped[i] else ""
                recipe = f"; recipe {_range(curve.recipe[i])}" if curve.recipe else ""
                cells.append(_cell(curve.intervals[i]) + recipe + capped)
            else:
                cells.append("")
        if chance is not None:
            first = next(iter(models.values()))
            cells.append(f"{chance[first.ks.index(k)]:.3f}" if k in first.ks else "")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def write_markdown(
    path: Path,
    study: Study,
    spec: SpecSummary,
    figures: dict[str, str],
    skipped: Sequence[BadRow],
    verified: Verified | None,
    decontaminated: Decontaminated | None = None,
    judged: JudgeReview | None = None,
) -> None:
    md = _intro(study, spec) + _warnings_section(study, skipped) + _models_section(study)
    md += _pass_at_k_section(study, figures) + _families_section(study, figures)
    md += _success_rates_section(figures)
    md += _costs_section(study)
    if decontaminated is not None:
        md += _clean_section(study, decontaminated)
    for name, p in study.paired.items():
        md += _paired_section(name, p, figures[f"paired:{name}"], study)
    md += _unsolved_section(study)
    if verified is not None:
        md += _review_section(study, verified)
    if judged is not None:
        md += _judge_section(study, judged)
    path.write_text("\n".join(md) + "\n", encoding="utf-8")


def _intro(study: Study, spec: SpecSummary) -> list[str]:
    """The title and the definitions every number below rests on."""
    o = study.options
    return [
        "# pass@k study",
        "",
        f"Spec `{spec.name}` {spec.version} (`{spec.hash}`). Success: {success_rule(study)}. "
        f"Intervals: {o.confidence:.0%}, {bootstrap_rule(study)}. pass@k per prompt is the "
        "unbiased estimator 1 - C(n-c, k) / C(n, k), averaged over prompts"
        + (" with declared task-family weights." if o.weights else " with equal weights."),
        "pass@k is oracle coverage: some response among k is correct. It says nothing about "
        "picking that response without the verifier.",
        "",
    ]


def _warnings_section(study: Study, skipped: Sequence[BadRow]) -> list[str]:
    if not (study.warnings or skipped):
        return []
    md = ["## Warnings", "", *(f"- {w}" for w in study.warnings)]
    if skipped:
        md.append(f"- {len(skipped)} malformed row(s) skipped (`--skip-bad`):")
        md += [f"  - {b.message}" for b in skipped[:LISTED]]
    return [*md, ""]


def _models_section(study: Study) -> list[str]:
    md = [
        "## Models",
        "",
        "Parse rate x correctness among parsed = strict success (review eq. 16). Mean score keeps "
        "partial credit apart from the success rate.",
        "",
        "| model | prompts | samples | seeds | parse rate | correct among parsed | strict success "
        "| mean score | mean reward | not judged |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in study.models.values():
        excluded = ", ".join(f"{n} {k}" for k, n in study.excluded.get(s.name, {}).items())
        md.append(
            f"| {s.name} | {len(s.prompts)} | {s.samples} | {len(s.seeds) or '-'} | "
            f"{_pct(s.parse_rate)} | {_pct(s.correct_given_parsed)} | {_pct(s.strict_success)} | "
            f"{s.mean_score:.3f} | {s.mean_reward:.3f} | {excluded or '0'} |"
        )
    return md


def _pass_at_k_section(study: Study, figures: dict[str, str]) -> list[str]:
    chance = next((s.curve.chance for s in study.models.values() if s.curve.chance), None)
    md = ["", "## pass@k", "", f"![pass@k]({figures['pass_at_k']})", ""]
    md += _curve_table({n: s.curve for n, s in study.models.items()}, chance)
    if chance is not None:
        md += [
            "",
            "Chance: the coverage k uniform guesses among the options of the multiple-choice "
            "prompts would reach (other prompts count 0). Coverage near it is bought by guessing.",
        ]
    return [*md, ""]


def _hours(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.2f}"


def _costs_section(study: Study) -> list[str]:
    costs = study.costs
    if not any(
        c.tokens_per_sample is not None or c.sampling_runs for c in costs.values()
    ) and not any(c.training_gpu_hours is not None for c in costs.values()):
        return []
    md = [
        "## Cost: tokens and GPU-hours",
        "",
        "Tokens per sample: the mean `response_tokens` of the judged rows that record it; pass@k "
        "costs k times that per prompt. Sampling GPU-hours: devices x wall time per sampling "
        "run, summed (device-hours on the device named); training: the rows' "
        "`training_gpu_hours`.",
        "",
        "| model | tokens per sample (rows) | tokens at the largest k | sampling runs | device | "
        "sampling GPU-hours | training GPU-hours |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, c in costs.items():
        per = (
            "n/a"
            if c.tokens_per_sample is None
            else f"{c.tokens_per_sample:.1f} ({c.rows_with_tokens})"
        )
        top = "n/a" if not c.tokens_at_k else f"{c.tokens_at_k[-1]:,.0f}"
        md.append(
            f"| {name} | {per} | {top} | {c.sampling_runs} | "
            f"{', '.join(c.sampling_devices) or '-'} | {_hours(c.sampling_gpu_hours)} | "
            f"{_hours(c.training_gpu_hours)} |"
        )
    priced = {n: c for n, c in costs.items() if c.tokens_at_k and n in study.models}
    if priced:
        md += ["", "pass@k against the tokens it costs per prompt:", ""]
        md += ["| model | k | tokens per prompt | pass@k |", "|---|---|---|---|"]
        for name, c in priced.items():
            curve = study.models[name].curve
            for k, tokens, interval in zip(
                curve.ks, c.tokens_at_k or [], curve.intervals, strict=True
            ):
                md.append(f"| {name} | {k} | {tokens:,.0f} | {_cell(interval)} |")
    if study.equal_tokens:
        md += [
            "",
            "At equal generated-token budgets (the smaller model's spend at the common "
            "sample budget; each model takes the largest k it affords):",
            "",
        ]
        md += [
            "| pair | tokens per prompt | k (A, B) | pass (A, B) | A - B |",
            "|---|---|---|---|---|",
        ]
        for pair, e in study.equal_tokens.items():
            recipe = f"; recipe {_range(e.difference_recipe)}" if e.difference_recipe else ""
            md.append(
                f"| {pair} | {e.tokens:,.0f} | {e.k_a}, {e.k_b} | {e.a:.3f}, {e.b:.3f} | "
                f"{_cell(e.difference)}{recipe} |"
            )
    return [*md, ""]


def _clean_section(study: Study, clean: Decontaminated) -> list[str]:
    flagged = sorted(clean.flagged)
    shown = ", ".join(f"`{p}`" for p in flagged[:LISTED])
    more = f" and {len(flagged) - LISTED} more" if len(flagged) > LISTED else ""
    md = [
        "## pass@k without contaminated prompts",
        "",
        f"{len(flagged)} prompt(s) share an n-gram with the corpus (`{clean.source}`): "
        f"{shown or 'none'}{more}. The full figures and the same statistics on the other "
        "prompts, side by side:",
        "",
    ]
    if clean.study is None:
        return [*md, "No judged prompt is left once they are removed.", ""]
    paired: dict[str, Curve] = {}
    for name, s in study.models.items():
        paired[f"{name} (all)"] = s.curve
        left = clean.study.models.get(name)
        if left is not None:
            paired[f"{name} (clean, {len(left.prompts)} prompts)"] = left.curve
    return [*md, *_curve_table(paired), ""]


def _families_section(study: Study, figures: dict[str, str]) -> list[str]:
    if "families" not in figures:
        return [
            "One task family: pass_at_k_families.png is written only when a study has several.",
            "",
        ]
    md = ["## Per task family", "", f"![families]({figures['families']})", ""]
    for family in sorted({f for s in study.models.values() for f in s.families}):
        curves = {n: s.families[family] for n, s in study.models.items() if family in s.families}
        chance = next((c.chance for c in curves.values() if c.chance), None)
        md += [f"### {family}", "", *_curve_table(curves, chance), ""]
    return md


def _success_rates_section(figures: dict[str, str]) -> list[str]:
    return [
        "## Per-prompt success rates",
        "",
        f"![success rates]({figures['success_rates']})",
        "",
        "Each prompt's c / n is an estimate: the histogram mixes differences between prompts "
        "with sampling noise in each.",
        "",
    ]


def _range(interval: Interval | None, digits: int = 3) -> str:
    return "" if interval is None else f"[{interval.low:.{digits}f}, {interval.high:.{digits}f}]"


def _paired_section(name: str, p: Paired, figure: str, study: Study) -> list[str]:
    md = [
        f"## {p.a} vs {p.b}",
        "",
        f"{p.prompts} prompts judged for both. Difference = pass@k({p.a}) - pass@k({p.b}); "
        "the prompt draw is the same for both models (paired).",
        "",
        f"| k | {p.a} | {p.b} | difference [prompt-level CI] | recipe-level CI |",
        "|---|---|---|---|---|",
    ]
    for i, k in enumerate(p.ks):
        recipe = p.difference_recipe[i] if p.difference_recipe else None
        md.append(
            f"| {k} | {p.a_curve[i]:.3f} | {p.b_curve[i]:.3f} | {_cell(p.difference[i])} | "
            f"{_range(recipe) or 'n/a (one seed each)'} |"
        )
    heads = {"only_a": f"only {p.a}", "only_b": f"only {p.b}", "both": "both", "neither": "neither"}
    md += [
        "",
        f"Problems solved by each, at equal sample budgets (k samples per model and draw, the "
        f"common budget is {p.budget}): expected numbers of prompts, with prompt-level and "
        "(where a model has several seeds) recipe-level intervals.",
        "",
        "| k | " + " | ".join(heads[c] for c in CATEGORIES) + " |",
        "|---|---|---|---|---|",
    ]
    for i, k in enumerate(p.solved_ks):
        cells = []
        for c in CATEGORIES:
            cell = p.solved[c][i]
            wide = _range(p.solved_recipe[c][i], 1) if p.solved_recipe else ""
            cells.append(f"{cell.estimate:.1f} {_range(cell, 1)}" + (f"; {wide}" if wide else ""))
        md.append(f"| {k} | " + " | ".join(cells) + " |")
    md += [
        "",
        "Per prompt, P(a solves it in k samples) is the mean over a's seeds of its per-seed "
        "pass@k, likewise for b; only a = P_a (1 - P_b), and so on, summed over prompts. The "
        f"lists below are at the common budget ({p.budget}) with the same definition: each "
        "prompt with its term of the sum (the terms add up to the count).",
        "",
        f"![solved by]({figure})",
        "",
    ]
    alpha = study.options.alpha
    for label, listed, other in ((p.a, p.only_a, p.b), (p.b, p.only_b, p.a)):
        md.append(f"Prompts solved only by {label} ({len(listed)}):")
        md.append("")
        if not listed:
            md.append("none")
        for q in listed[:LISTED]:
            bound = (
                f", rate < {q.other_upper_bound:.4f} ({1 - alpha:.0%} one-sided)"
                if q.other_upper_bound is not None
                else ""
            )
            md.append(
                f"- `{q.prompt_id}`: probability {q.probability:.3f}; {other} "
                f"{q.other_successes}/{q.other_samples}{bound}"
            )
        if len(listed) > LISTED:
            md.append(f"- ... {len(listed) - LISTED} more in report.json")
        md.append("")
    return md


def _unsolved_section(study: Study) -> list[str]:
    alpha = study.options.alpha
    md = [
        "## Prompts never solved",
        "",
        f"Zero successes in n samples bound the success rate by 1 - {alpha:g}^(1/n) "
        f"(one-sided, {1 - alpha:.0%}).",
        "",
    ]
    for s in study.models.values():
        md.append(f"- {s.name}: {len(s.unsolved)} of {len(s.prompts)} prompts")
        for prompt, n, bound in s.unsolved[:LISTED]:
            md.append(f"  - `{prompt}`: 0/{n}, rate < {bound:.4f}")
        if len(s.unsolved) > LISTED:
            md.append(f"  - ... {len(s.unsolved) - LISTED} more in report.json")
        if s.short:
            shown = ", ".join(f"`{q}` ({n})" for q, n in s.short[:LISTED])
            md.append(f"  - fewer samples than the largest k: {shown}")
    md.append("")
    return md


def _judged(correct: int, read: int, study: Study) -> str:
    fraction = correct_fraction(correct, read, study.options.confidence)
    if fraction is None:
        return "0"
    low, high = fraction["ci"]
    return f"{correct} ({fraction['estimate']:.0%} [{low:.0%}, {high:.0%}])"


def _review_section(study: Study, verified: Verified) -> list[str]:
    md = [
        "## Reasoning review",
        "",
        "Verified pass@k counts only responses whose reasoning held up. Unless every success was "
        "reviewed it is bracketed: low counts only successes judged correct; high counts all "
        "successes but those judged incorrect. The fraction judged correct has a Wilson "
        f"interval ({study.options.confidence:.0%}); as the draw is uniform over successes, "
        "pass@1 times that fraction estimates verified pass@1 (exactly so with equal weights and "
        "equal n; no such shortcut holds for k > 1).",
        "",
    ]
    return md + _review_table(study, verified)


def _judge_section(study: Study, judged: JudgeReview) -> list[str]:
    spec = judged.spec
    left = ", ".join(f"{n} {why}" for why, n in sorted(judged.unlabelled.items()))
    md = [
        "## Model-assisted review",
        "",
        f"The same registered sample, blinded, labelled by the judge spec `{spec.name}` "
        f"{spec.version} (`{spec.hash}`): its review template asks whether a response's "
        "reasoning supports its final answer. Verified pass@k is bracketed as above."
        + (f" Left unlabelled: {left}." if left else ""),
        "",
    ]
    agreement = judged.agreement
    if agreement is not None:
        (a, b), (c, d) = agreement.table
        kappa = "undefined" if agreement.kappa is None else f"{agreement.kappa:.3f}"
        md += [
            f"Agreement with the human labels on the {agreement.rows} rows both labelled: "
            f"Cohen's kappa {kappa} (both correct {a}, human correct and judge incorrect {b}, "
            f"human incorrect and judge correct {c}, both incorrect {d}).",
            "",
        ]
    return md + _review_table(study, judged.verified)


def _review_table(study: Study, verified: Verified) -> list[str]:
    md = [
        "| model | sampled | labelled | judged correct | k | pass@k | verified low | "
        "verified high |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, s in study.models.items():
        read, correct = verified.labelled.get(name, (0, 0))
        low, high = verified.low.models.get(name), verified.high.models.get(name)
        for i, k in enumerate(s.curve.ks):
            lo = f"{low.curve.intervals[i].estimate:.3f}" if low else "0"
            hi = f"{high.curve.intervals[i].estimate:.3f}" if high else "0"
            judged = _judged(correct, read, study)
            lead = (
                f"{name} | {verified.sampled.get(name, 0)} | {read} | {judged}"
                if i == 0
                else " | | |"
            )
            md.append(f"| {lead} | {k} | {s.curve.intervals[i].estimate:.3f} | {lo} | {hi} |")
    md.append("")
    return md
