"""The stage schedule: per stage its steps, response length, group size, temperature, data mixture
and reward spec, read from the run's YAML and checked before anything is loaded.

A stage is the unit of the ProRL recipe's changes (the review's section 5): a longer response
budget, a larger group, new data, termination shaping, each after a reset or not.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from proctor_client._defaults import DEFAULT_SPEC

__all__ = ["Schedule", "Source", "Stage", "read_yaml"]


class Source(BaseModel):
    """Where a stage's prompts come from; named in the config's `data` table."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["jsonl", "digits", "puzzle"]
    """`jsonl`: a prompt file; `digits`: the tiny task built in code; `puzzle`: entries sampled
    from Proctor's `/v1/puzzles/{task}/sample`."""
    path: Path | None = None
    """The JSONL file (kind `jsonl`): one object a line with `prompt`, `domain`, `reference`."""
    task: str | None = None
    """The Reasoning Gym task (kind `puzzle`)."""
    config: dict[str, Any] | None = None
    """The puzzle task's generator configuration (kind `puzzle`)."""
    size: int = Field(256, ge=1)
    """Prompts generated for `digits` and `puzzle` sources."""

    @model_validator(mode="after")
    def _fields_of_kind(self) -> Source:
        if self.kind == "jsonl" and self.path is None:
            raise ValueError("a jsonl source needs `path`")
        if self.kind == "puzzle" and not self.task:
            raise ValueError("a puzzle source needs `task`")
        if self.kind != "jsonl" and self.path is not None:
            raise ValueError(f"`path` is for jsonl sources, not {self.kind}")
        if self.kind != "puzzle" and (self.task is not None or self.config is not None):
            raise ValueError(f"`task` and `config` are for puzzle sources, not {self.kind}")
        return self


class Stage(BaseModel):
    """One stage of the schedule."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    steps: int = Field(ge=1)
    """Rollout steps (each one optimizer pass over a full batch of accepted groups)."""
    max_response_tokens: int = Field(ge=1)
    """The response budget; a response that reaches it without EOS has finish_reason `length`."""
    group_size: int = Field(ge=2)
    """G, responses sampled per prompt."""
    temperature: float = Field(gt=0)
    """Rollout temperature; log-probabilities are taken at it too."""
    mixture: dict[str, float] = Field(min_length=1)
    """Data source name -> sampling weight (weights need not sum to 1)."""
    spec: str | None = DEFAULT_SPEC
    """The Proctor reward spec (default `proctor_client._defaults.DEFAULT_SPEC`, the evaluator's
    default too; None: the server's default)."""
    reset_at_start: bool = False
    """Reset (reference and/or optimizer, as the run's switches say) when this stage begins."""

    @model_validator(mode="after")
    def _positive_weights(self) -> Stage:
        for name, weight in self.mixture.items():
            if not weight > 0:
                raise ValueError(f"mixture weight of {name!r} must be positive, got {weight}")
        return self


class Schedule:
    """The stages in order, with the step each begins at (steps count from 0)."""

    def __init__(self, stages: Sequence[Stage]) -> None:
        self.stages = tuple(stages)
        self.starts: tuple[int, ...] = tuple(
            sum(s.steps for s in self.stages[:i]) for i in range(len(self.stages))
        )
        self.total_steps = sum(s.steps for s in self.stages)

    def index_at(self, step: int) -> int:
        """The index of the stage that step `step` belongs to."""
        if not 0 <= step < self.total_steps:
            raise IndexError(f"step {step} is outside the schedule (0..{self.total_steps - 1})")
        index = 0
        for i, start in enumerate(self.starts):
            if start <= step:
                index = i
        return index

    def begins_at(self, step: int) -> bool:
        """Whether a stage other than the first begins at `step`."""
        return step in self.starts[1:]

    @staticmethod
    def check(
        stages: Sequence[Stage],
        sources: Mapping[str, Source],
        total_steps: int | None,
        reset_steps: Sequence[int],
    ) -> None:
        """Refuse a schedule that does not add up, naming the stage and field."""
        if not stages:
            raise ValueError("stages: at least one stage is needed")
        names = [s.name for s in stages]
        duplicated = sorted({n for n in names if names.count(n) > 1})
        if duplicated:
            raise ValueError(f"stages: duplicate stage names {duplicated}")
        for i, stage in enumerate(stages):
            unknown = sorted(set(stage.mixture) - set(sources))
            if unknown:
                raise ValueError(
                    f"stages[{i}] ({stage.name}).mixture: unknown data sources {unknown}; "
                    f"the data table has {sorted(sources)}"
                )
        total = sum(s.steps for s in stages)
        if total_steps is not None and total_steps != total:
            raise ValueError(
                f"total_steps is {total_steps} but the stages' steps add up to {total}"
            )
        for step in reset_steps:
            if not 0 < step < total:
                raise ValueError(f"reset_steps: {step} is outside the run (1..{total - 1})")


def read_yaml(path: Path) -> dict[str, Any]:
    """The YAML file at `path`, which must hold a mapping."""
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ValueError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise ValueError(
            f"{path}: the config must be a mapping of fields, got {type(data).__name__}"
        )
    return data
