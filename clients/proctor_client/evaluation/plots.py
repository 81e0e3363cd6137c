"""The report's figures, drawn with matplotlib's Agg backend (no display needed)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from proctor_client.evaluation.analysis import Curve, ModelSummary, Study
from proctor_client.evaluation.paired import Paired

__all__ = ["draw_all", "histogram_figure", "slug"]

DPI = 110


def slug(name: str) -> str:
    """A file-name-safe form of a model or family name."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_") or "_"


def _curve(ax: Axes, curve: Curve, label: str) -> None:
    estimates = [i.estimate for i in curve.intervals]
    (line,) = ax.plot(curve.ks, estimates, marker="o", markersize=3, label=label)
    ax.fill_between(
        curve.ks,
        [i.low for i in curve.intervals],
        [i.high for i in curve.intervals],
        color=line.get_color(),
        alpha=0.2,
        linewidth=0,
    )


def _chance(ax: Axes, ks: Sequence[int], values: Sequence[float]) -> None:
    ax.plot(ks, values, "--", color="grey", label="chance (guessing)")


def _k_axis(ax: Axes, ks: Sequence[int]) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xticks(list(ks), [str(k) for k in ks])
    ax.set_xlabel("k (samples per prompt)")
    ax.set_ylim(0.0, 1.02)
    ax.grid(True, alpha=0.3)


def _pass_at_k(study: Study, path: Path, confidence: float) -> None:
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ks: list[int] = []
    chance_drawn = False
    for summary in study.models.values():
        _curve(ax, summary.curve, f"{summary.name} ({len(summary.prompts)} prompts)")
        ks = sorted(set(ks) | set(summary.curve.ks))
        if summary.curve.chance is not None and not chance_drawn:
            _chance(ax, summary.curve.ks, summary.curve.chance)
            chance_drawn = True
    _k_axis(ax, ks)
    ax.set_ylabel("pass@k")
    ax.set_title(f"pass@k with {confidence:.0%} prompt-level intervals")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def _families(study: Study, path: Path) -> bool:
    families = sorted({f for s in study.models.values() for f in s.families})
    if len(families) < 2:
        return False
    columns = min(3, len(families))
    rows = -(-len(families) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(4.2 * columns, 3.4 * rows), squeeze=False)
    for ax, family in zip(axes.flat, families, strict=False):
        ks: list[int] = []
        chance: Curve | None = None
        for summary in study.models.values():
            if family in summary.families:
                curve = summary.families[family]
                _curve(ax, curve, summary.name)
                ks = sorted(set(ks) | set(curve.ks))
                if chance is None and curve.chance is not None:
                    chance = curve
        if chance is not None and chance.chance is not None:
            _chance(ax, chance.ks, chance.chance)
        _k_axis(ax, ks)
        ax.set_title(family, fontsize=10)
        ax.set_ylabel("pass@k")
        ax.legend(loc="lower right", fontsize=7)
    for ax in list(axes.flat)[len(families) :]:
        ax.set_visible(False)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return True


def histogram_figure(models: Sequence[ModelSummary]) -> Figure:
    """Per model, how many prompts have each success rate: one y axis for all (the models'
    bars compare), counted in whole prompts."""
    fig, axes = plt.subplots(
        1, len(models), figsize=(4 * len(models), 3.2), squeeze=False, sharey=True
    )
    bins = [i / 20 for i in range(21)]
    for ax, summary in zip(axes.flat, models, strict=True):
        ax.hist(summary.success_rates, bins=bins, color="tab:blue", edgecolor="white")
        ax.set_title(summary.name, fontsize=10)
        ax.set_xlabel("per-prompt success rate c/n")
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    axes.flat[0].set_ylabel("prompts")
    fig.tight_layout()
    return fig


def _histogram(models: Sequence[ModelSummary], path: Path) -> None:
    fig = histogram_figure(models)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def _solved_by(pair: Paired, path: Path) -> None:
    fig, ax = plt.subplots(figsize=(7, 4))
    positions = range(len(pair.solved_ks))
    bottom = [0.0] * len(pair.solved_ks)
    parts = (
        ("both", "both", "tab:green"),
        ("only_a", f"only {pair.a}", "tab:blue"),
        ("only_b", f"only {pair.b}", "tab:orange"),
        ("neither", "neither", "lightgrey"),
    )
    for key, label, color in parts:
        values = [i.estimate for i in pair.solved[key]]
        ax.bar(positions, values, bottom=bottom, label=label, color=color)
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    ax.set_xticks(list(positions), [str(k) for k in pair.solved_ks])
    ax.set_xlabel("k (samples per prompt and model: equal budgets)")
    ax.set_ylabel("prompts (expected over k-sample draws)")
    ax.set_title(f"{pair.a} vs {pair.b}: who solves which prompt")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def draw_all(study: Study, out_dir: Path) -> dict[str, str]:
    """Every figure of the study, written to `out_dir`; returns {what: file name}."""
    files = {"pass_at_k": "pass_at_k.png"}
    _pass_at_k(study, out_dir / files["pass_at_k"], study.options.confidence)
    if _families(study, out_dir / "pass_at_k_families.png"):
        files["families"] = "pass_at_k_families.png"
    files["success_rates"] = "success_rates.png"
    _histogram(list(study.models.values()), out_dir / files["success_rates"])
    for name, pair in study.paired.items():
        files[f"paired:{name}"] = f"solved_by_{slug(pair.a)}_vs_{slug(pair.b)}.png"
        _solved_by(pair, out_dir / files[f"paired:{name}"])
    return files
