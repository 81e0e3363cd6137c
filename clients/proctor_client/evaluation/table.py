"""From scored rows to the study's table: one row per judged sample (model, prompt, seed,
success, score, tokens) as arrays, and the runs' costs; `analysis` computes the statistics."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from proctor_client.evaluation.budgets import RunTime
from proctor_client.evaluation.rows import Generation, RowKey
from proctor_client.evaluation.store import ScoredRow

__all__ = ["Bools", "Floats", "Ints", "Table", "Verdict", "build_table", "succeeded"]

Floats = NDArray[np.float64]
Ints = NDArray[np.int64]
Bools = NDArray[np.bool_]

Verdict = Callable[[RowKey, bool], bool]
"""Re-decides a row's success from its key and its scored success (the review's labels)."""


@dataclass
class Table:
    """The judged rows of a study as arrays, with the prompts' facts."""

    models: list[str]
    prompts: list[str]
    seeds: list[str]
    model: Ints
    prompt: Ints
    seed: Ints
    success: Bools
    parsed: Bools
    score: Floats
    reward: Floats
    family_of: list[str]
    """Per prompt, its task family."""
    options_of: Ints
    """Per prompt, its number of multiple-choice options (0: not multiple choice)."""
    excluded: dict[str, dict[str, int]]
    """Per model, rows not judged, by status."""
    decoding: dict[str, list[dict[str, object]]]
    """Per model, the distinct decoding settings its rows record."""
    unrecorded: dict[str, int] = field(default_factory=dict)
    """Per model, rows recording no decoding."""
    training_specs: dict[str, set[str]] = field(default_factory=dict)
    """Per model, the training specs its rows name."""
    tokens: Floats = field(default_factory=lambda: np.zeros(0))
    """Per judged row, its response_tokens (NaN where not recorded)."""
    runs: dict[str, dict[str, RunTime]] = field(default_factory=dict)
    """Per model, its sampling runs as its rows (judged or not) record them."""
    training_hours: dict[str, list[float]] = field(default_factory=dict)
    """Per model, the training_gpu_hours its rows record."""


def _seed_label(seed: int | str | None) -> str:
    return "" if seed is None else str(seed)


def succeeded(result: Mapping[str, Any], threshold: float | None) -> bool:
    """Whether a judged (`ok`) result counts as a success: the scorer's own `success`, or
    `score >= threshold` when one is declared."""
    if threshold is None:
        return bool(result["success"])
    return float(result["score"]) >= threshold


def build_table(
    scored: Sequence[ScoredRow], threshold: float | None = None, verdict: Verdict | None = None
) -> Table:
    models: dict[str, int] = {}
    prompts: dict[str, int] = {}
    seeds: dict[str, int] = {}
    family_of: list[str] = []
    options_of: list[int] = []
    excluded: dict[str, dict[str, int]] = {}
    decoding: dict[str, list[dict[str, object]]] = {}
    unrecorded: dict[str, int] = {}
    training_specs: dict[str, set[str]] = {}
    columns: tuple[list[int], list[int], list[int]] = ([], [], [])
    success: list[bool] = []
    parsed: list[bool] = []
    score: list[float] = []
    reward: list[float] = []
    tokens: list[float] = []
    runs: dict[str, dict[str, RunTime]] = {}
    training_hours: dict[str, list[float]] = {}
    for entry in scored:
        row, result = entry.row, entry.result
        model = models.setdefault(row.model, len(models))
        excluded.setdefault(row.model, {})
        _record_costs(row, runs, training_hours)
        if row.decoding is None:
            unrecorded[row.model] = unrecorded.get(row.model, 0) + 1
        elif row.decoding not in decoding.setdefault(row.model, []):
            decoding[row.model].append(row.decoding)
        if row.training_spec is not None:
            training_specs.setdefault(row.model, set()).add(row.training_spec)
        if result["status"] != "ok":
            counts = excluded[row.model]
            counts[result["status"]] = counts.get(result["status"], 0) + 1
            continue
        if row.prompt_id not in prompts:
            prompts[row.prompt_id] = len(prompts)
            family_of.append(row.family)
            choices = row.reference.get("choices") if row.domain == "stem" else None
            options_of.append(len(choices) if isinstance(choices, list) else 0)
        columns[0].append(model)
        columns[1].append(prompts[row.prompt_id])
        columns[2].append(seeds.setdefault(_seed_label(row.seed), len(seeds)))
        value = float(result["score"])
        won = succeeded(result, threshold)
        success.append(verdict(row.key, won) if verdict is not None else won)
        parsed.append(bool(result["parsed"]))
        score.append(value)
        reward.append(float(result["reward"]))
        tokens.append(math.nan if row.response_tokens is None else float(row.response_tokens))
    return Table(
        models=list(models),
        prompts=list(prompts),
        seeds=list(seeds),
        model=np.asarray(columns[0], dtype=np.int64),
        prompt=np.asarray(columns[1], dtype=np.int64),
        seed=np.asarray(columns[2], dtype=np.int64),
        success=np.asarray(success, dtype=np.bool_),
        parsed=np.asarray(parsed, dtype=np.bool_),
        score=np.asarray(score, dtype=np.float64),
        reward=np.asarray(reward, dtype=np.float64),
        family_of=family_of,
        options_of=np.asarray(options_of, dtype=np.int64),
        excluded=excluded,
        decoding=decoding,
        unrecorded=unrecorded,
        training_specs=training_specs,
        tokens=np.asarray(tokens, dtype=np.float64),
        runs=runs,
        training_hours=training_hours,
    )


def _record_costs(
    row: Generation, runs: dict[str, dict[str, RunTime]], training: dict[str, list[float]]
) -> None:
    if row.training_gpu_hours is not None:
        training.setdefault(row.model, []).append(row.training_gpu_hours)
    stamp = row.sampling
    if stamp is None:
        return
    known = runs.setdefault(row.model, {}).get(stamp.run)
    if known is None:
        runs[row.model][stamp.run] = RunTime(stamp.device, stamp.devices, stamp.elapsed_s)
    else:
        known.elapsed_s = max(known.elapsed_s, stamp.elapsed_s)
