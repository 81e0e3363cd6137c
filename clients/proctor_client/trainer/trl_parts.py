"""What TRL's `GRPOTrainer` lacks for the ProRL recipe, as a reward function, a thin subclass and a
callback (`--engine trl`; trl_engine.py puts them together).

- `JudgedReward`, the run's only reward function: each completion is scored by Proctor (its
  `finish_reason` read from TRL's truncation, so termination penalties apply), through the
  reference engine's `BackgroundScorer` (the same pause-and-retry path for a Proctor gone away).
  It returns each completion's advantage, formed by the reference engine's group rule on the
  shaped rewards of the group's judged completions; with TRL's `scale_rewards="none"`, TRL's own
  advantage (reward minus the group mean) is then exactly that advantage. It records which
  completions the loss must leave out: those Proctor did not judge (`infra_error`, `invalid`,
  returned as `None`) and whole groups dynamic sampling drops.
- `ProctorGRPOTrainer` zeroes those completions' rows of the completion mask after TRL's
  generation and scoring, and recounts the token denominator, so they are out of the loss, the
  KL and the group statistics. It overrides one private method of TRL 1.16
  (`_generate_and_score_completions`, calling TRL's own first); the `trl` extra pins that version.
- `RecipeCallback` resets the reference and the optimizer (separately switchable) at listed steps
  and after a validation plateau, runs the validation blend, writes metrics.jsonl with the
  reference engine's fields, and stops at `--stop-after`.

Dynamic sampling here keeps the first informative groups of an oversampled generation batch, up
to the configured batch, and masks the rest; it draws no further rounds to refill a short batch
(the reference engine does).
"""

from __future__ import annotations

import json
import logging
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

import torch
from accelerate.utils import gather_object  # type: ignore[import-untyped]
from transformers import TrainerCallback
from trl.trainer.grpo_trainer import GRPOTrainer

from proctor_client import ScoreItem, ScoreResult
from proctor_client.trainer.groups import GroupCounts, group_advantages, is_informative
from proctor_client.trainer.proctor import BackgroundScorer
from proctor_client.trainer.schedule import Stage
from proctor_client.trl import completion_text, finish_reason

__all__ = ["JudgedBatch", "JudgedReward", "ProctorGRPOTrainer", "RecipeCallback"]

log = logging.getLogger("proctor_client.trainer")


@dataclass
class JudgedBatch:
    """One generation batch as this process saw it, for the step's metrics."""

    results: list[ScoreResult]
    domains: list[str]
    lengths: list[int]
    finish_reasons: list[str]
    group_sizes: list[int]
    counts: GroupCounts = field(default_factory=GroupCounts)
    seconds: float = 0.0


@dataclass(eq=False)
class JudgedReward:
    """TRL reward function: Proctor's verdicts turned into the recipe's advantages (see above)."""

    scorer: BackgroundScorer
    stage: Stage
    _: KW_ONLY
    eos_token_ids: frozenset[int]
    advantage_std: Any
    dynamic_sampling_on: str
    process_index: int = 0
    groups_wanted: int | None = None
    """Informative groups trained on per batch; the rest are surplus (None: all)."""
    masked: list[bool] = field(default_factory=list, init=False)
    """This process's rows of the last batch that the loss leaves out."""
    batches: list[JudgedBatch] = field(default_factory=list, init=False)
    """Batches judged since the callback last read them."""

    def __post_init__(self) -> None:
        self.__name__ = "proctor"

    def __call__(
        self,
        prompts: Sequence[Any],
        completions: Sequence[Any],
        completion_ids: Sequence[Sequence[int]],
        **columns: Any,
    ) -> list[float | None]:
        began = time.perf_counter()
        step = getattr(columns.get("trainer_state"), "global_step", 0)
        limit = self.stage.max_response_tokens
        reasons = [finish_reason(ids, limit, self.eos_token_ids) for ids in completion_ids]
        items = [
            ScoreItem(
                id=f"{step}-{i}",
                domain=columns["domain"][i],
                response=completion_text(completion),
                reference=json.loads(columns["reference"][i]),
                finish_reason=reasons[i],
                response_tokens=len(completion_ids[i]),
                max_response_tokens=limit,
            )
            for i, completion in enumerate(completions)
        ]
        results = self.scorer.submit(items, self.stage.spec).result().results
        rows = gather_object(
            [_row(r, columns["row"][i], len(completion_ids[i])) for i, r in enumerate(results)]
        )
        advantages, masked, counts = self._advantages(rows)
        first = self.process_index * len(results)
        self.masked = masked[first : first + len(results)]
        self.batches.append(
            JudgedBatch(
                results=results,
                domains=list(columns["domain"]),
                lengths=[len(ids) for ids in completion_ids],
                finish_reasons=reasons,
                group_sizes=_group_sizes([r[3] for r in rows]),
                counts=counts,
                seconds=time.perf_counter() - began,
            )
        )
        return advantages[first : first + len(results)]

    def _advantages(self, rows: list[_Row]) -> tuple[list[float | None], list[bool], GroupCounts]:
        """Per row of the whole batch (every process): its advantage (None when unjudged) and
        whether the loss leaves it out; groups are runs of G rows, as TRL lays them out."""
        size = self.stage.group_size
        advantages: list[float | None] = [None] * len(rows)
        masked = [True] * len(rows)
        counts = GroupCounts(rounds=1)
        for start in range(0, len(rows), size):
            members = [i for i in range(start, start + size) if rows[i][2]]
            counts.unjudged_responses += size - len(members)
            measure = 0 if self.dynamic_sampling_on == "reward" else 1
            values = [rows[i][measure] or 0.0 for i in members]
            informative = is_informative(values)
            tokens = sum(rows[i][4] for i in range(start, start + size))
            full = self.groups_wanted is not None and counts.accepted_groups >= self.groups_wanted
            if informative and full:
                counts.surplus_groups += 1
                counts.surplus_tokens += tokens
            else:
                counts.add(informative, tokens)
            if not informative or full:
                for i in members:
                    advantages[i] = 0.0
                continue
            rewards = [rows[i][0] or 0.0 for i in members]
            for i, advantage in zip(
                members, group_advantages(rewards, self.advantage_std), strict=True
            ):
                advantages[i], masked[i] = advantage, False
        return advantages, masked, counts


_Row = tuple[float | None, float | None, bool, int, int]
"""(reward, score, judged, dataset row, tokens) of one completion."""


def _row(result: ScoreResult, row: int, tokens: int) -> _Row:
    ok = result.status == "ok"
    return (result.reward if ok else None, result.score if ok else None, ok, row, tokens)


def _group_sizes(prompt_ids: list[int]) -> list[int]:
    """The lengths of the runs of equal dataset rows: the G each prompt was sampled with."""
    sizes: list[int] = []
    for i, prompt_id in enumerate(prompt_ids):
        if i and prompt_id == prompt_ids[i - 1]:
            sizes[-1] += 1
        else:
            sizes.append(1)
    return sizes


class ProctorGRPOTrainer(GRPOTrainer):
    """GRPOTrainer whose loss leaves out the completions `JudgedReward` masked."""

    def __init__(self, *, judge: JudgedReward, **kwargs: Any) -> None:
        super().__init__(reward_funcs=[judge], **kwargs)
        self.judge = judge

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        output: dict[str, Any] = super()._generate_and_score_completions(inputs)
        mask = output["completion_mask"]
        keep = torch.tensor([not m for m in self.judge.masked], device=mask.device)
        output["completion_mask"] = mask * keep.unsqueeze(1).to(mask.dtype)
        output["num_items_in_batch"] = self.accelerator.gather(
            output["completion_mask"].sum()
        ).sum()
        return output


@dataclass
class StepHooks:
    """What the callback calls at the edges of a rollout step (a step is `updates` optimizer
    updates on one generation batch): `begin(step)` before its generation, `end(step, logs)`
    after its last update with TRL's logs of each update; `end` returns whether to stop."""

    first_step: int
    updates: int
    begin: Callable[[int], None]
    end: Callable[[int, list[dict[str, float]]], bool]
    logs: list[dict[str, float]] = field(default_factory=list)


class RecipeCallback(TrainerCallback):
    """Maps TRL's optimizer steps onto the recipe's rollout steps and calls `StepHooks`."""

    def __init__(self, hooks: StepHooks) -> None:
        self.hooks = hooks

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if state.global_step % self.hooks.updates == 0:
            self.hooks.begin(self.hooks.first_step + state.global_step // self.hooks.updates)

    def on_log(
        self, args: Any, state: Any, control: Any, logs: dict[str, float] | None = None, **_: Any
    ) -> None:
        if logs is None or "loss" not in logs:
            return  # the end-of-training summary
        self.hooks.logs.append(dict(logs))
        if state.global_step % self.hooks.updates == 0:
            step = self.hooks.first_step + state.global_step // self.hooks.updates - 1
            logs_of_step, self.hooks.logs = self.hooks.logs, []
            if self.hooks.end(step, logs_of_step):
                control.should_training_stop = True


def batch_metrics(batches: Sequence[JudgedBatch]) -> dict[str, Any]:
    """The reference engine's rollout figures, from the batches one step judged."""
    judged = [(b, i) for b in batches for i, r in enumerate(b.results) if r.status == "ok"]
    results = [b.results[i] for b, i in judged]
    by_status: dict[str, int] = defaultdict(int)
    by_domain: dict[str, list[float]] = defaultdict(list)
    penalties: dict[str, float] = defaultdict(float)
    for b in batches:
        for r in b.results:
            by_status[r.status] += 1
    for (b, i), r in zip(judged, results, strict=True):
        by_domain[b.domains[i]].append(r.reward or 0.0)
        for name, amount in r.penalties.items():
            penalties[name] += amount
    counts = GroupCounts()
    for b in batches:
        counts.merge(b.counts)
    metrics: dict[str, Any] = {
        "reward_mean": _mean([r.reward or 0.0 for r in results]),
        "score_mean": _mean([r.score or 0.0 for r in results]),
        "parse_rate": _mean([float(bool(r.parsed)) for r in results]),
        "response_length": _mean([float(b.lengths[i]) for b, i in judged]),
        "stop_rate": _mean([float(b.finish_reasons[i] == "stop") for b, i in judged]),
        **counts.metrics(),
        "sampling_rounds": len(batches),
        "unjudged": counts.unjudged_responses,
        "time_scoring": sum(b.seconds for b in batches),
        "group_size": max((g for b in batches for g in b.group_sizes), default=0),
    }
    for status, n in by_status.items():
        metrics[f"status/{status}"] = n
    for domain, values in by_domain.items():
        metrics[f"reward/{domain}"] = _mean(values)
    for name, amount in penalties.items():
        metrics[f"penalty/{name}"] = amount / max(1, len(results))
    return metrics


def update_metrics(logs: Sequence[dict[str, float]]) -> dict[str, Any]:
    """The reference engine's update figures, from TRL's logs of one step's updates."""

    def mean(key: str) -> float:
        values = [entry[key] for entry in logs if key in entry]
        return sum(values) / len(values) if values else 0.0

    return {
        "loss": mean("loss"),
        "kl": mean("kl"),
        "entropy": mean("entropy"),
        "clip_low": mean("clip_ratio/low_mean"),
        "clip_high": mean("clip_ratio/high_mean"),
        "grad_norm": mean("grad_norm"),
        "updates": len(logs),
        "lr": logs[-1].get("learning_rate", 0.0) if logs else 0.0,
    }


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None
