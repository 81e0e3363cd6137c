"""The generations file: one sampled response per JSONL line, validated before anything is scored.

A row names its prompt, its sample number, the domain and reference that judge it, and the
response; optionally the model (rows without one belong to "default"), the training seed of that
model, the task family (the domain when absent), generation facts the termination penalties read,
the decoding settings, the question itself (`prompt`, shown to reviewers) and the spec the model
was trained under (`training_spec`, checked against the study's), the sampling run that drew it
(`sampling`) and the training run's GPU-hours (`training_gpu_hours`). A malformed line stops the
study naming its line and field, unless the caller skips bad lines (they are then reported).
Two rows with one key `(prompt_id, sample, model, seed)`, or rows of one prompt that disagree on
its reference, domain or task family, make the study inconsistent and are always refused: no
statistic over them would mean anything.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from proctor_client._models import FinishReason

__all__ = [
    "DEFAULT_MODEL",
    "BadRow",
    "Generation",
    "RowKey",
    "SamplingRecord",
    "StudyError",
    "check_consistency",
    "read_generations",
]

DEFAULT_MODEL = "default"


class SamplingRecord(BaseModel):
    """What `proctor-eval sample` records of the run that drew a row (for GPU-hours)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    run: str = Field(..., min_length=1, max_length=64, description="one sampling run (process)")
    device: str | None = Field(None, max_length=256, description="device type, where known")
    devices: int | None = Field(None, gt=0, strict=True, description="devices the run used")
    elapsed_s: float = Field(..., ge=0, description="wall time from the run's start to this row")


class Generation(BaseModel):
    """One row of GENERATIONS.jsonl. Unknown fields are refused, so a typo cannot pass silently."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    prompt_id: str = Field(..., min_length=1, max_length=512)
    sample: int = Field(..., ge=0, strict=True)
    domain: str = Field(..., min_length=1, max_length=64)
    reference: dict[str, Any]
    response: str = Field(..., strict=True)
    model: str = Field(DEFAULT_MODEL, min_length=1, max_length=256)
    seed: int | str | None = Field(None, description="training seed (run) of `model`")
    task_family: str | None = Field(None, min_length=1, max_length=256)
    finish_reason: FinishReason | None = None
    response_tokens: int | None = Field(None, ge=0, strict=True)
    prompt_tokens: int | None = Field(None, ge=0, strict=True, description="as the server counted")
    max_response_tokens: int | None = Field(None, gt=0, strict=True)
    decoding: dict[str, Any] | None = Field(
        None,
        description='{"requested": {...}, "effective": {...} | null} as the sampler recorded it '
        "(a flat dict of settings counts as requested)",
    )
    prompt: str | list[dict[str, Any]] | None = Field(
        None, description="the question as the model saw it, text or chat turns (for review)"
    )
    training_spec: str | None = Field(
        None, min_length=1, max_length=256, description="the reward spec the model trained on"
    )
    sampling: SamplingRecord | None = None
    training_gpu_hours: float | None = Field(
        None, ge=0, description="the training run's gpu_hours_total (proctor-train's metrics)"
    )

    @property
    def family(self) -> str:
        return self.task_family or self.domain

    @property
    def key(self) -> RowKey:
        return RowKey(self.prompt_id, self.sample, self.model, self.seed)


@dataclass(frozen=True, slots=True)
class RowKey:
    prompt_id: str
    sample: int
    model: str
    seed: int | str | None

    def label(self) -> str:
        seed = "" if self.seed is None else f", seed {self.seed!r}"
        return f"{self.model}: prompt {self.prompt_id!r} sample {self.sample}{seed}"


@dataclass(frozen=True, slots=True)
class BadRow:
    line: int
    message: str


class StudyError(ValueError):
    """The generations cannot make a study: malformed rows (when not skipped), duplicate keys,
    or one prompt described differently by different rows. `problems` lists them all."""

    def __init__(self, summary: str, problems: list[str]) -> None:
        shown = "\n  ".join(problems[:20])
        more = f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else ""
        super().__init__(f"{summary}:\n  {shown}{more}")
        self.problems = problems


def _describe(line: int, exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"])
    return f"line {line}: {where + ': ' if where else ''}{first['msg']}"


def read_generations(
    path: Path, skip_bad: bool = False
) -> tuple[list[tuple[int, Generation]], list[BadRow]]:
    """The valid rows with their line numbers, and the bad lines (only when `skip_bad`; without
    it the first bad lines raise `StudyError` before anything is scored)."""
    rows: list[tuple[int, Generation]] = []
    bad: list[BadRow] = []
    with path.open(encoding="utf-8", errors="surrogateescape") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                rows.append((number, Generation.model_validate_json(line)))
            except ValidationError as exc:
                bad.append(BadRow(number, _describe(number, exc)))
    if bad and not skip_bad:
        raise StudyError(
            f"{path}: {len(bad)} malformed row(s); fix them or pass --skip-bad",
            [b.message for b in bad],
        )
    return rows, bad


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def check_consistency(rows: Iterable[tuple[int, Generation]]) -> None:
    """Refuse duplicate row keys and prompts whose rows disagree on what the prompt is."""
    problems: list[str] = []
    seen: dict[RowKey, int] = {}
    prompts: dict[str, tuple[int, str, str, str]] = {}
    for line, row in rows:
        first = seen.setdefault(row.key, line)
        if first != line:
            problems.append(f"line {line}: duplicate of line {first} ({row.key.label()})")
        described = (line, row.domain, row.family, _canonical(row.reference))
        known = prompts.setdefault(row.prompt_id, described)
        for index, field in ((1, "domain"), (2, "task_family"), (3, "reference")):
            if known[index] != described[index]:
                problems.append(
                    f"line {line}: prompt {row.prompt_id!r} has a different {field} than on "
                    f"line {known[0]}"
                )
                break
    if problems:
        raise StudyError("the generations are inconsistent", problems)
