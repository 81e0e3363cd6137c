"""What TRL's `GRPOTrainer` lacks for the ProRL recipe, as a reward function, a thin subclass and a
callback (`--engine trl`; trl_engine.py puts them together), all through TRL's public surface.

- `JudgedReward`, the run's only reward function: each completion is scored by Proctor (its
  `finish_reason` read from TRL's truncation, so termination penalties apply), through the
  reference engine's `BackgroundScorer` (the same pause-and-retry path for a Proctor gone away).
  It returns each completion's advantage, formed by the reference engine's group rule on the
  shaped rewards of the group's judged completions; with TRL's `scale_rewards="none"`, TRL's own
  advantage (reward minus the group mean) is then exactly that advantage. It records, as
  `LeftOut`, which completions the loss must leave out: those Proctor did not judge
  (`infra_error`, `invalid`, returned as `None`) and whole groups dynamic sampling drops; TRL
  gives every one of them an advantage of exactly 0.
- `ProctorGRPOTrainer.compute_loss` (the public `Trainer` hook) zeroes those completions' rows of
  each micro-batch's completion mask and takes their tokens out of the token denominator before
  TRL's loss, so they are out of the loss, the KL and the logged statistics. TRL has shuffled
  and split the generation batch by then, so a row is found by what survives the shuffle: its
  prompt's and its completion's token ids (the prompts tokenized as TRL 1.16 tokenizes them;
  every row is checked against the judged ones, and a row that matches none stops the run).
  Rows equal in those ids and in their advantage of 0 are equal in every tensor TRL keeps, so
  nothing tells them apart; when only some of them are left out (an unjudged twin of a judged
  completion, or a prompt drawn twice), the first seen are. That differs from leaving out the
  very copies the judge named only when the copies fall in different updates of the step (the
  kept copy's KL term is then taken under another policy).
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
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, cast

import torch
from accelerate.utils import gather_object  # type: ignore[import-untyped]
from transformers import TrainerCallback
from trl.data_utils import is_conversational
from trl.trainer.grpo_trainer import GRPOTrainer

from proctor_client import ScoreItem, ScoreResult
from proctor_client.trainer.groups import GroupCounts, group_advantages, is_informative
from proctor_client.trainer.proctor import BackgroundScorer
from proctor_client.trainer.schedule import Stage
from proctor_client.trl import completion_text, finish_reason

__all__ = ["JudgedBatch", "JudgedReward", "LeftOut", "ProctorGRPOTrainer", "RecipeCallback"]

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


@dataclass
class LeftOut:
    """One process's rows of a generation batch, in TRL's order, and which of them the loss
    leaves out."""

    prompts: list[Any]
    """Each row's prompt, as TRL passed it to the reward function."""
    completions: list[tuple[int, ...]]
    masked: list[bool]
    tokens: int
    """The left-out completions' tokens over every process: what TRL's token count must lose."""


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
    left_out: LeftOut | None = field(default=None, init=False)
    """This process's rows of the last batch, and those the loss leaves out."""
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
        self.left_out = LeftOut(
            prompts=list(prompts),
            completions=[tuple(int(t) for t in ids) for ids in completion_ids],
            masked=masked[first : first + len(results)],
            tokens=sum(row[4] for row, out in zip(rows, masked, strict=True) if out),
        )
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


RowKey = tuple[tuple[int, ...], tuple[int, ...]]
"""A row's identity that survives TRL's shuffle: its prompt's and its completion's token ids."""


@dataclass
class RowLedger:
    """One generation batch's rows by identity and those to leave out, consumed as the
    micro-batches of a pass over it arrive (each of TRL's `num_iterations` starts it afresh)."""

    rows: Counter[RowKey]
    masked: Counter[RowKey]
    tokens: int
    unseen: Counter[RowKey] = field(init=False)
    pending: Counter[RowKey] = field(init=False)

    def __post_init__(self) -> None:
        self.restart()

    def restart(self) -> None:
        self.unseen, self.pending = Counter(self.rows), Counter(self.masked)

    def kept(self, keys: Sequence[RowKey], zero_advantage: Sequence[bool]) -> list[bool]:
        """Whether each row of a micro-batch stays in the loss. A left-out row has an advantage
        of exactly 0, so only such rows are taken for one; a row no judged row matches raises."""
        if self.unseen.total() == 0:
            self.restart()
        kept = []
        for key, zero in zip(keys, zero_advantage, strict=True):
            if self.unseen[key] == 0:
                raise RuntimeError(
                    "a row of TRL's batch matches none the judge scored (prompt tokens "
                    f"{list(key[0])[:8]}..., completion {list(key[1])[:8]}...)"
                )
            self.unseen[key] -= 1
            out = zero and self.pending[key] > 0
            if out:
                self.pending[key] -= 1
            kept.append(not out)
        if self.unseen.total() == 0 and self.pending.total() > 0:
            raise RuntimeError("completions the judge left out reached TRL with an advantage not 0")
        return kept


def ledger(left_out: LeftOut, prompt_ids: Sequence[Sequence[int]]) -> RowLedger:
    """The ledger of a judged batch whose prompts TRL tokenized as `prompt_ids`."""
    keys = [(tuple(p), c) for p, c in zip(prompt_ids, left_out.completions, strict=True)]
    masked = Counter(key for key, out in zip(keys, left_out.masked, strict=True) if out)
    return RowLedger(Counter(keys), masked, left_out.tokens)


def row_keys(inputs: Mapping[str, Any]) -> list[RowKey]:
    """Each row's identity from TRL's padded tensors: the tokens under the prompt's mask (left
    padding) and under the completion's (right padding)."""
    prompts = _unpadded(inputs["prompt_ids"], inputs["prompt_mask"])
    completions = _unpadded(inputs["completion_ids"], inputs["completion_mask"])
    return list(zip(prompts, completions, strict=True))


def _unpadded(ids: torch.Tensor, mask: torch.Tensor) -> list[tuple[int, ...]]:
    return [
        tuple(row[keep].tolist()) for row, keep in zip(ids.cpu(), mask.cpu().bool(), strict=True)
    ]


def mask_refusals(trainer: GRPOTrainer) -> list[str]:
    """The TRL settings under which a left-out row's identity, its advantage of 0 or its tokens
    in TRL's count (its completion's length) would not hold."""
    problems, config = [], cast(Any, trainer.args)  # a GRPOConfig
    if trainer.tools or trainer.environment_factories is not None or trainer.rollout_func:
        problems.append("tools, environments and rollout_func re-render prompts and mask tokens")
    if config.mask_truncated_completions:
        problems.append("mask_truncated_completions empties a completion's mask before ours")
    if config.multi_objective_aggregation != "sum_then_normalize":
        problems.append("normalize_then_sum moves a left-out completion's advantage off 0")
    return problems


class ProctorGRPOTrainer(GRPOTrainer):
    """GRPOTrainer whose loss leaves out the completions `JudgedReward` masked (see above)."""

    def __init__(self, *, judge: JudgedReward, **kwargs: Any) -> None:
        super().__init__(reward_funcs=[judge], **kwargs)
        self.judge = judge
        self.ledgers: dict[bool, RowLedger] = {}
        """The ledger of the batch being trained on (True) and evaluated on (False)."""
        self.adopted: LeftOut | None = None
        problems = mask_refusals(self)
        if problems:
            raise ValueError("ProctorGRPOTrainer cannot mask completions: " + "; ".join(problems))

    def compute_loss(
        self,
        model: Any,
        inputs: dict[str, Any],
        return_outputs: bool = False,
        num_items_in_batch: Any = None,
    ) -> Any:
        """TRL's loss with the left-out rows' completion mask zeroed and their tokens out of
        the generation batch's token count (what the `dapo`, `cispo` and `vespo` losses divide
        by; the others divide by the mask itself)."""
        book = self.current_ledger()
        zero = (inputs["advantages"] == 0).tolist()
        mask = inputs["completion_mask"]
        keep = torch.tensor(book.kept(row_keys(inputs), zero), dtype=mask.dtype, device=mask.device)
        masked = {
            **inputs,
            "completion_mask": mask * keep.unsqueeze(1),
            "num_items_in_batch": inputs["num_items_in_batch"] - book.tokens,
        }
        return super().compute_loss(model, masked, return_outputs, num_items_in_batch)

    def current_ledger(self) -> RowLedger:
        """The ledger of the batch TRL is on: a batch judged since the last call is its mode's."""
        record = self.judge.left_out
        if record is None:
            raise RuntimeError("compute_loss before the judge scored a batch")
        training = bool(cast(Any, self.model).training)  # TRL's mode
        if record is not self.adopted:
            self.adopted = record
            self.ledgers[training] = ledger(record, self.prompt_ids(record.prompts))
        return self.ledgers[training]

    def prompt_ids(self, prompts: Sequence[Any]) -> list[list[int]]:
        """The token ids TRL 1.16 generates from for `prompts`: its text and chat paths without
        tools or environments (`mask_refusals`); `kept` stops the run on any row they miss."""
        tokenizer: Any = self.processing_class
        if is_conversational({"prompt": prompts[0]}):
            ids = tokenizer.apply_chat_template(
                conversation=list(prompts),
                chat_template=self.chat_template,
                add_generation_prompt=True,
                tokenize=True,
                return_dict=True,
                **cast(dict[str, Any], self.chat_template_kwargs),
            )["input_ids"]
        else:
            ids = tokenizer(text=list(prompts))["input_ids"]
        return [list(row) for row in ids]


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
