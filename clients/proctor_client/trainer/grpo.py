"""A reference GRPO trainer implementing the ProRL recipe, with Proctor as its verifier.

One rollout step (the ProRL review's Algorithm 1), one function each below: `collect_groups`
draws prompts from the stage's mixture, samples G responses to each at the stage's temperature,
scores them through Proctor while the old-policy and reference log-probabilities are computed,
and keeps whole groups whose rewards differ (drawing more prompts, for a bounded number of rounds,
until the batch is full); `assign_advantages` forms group-relative advantages from the shaped
rewards; `update_policy` takes several AdamW updates on minibatches of the batch with the
asymmetric clipped surrogate minus a KL penalty to the reference, every minibatch averaged over
its tokens with one denominator; `validate` scores the validation blend every N steps;
`step_metrics` writes what the step did. Around the steps (Algorithm 2): the stage schedule and
resets of the reference and of the optimizer (separately switchable) at stage boundaries, at
listed steps, or when validation plateaus. `RunState` (state.py) is what a checkpoint holds.

Diagnostics go to OUT/metrics.jsonl and TensorBoard; checkpoints to OUT/checkpoints at every stage
boundary and reset (and every `checkpoint_every` steps), and a run started on an OUT that has one
resumes from the latest, giving the same result as an uninterrupted run.

Under `torchrun` each rank samples and scores its share of the batch and gradients are summed
before every update (distributed.py); rank 0 writes metrics and checkpoints.

What it leaves out, honestly (`--engine trl` runs the same YAML on TRL, which has them):
- FSDP or any sharding: every rank holds the whole policy, reference and optimizer state, so a
  model that does not fit one GPU does not train here;
- rollouts with Hugging Face `generate` only (no vLLM), so the rollout policy is the policy itself
  and old log-probabilities are recomputed rather than taken from an inference engine;
- no sequence packing, no gradient checkpointing, no mixed-precision loss scaling (bf16 weights
  are allowed as they are);
- ProRL's KL coefficient is not given in the review; the default here is a choice, not theirs;
- the plateau rule is ours (patience over validation evaluations); the paper's resets were a
  person's decision.
"""

from __future__ import annotations

import logging
import math
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from proctor_client import ProctorError, ScoreResult
from proctor_client.trainer.config import Args, load_args
from proctor_client.trainer.data import Prompt, PromptSampler
from proctor_client.trainer.distributed import World
from proctor_client.trainer.groups import GroupCounts, group_advantages, is_informative
from proctor_client.trainer.loading import load_model, load_pools, stop_on_sigint
from proctor_client.trainer.metrics import MetricsLog, StepClock, combine_ranks, log_step
from proctor_client.trainer.objective import policy_loss, token_entropy, token_logprobs
from proctor_client.trainer.proctor import BackgroundScorer, preflight
from proctor_client.trainer.resets import reset_optimizer, reset_reference
from proctor_client.trainer.rollout import (
    Sample,
    collate,
    forward_logits,
    generate_groups,
    response_logprobs,
    score_items,
)
from proctor_client.trainer.schedule import Schedule, Stage
from proctor_client.trainer.state import RunState

__all__ = [
    "Args",
    "Rollouts",
    "StepBatch",
    "apply_resets",
    "assign_advantages",
    "collect_groups",
    "load_args",
    "run_scorer",
    "step_metrics",
    "train",
    "update_policy",
    "validate",
    "validation_set",
]

log = logging.getLogger("proctor_client.trainer")

_RANK_SEED = 1000
"""Rank r samples prompts and tokens from seed + 1000 r (rank 0, or a single process: seed)."""


@dataclass
class Rollouts:
    """What sampling and scoring need besides the run's state: the one generation helper the
    training rollouts and the validation blend share."""

    args: Args
    tokenizer: PreTrainedTokenizerBase
    scorer: BackgroundScorer
    pad_id: int

    def sample(
        self, policy: PreTrainedModel, prompts: Sequence[Prompt], group_size: int, stage: Stage
    ) -> list[Sample]:
        """`group_size` responses to each prompt at the stage's temperature and length."""
        return generate_groups(
            policy,
            self.tokenizer,
            prompts,
            group_size=group_size,
            temperature=stage.temperature,
            max_response_tokens=stage.max_response_tokens,
            batch_size=self.args.generation_batch_size,
            chat_template=self.args.chat_template,
        )

    def judge(self, samples: Sequence[Sample], stage: Stage, tag: str) -> list[ScoreResult]:
        """Proctor's results for `samples`, one each, in order (blocking)."""
        items = score_items(samples, stage.max_response_tokens, tag)
        return self.scorer.submit(items, stage.spec).result().results


@dataclass
class StepBatch:
    """One step's accepted groups (judged responses only) and what it took to collect them."""

    accepted: list[list[Sample]] = field(default_factory=list)
    judged: list[Sample] = field(default_factory=list)
    """Every judged response generated this step, accepted or not (the step's reward means)."""
    counts: GroupCounts = field(default_factory=GroupCounts)
    timings: dict[str, float] = field(
        default_factory=lambda: dict.fromkeys(
            ("time_generation", "time_scoring", "time_scoring_and_passes", "time_update"), 0.0
        )
    )


def collect_groups(
    rollouts: Rollouts, run: RunState, stage: Stage, step: int, groups_wanted: int
) -> StepBatch:
    """Dynamic sampling: rounds of G responses to fresh prompts, scored while the old-policy and
    reference passes run, keeping whole informative groups until `groups_wanted` are in."""
    args = rollouts.args
    batch = StepBatch()
    counts = batch.counts
    while len(batch.accepted) < groups_wanted and counts.rounds < args.max_sampling_rounds:
        missing = groups_wanted - len(batch.accepted)
        prompts = run.sampler.sample(math.ceil(missing * args.oversample), stage.mixture)
        began = time.perf_counter()
        samples = rollouts.sample(run.policy, prompts, stage.group_size, stage)
        batch.timings["time_generation"] += time.perf_counter() - began

        # scoring runs in the background while the two forward passes run here
        began = time.perf_counter()
        items = score_items(samples, stage.max_response_tokens, f"{step}-{counts.rounds}")
        future = rollouts.scorer.submit(items, stage.spec)
        if not args.overlap_scoring:
            future.result()
        passes = (stage.temperature, args.micro_batch_size, rollouts.pad_id)
        old = response_logprobs(run.policy, samples, *passes)
        ref = response_logprobs(run.reference, samples, *passes)
        scored = future.result()
        batch.timings["time_scoring"] += scored.seconds
        batch.timings["time_scoring_and_passes"] += time.perf_counter() - began
        counts.rounds += 1

        for sample, old_logp, ref_logp, result in zip(
            samples, old, ref, scored.results, strict=True
        ):
            sample.old_logp, sample.ref_logp, sample.result = old_logp, ref_logp, result
            counts.by_status[result.status] = counts.by_status.get(result.status, 0) + 1
        for group in range(len(prompts)):
            members = samples[group * stage.group_size : (group + 1) * stage.group_size]
            _keep_or_drop(batch, members, args.dynamic_sampling_on, groups_wanted)
        run.tokens_generated_total += sum(len(s.response_ids) for s in samples)
    return batch


def _keep_or_drop(batch: StepBatch, members: list[Sample], on: str, groups_wanted: int) -> None:
    """One group's fate: accepted (its judged responses), surplus, or rejected as uninformative.
    `infra_error` and `invalid` responses are left out first: neither zeros nor ones."""
    ok = [s for s in members if s.result is not None and s.result.status == "ok"]
    batch.judged.extend(ok)
    batch.counts.unjudged_responses += len(members) - len(ok)
    tokens = sum(len(s.response_ids) for s in members)
    measure = _reward if on == "reward" else _score
    informative = is_informative([measure(s.result) for s in ok if s.result])
    if informative and len(batch.accepted) < groups_wanted:
        batch.accepted.append(ok)
        batch.counts.add(True, tokens)
    elif informative:
        batch.counts.surplus_groups += 1
        batch.counts.surplus_tokens += tokens
    else:
        batch.counts.add(False, tokens)


def assign_advantages(groups: Sequence[Sequence[Sample]], std: Any) -> None:
    """Group-relative advantages on the shaped reward, written into each sample."""
    for members in groups:
        rewards = [_reward(s.result) for s in members if s.result]
        for sample, advantage in zip(members, group_advantages(rewards, std), strict=True):
            sample.advantage = advantage


def update_policy(
    run: RunState,
    groups: Sequence[Sequence[Sample]],
    stage: Stage,
    args: Args,
    world: World,
    pad_id: int,
) -> dict[str, float]:
    """Several AdamW updates, one per minibatch of groups, each averaged over the minibatch's
    tokens on every rank together; the summed diagnostics."""
    minibatch = args.prompts_per_minibatch // world.size
    device = next(run.policy.parameters()).device
    sums: dict[str, float] = defaultdict(float)
    for update in range(args.prompts_per_step // args.prompts_per_minibatch):
        rows = [s for g in groups[update * minibatch : (update + 1) * minibatch] for s in g]
        (denominator,) = world.sum([float(sum(len(s.response_ids) for s in rows))])
        if denominator == 0:
            continue  # no rank has groups left for this minibatch
        run.optimizer.zero_grad(set_to_none=True)
        for m in range(0, len(rows), args.micro_batch_size):
            micro = rows[m : m + args.micro_batch_size]
            batch = collate(micro, pad_id, device)
            logits = forward_logits(run.policy, batch)
            logp = token_logprobs(logits, batch.response_ids, stage.temperature)
            parts = policy_loss(
                logp,
                _padded([s.old_logp for s in micro], logp),
                _padded([s.ref_logp for s in micro], logp),
                torch.tensor([s.advantage for s in micro], device=logp.device),
                batch.response_mask,
                denominator,
                eps_low=args.eps_low,
                eps_high=args.eps_high,
                kl_coef=args.kl_coef,
                kl_estimator=args.kl_estimator,
            )
            parts.loss.backward()  # type: ignore[no-untyped-call]
            sums["loss"] += float(parts.loss.detach())
            sums["kl"] += parts.kl_sum
            sums["clip_low"] += parts.clip_low_count
            sums["clip_high"] += parts.clip_high_count
            sums["tokens"] += parts.tokens
            entropy = token_entropy(logits, stage.temperature)
            sums["entropy"] += float((entropy * batch.response_mask).sum())
        world.sum_gradients(run.policy)
        norm = torch.nn.utils.clip_grad_norm_(run.policy.parameters(), args.max_grad_norm)
        sums["grad_norm"] += float(norm)
        sums["updates"] += 1
        run.optimizer.step()
        run.scheduler.step()
    return sums


def validate(
    rollouts: Rollouts,
    run: RunState,
    prompts: Sequence[Prompt],
    stage: Stage,
    step: int,
    world: World,
) -> dict[str, float | None]:
    """pass@1 and the mean score of the validation blend, over its judged responses on every
    rank; the plateau rule observes the pass@1."""
    samples = rollouts.sample(run.policy, prompts, rollouts.args.validation_samples, stage)
    results = [r for r in rollouts.judge(samples, stage, f"val-{step}") if r.status == "ok"]
    successes, score_sum, judged = world.sum(
        [
            float(sum(bool(r.success) for r in results)),
            sum(_score(r) for r in results),
            float(len(results)),
        ]
    )
    pass1 = successes / judged if judged else None
    if run.plateau is not None and pass1 is not None and run.plateau.observe(pass1):
        run.plateau_fired = True
        log.info("step %d: validation pass@1 has plateaued; reset next step", step)
    return {"val_pass1": pass1, "val_score": score_sum / judged if judged else None}


def step_metrics(batch: StepBatch, sums: dict[str, float], run: RunState) -> dict[str, Any]:
    """This rank's figures of one step (the caller combines the ranks'): reward, score and parse
    rate over judged responses, the update's loss, KL, entropy and clipping per token, what
    dynamic sampling accepted and rejected, per-domain rewards and per-penalty means."""
    judged = batch.judged
    results = [s.result for s in judged if s.result is not None]  # all of them
    counts = batch.counts
    tokens = max(1.0, sums["tokens"])
    updates = max(1.0, sums["updates"])
    metrics: dict[str, Any] = {
        "reward_mean": _mean([_reward(r) for r in results]),
        "score_mean": _mean([_score(r) for r in results]),
        "parse_rate": _mean([float(bool(r.parsed)) for r in results]),
        "response_length": _mean([float(len(s.response_ids)) for s in judged]),
        "stop_rate": _mean([float(s.finish_reason == "stop") for s in judged]),
        "loss": sums["loss"] / updates,
        "kl": sums["kl"] / tokens,
        "entropy": sums["entropy"] / tokens,
        "clip_low": sums["clip_low"] / tokens,
        "clip_high": sums["clip_high"] / tokens,
        "grad_norm": sums["grad_norm"] / updates,
        "updates": int(sums["updates"]),
        "lr": run.optimizer.param_groups[0]["lr"],
        **counts.metrics(),
        "tokens_generated_total": run.tokens_generated_total,
        "sampling_rounds": counts.rounds,
        "unjudged": counts.unjudged_responses,
        **batch.timings,
    }
    for status, n in counts.by_status.items():
        metrics[f"status/{status}"] = n
    by_domain: dict[str, list[float]] = defaultdict(list)
    penalties: dict[str, float] = defaultdict(float)
    for s, r in zip(judged, results, strict=True):
        by_domain[s.prompt.domain].append(_reward(r))
        for name, amount in r.penalties.items():
            penalties[name] += amount
    for domain, values in by_domain.items():
        metrics[f"reward/{domain}"] = _mean(values)
    for name, amount in penalties.items():
        metrics[f"penalty/{name}"] = amount / max(1, len(judged))
    return metrics


def apply_resets(args: Args, schedule: Schedule, run: RunState, step: int) -> str:
    """Reset the reference and/or the optimizer (as the run's switches say) when `step` opens a
    stage with `reset_at_start`, is listed, or follows a plateau; the causes, comma-separated."""
    stage = schedule.stages[schedule.index_at(step)]
    due = {
        "stage": schedule.begins_at(step) and stage.reset_at_start,
        "listed": step in args.reset_steps,
        "plateau": run.plateau_fired,
    }
    causes = [cause for cause, now in due.items() if now]
    if causes:
        if args.reset_reference:
            reset_reference(run.policy, run.reference)
        if args.reset_optimizer:
            reset_optimizer(run.optimizer)
        run.plateau_fired = False
        log.info("step %d: reset (%s)", step, ", ".join(causes))
    return ",".join(causes)


def train(
    args: Args,
    url: str,
    out: Path,
    stop_after: int | None = None,
    api_key: str | None = None,
) -> Path:
    """Run (or resume) the schedule against the Proctor at `url`, writing to `out`; with
    `stop_after`, stop once that many steps are done. The path of the last checkpoint."""
    world = World.from_environment(args.device)  # one process, or one rank under torchrun
    if args.prompts_per_minibatch % world.size:
        raise ValueError(
            f"prompts_per_minibatch ({args.prompts_per_minibatch}) must be a multiple of the "
            f"number of ranks ({world.size})"
        )
    preflight(url, api_key, [s.spec for s in args.stages])  # before the model is built
    out.mkdir(parents=True, exist_ok=True)
    if args.torch_threads is not None:
        torch.set_num_threads(args.torch_threads)
    schedule = Schedule(args.stages)
    torch.manual_seed(args.seed)  # the same weights on every rank, even those made at random
    policy, tokenizer = load_model(args, world.device(args.device))
    torch.manual_seed(args.seed + _RANK_SEED * world.rank)  # ranks sample differently
    pools = load_pools(args.data, url, args.seed)
    run = RunState.create(args, policy, PromptSampler(pools, args.seed + _RANK_SEED * world.rank))
    held_out = validation_set(args, pools, url)[world.rank :: world.size]
    checkpoint = run.resume(out, world)
    metrics_log = MetricsLog(out, run.completed_steps, args.tensorboard) if world.main else None
    scorer = run_scorer(args, url, api_key)
    pad = tokenizer.pad_token_id
    rollouts = Rollouts(args, tokenizer, scorer, tokenizer.eos_token_id if pad is None else pad)
    last_checkpoint = checkpoint if checkpoint is not None else run.save(out, world)
    end_step = schedule.total_steps if stop_after is None else min(stop_after, schedule.total_steps)
    clock = StepClock(run.completed_steps, end_step)
    try:
        with stop_on_sigint() as stop_requested:
            for step in range(run.completed_steps, end_step):
                began = time.perf_counter()
                stage = schedule.stages[schedule.index_at(step)]
                reset = apply_resets(args, schedule, run, step)
                wanted = args.prompts_per_step // world.size
                batch = collect_groups(rollouts, run, stage, step, wanted)
                assign_advantages(batch.accepted, args.advantage_std)
                update_began = time.perf_counter()
                sums = update_policy(run, batch.accepted, stage, args, world, rollouts.pad_id)
                batch.timings["time_update"] = time.perf_counter() - update_began
                metrics = {"step": step, "stage": stage.name, "reset": reset}
                if args.validation_every and (step + 1) % args.validation_every == 0:
                    metrics.update(validate(rollouts, run, held_out, stage, step, world))
                metrics.update(step_metrics(batch, sums, run))
                metrics = combine_ranks(world.gather(metrics))
                run.count_device_time(metrics, world.size, time.perf_counter() - began)
                if metrics_log is not None:
                    metrics_log.write(metrics)
                log_step(metrics, clock.tick(), end_step)
                run.completed_steps = done = step + 1
                due = done < schedule.total_steps and (
                    schedule.begins_at(done) or done in args.reset_steps or run.plateau_fired
                )
                periodic = args.checkpoint_every and done % args.checkpoint_every == 0
                (stopping,) = world.sum([float(stop_requested[0])])  # any rank asked
                if due or periodic or done == end_step or stopping:
                    last_checkpoint = run.save(out, world)
                if stopping:
                    break
    finally:
        scorer.close()
        if metrics_log is not None:
            metrics_log.close()
    return last_checkpoint


def validation_set(args: Args, pools: dict[str, list[Prompt]], url: str) -> list[Prompt]:
    """The validation blend, drawn once: from the held-out `validation_data` when given (equal
    weights unless `validation_mixture` says), else from the training pools."""
    if not args.validation_every:
        return []
    if args.validation_data:
        pools = load_pools(args.validation_data, url, args.seed)
        mixture = args.validation_mixture or dict.fromkeys(args.validation_data, 1.0)
    else:
        mixture = args.validation_mixture or args.stages[0].mixture
    return PromptSampler(pools, seed=args.seed + 1).sample(args.validation_prompts, mixture)


def run_scorer(args: Args, url: str, api_key: str | None) -> BackgroundScorer:
    """The run's scorer, as `args` sets it (both engines score through this one)."""
    return BackgroundScorer(
        url,
        pause_s=args.scoring_pause_s,
        max_pauses=args.scoring_max_pauses,
        client_retries=args.scoring_retries,
        chunk_size=args.scoring_chunk_size,
        max_concurrency=args.scoring_concurrency,
        api_key=api_key,
        reached=True,  # the preflight had its answers
    )


def _score(result: ScoreResult) -> float:
    """An `ok` result's raw task score (the contract says it has one)."""
    if result.score is None:
        raise ProctorError(f"result {result.id} is ok but has no score")
    return result.score


def _reward(result: ScoreResult) -> float:
    """An `ok` result's shaped reward (the contract says it has one)."""
    if result.reward is None:
        raise ProctorError(f"result {result.id} is ok but has no reward")
    return result.reward


def _padded(rows: list[torch.Tensor | None], like: torch.Tensor) -> torch.Tensor:
    """Per-sample token tensors right-padded with 0 into one tensor shaped as `like`."""
    width = like.shape[1]
    if any(row is None for row in rows):
        raise ValueError("a sample reached the update without its rollout log-probabilities")
    padded = [
        torch.nn.functional.pad(row, (0, width - len(row))) for row in rows if row is not None
    ]
    return torch.stack(padded).to(like.device)


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None
