"""A reference GRPO trainer implementing the ProRL recipe, with Proctor as its verifier.

One rollout step (the ProRL review's Algorithm 1): draw prompts from the stage's mixture, sample G
responses to each at the stage's temperature, score them through Proctor while the old-policy and
reference log-probabilities are computed, keep whole groups whose raw task scores differ (drawing
more prompts, for a bounded number of rounds, until the batch is full), form group-relative
advantages from the shaped rewards, and take several AdamW updates on minibatches of the batch with
the asymmetric clipped surrogate minus a KL penalty to the reference, every minibatch averaged over
its tokens with one denominator. Around the steps (Algorithm 2): a stage schedule, a validation
blend scored every N steps, and resets of the reference and of the optimizer (separately
switchable) at stage boundaries, at listed steps, or when validation plateaus.

Diagnostics go to OUT/metrics.jsonl and TensorBoard; checkpoints to OUT/checkpoints at every stage
boundary and reset (and every `checkpoint_every` steps), and a run started on an OUT that has one
resumes from the latest, giving the same result as an uninterrupted run.

Under `torchrun` each rank samples and scores its share of the batch and gradients are summed
before every update (distributed.py); rank 0 writes metrics and checkpoints.

What it leaves out, honestly:
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

import copy
import dataclasses
import logging
import math
import random
import signal
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, Literal

import torch
from pydantic import ConfigDict, Field, TypeAdapter, ValidationError, model_validator
from pydantic.dataclasses import dataclass
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from proctor_client import ProctorError, ScoreResult
from proctor_client._defaults import CHUNK_SIZE
from proctor_client.trainer import tiny
from proctor_client.trainer.checkpoint import (
    checkpoint_path,
    latest_checkpoint,
    load_checkpoint,
    save_checkpoint,
)
from proctor_client.trainer.data import Prompt, PromptSampler, load_jsonl
from proctor_client.trainer.distributed import World
from proctor_client.trainer.groups import GroupCounts, StdKind, group_advantages, is_informative
from proctor_client.trainer.metrics import MetricsLog, combine_ranks
from proctor_client.trainer.objective import KLEstimator, policy_loss, token_entropy, token_logprobs
from proctor_client.trainer.proctor import BackgroundScorer, puzzle_prompts
from proctor_client.trainer.resets import PlateauRule, reset_optimizer, reset_reference
from proctor_client.trainer.rollout import (
    Sample,
    collate,
    forward_logits,
    generate_groups,
    response_logprobs,
    score_items,
)
from proctor_client.trainer.schedule import Schedule, Source, Stage, read_yaml

__all__ = ["Args", "load_args", "train"]

log = logging.getLogger("proctor_client.trainer")


@dataclass(config=ConfigDict(extra="forbid"))
class Args:
    """Everything a run is configured by (the YAML file's top-level keys)."""

    stages: list[Stage]
    """The stage schedule, in order: steps, response length, group size, temperature, mixture,
    reward spec, and whether a reset opens the stage."""
    data: dict[str, Source]
    """Named prompt sources the stages' mixtures (and the validation blend) draw from."""
    model: str = "tiny-digits"
    """A Hugging Face causal LM (a local directory or a cached hub name), or `tiny-digits`: the
    learning test's two-layer model and word-level tokenizer, built in code with random weights."""
    seed: int = 0
    """Seeds the model's initialisation (tiny-digits), sampling, and prompt draws."""
    device: str = "cpu"
    dtype: Literal["float32", "bfloat16"] = "float32"
    """The policy's and reference's weight dtype."""
    torch_threads: int | None = None
    """CPU threads for torch (None: torch's default)."""
    total_steps: int | None = None
    """If given, must equal the stages' steps added up (a check on the schedule)."""
    prompts_per_step: Annotated[int, Field(ge=1)] = 256
    """Accepted prompt groups per rollout step (ProRL: 256)."""
    prompts_per_minibatch: Annotated[int, Field(ge=1)] = 64
    """Groups per gradient update: prompts_per_step / this updates per step (ProRL: 64, four)."""
    micro_batch_size: Annotated[int, Field(ge=1)] = 16
    """Responses per forward pass; a minibatch's gradient accumulates over its micro-batches."""
    generation_batch_size: Annotated[int, Field(ge=1)] = 256
    """Responses per `generate` call."""
    oversample: Annotated[float, Field(ge=1.0)] = 1.5
    """Prompts drawn per round, as a multiple of the groups still missing from the batch."""
    max_sampling_rounds: Annotated[int, Field(ge=1)] = 4
    """Generation rounds per step before training on a batch that is not full."""
    learning_rate: Annotated[float, Field(gt=0)] = 2e-6
    """AdamW's learning rate after warm-up (ProRL: 2e-6, constant)."""
    warmup_updates: Annotated[int, Field(ge=0)] = 0
    """Linear warm-up over this many optimizer updates; resets do not restart it."""
    weight_decay: Annotated[float, Field(ge=0)] = 0.01
    adam_betas: tuple[float, float] = (0.9, 0.999)
    max_grad_norm: Annotated[float, Field(gt=0)] = 1.0
    eps_low: Annotated[float, Field(ge=0, lt=1)] = 0.2
    """The clip's lower bound: ratio 1 - eps_low (ProRL: 0.2)."""
    eps_high: Annotated[float, Field(ge=0)] = 0.4
    """The clip's upper bound: ratio 1 + eps_high (ProRL: 0.4, DAPO's clip-higher)."""
    kl_coef: Annotated[float, Field(ge=0)] = 1e-3
    """Weight of the KL penalty to the reference in the loss."""
    kl_estimator: KLEstimator = "k2"
    """Per-token KL estimator: k2 (0.5 log-ratio squared; its gradient is the KL's), k1 or k3."""
    advantage_std: StdKind = "population"
    """A group's spread for advantages: population (divide by G) or bessel (G - 1)."""
    reset_reference: bool = True
    """Whether a reset copies the policy into the reference."""
    reset_optimizer: bool = True
    """Whether a reset reinitialises the optimizer state (the learning rate carries on)."""
    reset_steps: list[int] = dataclasses.field(default_factory=list)
    """Steps (from 0) that begin with a reset, besides stages with reset_at_start."""
    plateau_patience: Annotated[int | None, Field(ge=1)] = None
    """Reset after this many validation evaluations in a row without a new best (None: never)."""
    plateau_min_delta: Annotated[float, Field(ge=0)] = 0.0
    """How much a validation pass@1 must beat the best by to count as an improvement."""
    validation_every: Annotated[int, Field(ge=0)] = 0
    """Score the validation blend after every this many steps (0: never)."""
    validation_mixture: dict[str, float] | None = None
    """The validation blend's sources and weights (None: the first stage's mixture)."""
    validation_prompts: Annotated[int, Field(ge=1)] = 64
    """Prompts in the validation blend, drawn once at the start."""
    validation_samples: Annotated[int, Field(ge=1)] = 1
    """Responses per validation prompt; pass@1 is their mean success."""
    checkpoint_every: Annotated[int, Field(ge=0)] = 0
    """Also checkpoint after every this many steps (0: only at stage boundaries and resets)."""
    chat_template: bool = False
    """Wrap each prompt in the tokenizer's chat template as a user message."""
    overlap_scoring: bool = True
    """Run the old-policy and reference passes while Proctor scores (False: one after the other,
    for measuring what the overlap saves)."""
    scoring_chunk_size: Annotated[int, Field(ge=1)] = CHUNK_SIZE
    """Items per /v1/score request; a larger batch is split into chunks sent concurrently (behind
    a load balancer, about the batch over the number of Proctor replicas)."""
    scoring_concurrency: Annotated[int, Field(ge=1)] = 4
    """Chunks in flight at once (behind a load balancer, about the number of Proctor replicas)."""
    scoring_retries: Annotated[int, Field(ge=0)] = 5
    """The SDK's own retries of a request (connection errors, 429, 503) before the step pauses."""
    scoring_pause_s: Annotated[float, Field(gt=0)] = 10.0
    """How long a step pauses when Proctor does not answer, before sending again."""
    scoring_max_pauses: Annotated[int, Field(ge=1)] = 30
    """Pauses allowed per scoring call before the run stops (to resume from its checkpoint)."""
    tensorboard: bool = True

    @model_validator(mode="after")
    def _adds_up(self) -> Args:
        Schedule.check(self.stages, self.data, self.total_steps, self.reset_steps)
        if self.prompts_per_step % self.prompts_per_minibatch:
            raise ValueError(
                f"prompts_per_step ({self.prompts_per_step}) must be a multiple of "
                f"prompts_per_minibatch ({self.prompts_per_minibatch})"
            )
        unknown = sorted(set(self.validation_mixture or {}) - set(self.data))
        if unknown:
            raise ValueError(f"validation_mixture: unknown data sources {unknown}")
        if self.plateau_patience is not None and not self.validation_every:
            raise ValueError("plateau_patience needs validation_every (the rule reads validation)")
        return self


def load_args(path: Path, **overrides: Any) -> Args:
    """The run's arguments from a YAML file; an unknown key or a bad value raises ValueError
    naming the field."""
    raw = {**read_yaml(path), **overrides}
    try:
        args = TypeAdapter(Args).validate_python(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(config)'}: {e['msg']}" for e in exc.errors()
        )
        raise ValueError(f"{path}: {problems}") from None
    # prompt files are named relative to the config that names them
    for name, source in args.data.items():
        if source.path is not None and not source.path.is_absolute():
            args.data[name] = source.model_copy(update={"path": path.parent / source.path})
    return args


def _load_model(args: Args, device: str) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    tokenizer: PreTrainedTokenizerBase
    model: PreTrainedModel
    if args.model == "tiny-digits":
        tokenizer = tiny.tiny_tokenizer()
        model = tiny.tiny_model(tokenizer, args.seed)
    else:
        tokenizer = AutoTokenizer.from_pretrained(args.model)
        model = AutoModelForCausalLM.from_pretrained(args.model)
    dtype = torch.bfloat16 if args.dtype == "bfloat16" else torch.float32
    moved: PreTrainedModel = model.to(device=device, dtype=dtype)  # type: ignore[call-arg]
    return moved, tokenizer


def _load_pools(args: Args, url: str) -> dict[str, list[Prompt]]:
    pools: dict[str, list[Prompt]] = {}
    for name, source in sorted(args.data.items()):
        if source.path is not None:  # kind jsonl (the Source validator pairs them)
            pools[name] = load_jsonl(source.path)
        elif source.task is not None:  # kind puzzle
            pools[name] = puzzle_prompts(url, source.task, source.config, source.size, args.seed)
        else:
            pools[name] = tiny.digit_prompts(source.size)
    return pools


@contextmanager
def _stop_on_sigint() -> Iterator[list[bool]]:
    """A first Ctrl-C asks the loop to stop after the current step (with a checkpoint); a second
    one interrupts at once."""
    requested = [False]

    def handler(signum: int, frame: object) -> None:
        if requested[0]:
            raise KeyboardInterrupt
        requested[0] = True
        log.warning("interrupt: stopping after this step, with a checkpoint (again to abort)")

    try:
        previous = signal.signal(signal.SIGINT, handler)
    except ValueError:  # not the main thread: no handler, Ctrl-C behaves as usual
        yield requested
        return
    try:
        yield requested
    finally:
        signal.signal(signal.SIGINT, previous)


def train(
    args: Args,
    url: str,
    out: Path,
    stop_after: int | None = None,
    api_key: str | None = None,
) -> Path:
    """Run (or resume) the schedule against the Proctor at `url`, writing to `out`; with
    `stop_after`, stop once that many steps are done. The path of the last checkpoint."""
    # ---- setup --------------------------------------------------------------------------------
    world = World.from_environment(args.device)  # one process, or one rank under torchrun
    device = world.device(args.device)
    if args.prompts_per_minibatch % world.size:
        raise ValueError(
            f"prompts_per_minibatch ({args.prompts_per_minibatch}) must be a multiple of the "
            f"number of ranks ({world.size})"
        )
    groups_per_rank = args.prompts_per_step // world.size
    minibatch_per_rank = args.prompts_per_minibatch // world.size
    updates_per_step = args.prompts_per_step // args.prompts_per_minibatch
    out.mkdir(parents=True, exist_ok=True)
    if args.torch_threads is not None:
        torch.set_num_threads(args.torch_threads)
    schedule = Schedule(args.stages)
    torch.manual_seed(args.seed)  # the same weights on every rank, even those made at random
    policy, tokenizer = _load_model(args, device)
    torch.manual_seed(args.seed + _RANK_SEED * world.rank)  # ranks sample differently
    # dropout off: the ratio must compare deterministic policies
    policy.eval()  # type: ignore[no-untyped-call]
    reference = copy.deepcopy(policy).requires_grad_(False)
    pad_id = (
        tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    )
    optimizer = torch.optim.AdamW(
        policy.parameters(),
        lr=args.learning_rate,
        betas=args.adam_betas,
        weight_decay=args.weight_decay,
    )
    warmup = args.warmup_updates
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda update: min(1.0, (update + 1) / warmup) if warmup else 1.0
    )
    pools = _load_pools(args, url)
    sampler = PromptSampler(pools, seed=args.seed + _RANK_SEED * world.rank)
    validation_mixture = args.validation_mixture or args.stages[0].mixture
    validation_set = PromptSampler(pools, seed=args.seed + 1).sample(
        args.validation_prompts, validation_mixture
    )[world.rank :: world.size]
    plateau = PlateauRule(args.plateau_patience) if args.plateau_patience else None
    if plateau is not None:
        plateau.min_delta = args.plateau_min_delta
    plateau_fired = False
    tokens_generated_total = 0

    # ---- resume -------------------------------------------------------------------------------
    start_step = 0
    checkpoint = latest_checkpoint(out)
    if checkpoint is not None:
        state = load_checkpoint(checkpoint)
        if len(state["ranks"]) != world.size:
            raise ValueError(
                f"{checkpoint} was written by {len(state['ranks'])} ranks, not {world.size}"
            )
        policy.load_state_dict(state["policy"])
        reference.load_state_dict(state["reference"])
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        _set_rank_state(state["ranks"][world.rank], sampler)
        if plateau is not None:
            plateau.load_state_dict(state["plateau"])
        plateau_fired = state["plateau_fired"]
        tokens_generated_total = state["ranks"][world.rank]["tokens_generated_total"]
        start_step = state["completed_steps"]
        log.info("resuming from %s (%d steps done)", checkpoint, start_step)

    def save(completed: int) -> Path:
        # every rank's random generators, for a resume with the same number of ranks
        mine = _rank_state(sampler, device.startswith("cuda"))
        ranks = world.gather({**mine, "tokens_generated_total": tokens_generated_total})
        checksums = world.gather(_checksum(policy))
        if len(set(checksums)) > 1:
            raise RuntimeError(f"the ranks' weights have diverged (checksums {checksums})")
        if not world.main:
            return checkpoint_path(out, completed)
        return save_checkpoint(
            out,
            completed,
            {
                "policy": policy.state_dict(),
                "reference": reference.state_dict(),
                "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(),
                "ranks": ranks,
                "plateau": plateau.state_dict() if plateau is not None else None,
                "plateau_fired": plateau_fired,
            },
        )

    metrics_log = (
        MetricsLog(out, resume_from_step=start_step, tensorboard=args.tensorboard)
        if world.main
        else None
    )
    scorer = BackgroundScorer(
        url,
        pause_s=args.scoring_pause_s,
        max_pauses=args.scoring_max_pauses,
        client_retries=args.scoring_retries,
        chunk_size=args.scoring_chunk_size,
        max_concurrency=args.scoring_concurrency,
        api_key=api_key,
    )
    last_checkpoint = checkpoint if checkpoint is not None else save(start_step)
    end_step = schedule.total_steps if stop_after is None else min(stop_after, schedule.total_steps)
    try:
        with _stop_on_sigint() as stop_requested:
            for step in range(start_step, end_step):
                stage = schedule.stages[schedule.index_at(step)]
                metrics: dict[str, Any] = {"step": step, "stage": stage.name}

                # ---- resets: stage boundary, listed step, or plateau ------------------------
                causes = [
                    cause
                    for cause, due in (
                        ("stage", schedule.begins_at(step) and stage.reset_at_start),
                        ("listed", step in args.reset_steps),
                        ("plateau", plateau_fired),
                    )
                    if due
                ]
                if causes:
                    if args.reset_reference:
                        reset_reference(policy, reference)
                    if args.reset_optimizer:
                        reset_optimizer(optimizer)
                    plateau_fired = False
                    log.info("step %d: reset (%s)", step, ", ".join(causes))
                metrics["reset"] = ",".join(causes)

                # ---- rollouts with dynamic sampling: whole groups, judged on raw score ------
                counts = GroupCounts()
                accepted: list[list[Sample]] = []
                judged: list[Sample] = []
                time_generation = time_scoring = time_rollout_passes = 0.0
                while len(accepted) < groups_per_rank and counts.rounds < args.max_sampling_rounds:
                    missing = groups_per_rank - len(accepted)
                    prompts = sampler.sample(math.ceil(missing * args.oversample), stage.mixture)
                    began = time.perf_counter()
                    samples = generate_groups(
                        policy,
                        tokenizer,
                        prompts,
                        group_size=stage.group_size,
                        temperature=stage.temperature,
                        max_response_tokens=stage.max_response_tokens,
                        batch_size=args.generation_batch_size,
                        chat_template=args.chat_template,
                    )
                    time_generation += time.perf_counter() - began

                    # scoring runs in the background while the two forward passes run here
                    began = time.perf_counter()
                    items = score_items(
                        samples, stage.max_response_tokens, f"{step}-{counts.rounds}"
                    )
                    future = scorer.submit(items, stage.spec)
                    if not args.overlap_scoring:
                        future.result()
                    old = response_logprobs(
                        policy, samples, stage.temperature, args.micro_batch_size, pad_id
                    )
                    ref = response_logprobs(
                        reference, samples, stage.temperature, args.micro_batch_size, pad_id
                    )
                    scored = future.result()
                    results = scored.results
                    time_scoring += scored.seconds
                    time_rollout_passes += time.perf_counter() - began
                    counts.rounds += 1

                    for sample, old_logp, ref_logp, result in zip(
                        samples, old, ref, results, strict=True
                    ):
                        sample.old_logp, sample.ref_logp, sample.result = old_logp, ref_logp, result
                        counts.by_status[result.status] = counts.by_status.get(result.status, 0) + 1
                    for group in range(len(prompts)):
                        members = samples[group * stage.group_size : (group + 1) * stage.group_size]
                        ok = [
                            s for s in members if s.result is not None and s.result.status == "ok"
                        ]
                        judged.extend(ok)
                        counts.unjudged_responses += len(members) - len(ok)
                        tokens = sum(len(s.response_ids) for s in members)
                        informative = is_informative([_score(s.result) for s in ok if s.result])
                        if informative and len(accepted) < groups_per_rank:
                            accepted.append(ok)  # infra_error and invalid rows are masked out
                            counts.add(True, tokens)
                        elif informative:
                            counts.surplus_groups += 1
                            counts.surplus_tokens += tokens
                        else:
                            counts.add(False, tokens)
                    tokens_generated_total += sum(len(s.response_ids) for s in samples)

                # ---- advantages: group-relative, on the shaped reward -----------------------
                for group_samples in accepted:
                    rewards = [_reward(s.result) for s in group_samples if s.result]
                    for s, a in zip(
                        group_samples, group_advantages(rewards, args.advantage_std), strict=True
                    ):
                        s.advantage = a

                # ---- update: minibatches of groups, one token denominator each -------------
                began = time.perf_counter()
                sums: dict[str, float] = defaultdict(float)
                for update in range(updates_per_step):
                    first = update * minibatch_per_rank
                    rows = [s for g in accepted[first : first + minibatch_per_rank] for s in g]
                    # one denominator: the minibatch's tokens on every rank together
                    (denominator,) = world.sum([float(sum(len(s.response_ids) for s in rows))])
                    if denominator == 0:
                        continue  # no rank has groups left for this minibatch
                    optimizer.zero_grad(set_to_none=True)
                    for m in range(0, len(rows), args.micro_batch_size):
                        micro = rows[m : m + args.micro_batch_size]
                        batch = collate(micro, pad_id, torch.device(device))
                        logits = forward_logits(policy, batch)
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
                    world.sum_gradients(policy)
                    sums["grad_norm"] += float(
                        torch.nn.utils.clip_grad_norm_(policy.parameters(), args.max_grad_norm)
                    )
                    sums["updates"] += 1
                    optimizer.step()
                    scheduler.step()
                time_update = time.perf_counter() - began

                # ---- validation blend and the plateau rule ---------------------------------
                if args.validation_every and (step + 1) % args.validation_every == 0:
                    val = generate_groups(
                        policy,
                        tokenizer,
                        validation_set,
                        group_size=args.validation_samples,
                        temperature=stage.temperature,
                        max_response_tokens=stage.max_response_tokens,
                        batch_size=args.generation_batch_size,
                        chat_template=args.chat_template,
                    )
                    val_items = score_items(val, stage.max_response_tokens, f"val-{step}")
                    val_results = [
                        r
                        for r in scorer.submit(val_items, stage.spec).result().results
                        if r.status == "ok"
                    ]
                    successes, score_sum, judged_count = world.sum(
                        [
                            float(sum(bool(r.success) for r in val_results)),
                            sum(_score(r) for r in val_results),
                            float(len(val_results)),
                        ]
                    )
                    pass1 = successes / judged_count if judged_count else None
                    metrics["val_pass1"] = pass1
                    metrics["val_score"] = score_sum / judged_count if judged_count else None
                    if plateau is not None and pass1 is not None and plateau.observe(pass1):
                        plateau_fired = True
                        log.info("step %d: validation pass@1 has plateaued; reset next step", step)

                # ---- diagnostics -----------------------------------------------------------
                ok_results = [s.result for s in judged if s.result is not None]  # all of them
                trained_tokens = max(1.0, sums["tokens"])
                metrics.update(
                    reward_mean=_mean([_reward(r) for r in ok_results]),
                    score_mean=_mean([_score(r) for r in ok_results]),
                    parse_rate=_mean([float(bool(r.parsed)) for r in ok_results]),
                    response_length=_mean([float(len(s.response_ids)) for s in judged]),
                    stop_rate=_mean([float(s.finish_reason == "stop") for s in judged]),
                    loss=sums["loss"] / max(1.0, sums["updates"]),
                    kl=sums["kl"] / trained_tokens,
                    entropy=sums["entropy"] / trained_tokens,
                    clip_low=sums["clip_low"] / trained_tokens,
                    clip_high=sums["clip_high"] / trained_tokens,
                    grad_norm=sums["grad_norm"] / max(1.0, sums["updates"]),
                    updates=int(sums["updates"]),
                    lr=optimizer.param_groups[0]["lr"],
                    groups_accepted=counts.accepted_groups,
                    groups_rejected=counts.rejected_groups,
                    groups_surplus=counts.surplus_groups,
                    tokens_accepted=counts.accepted_tokens,
                    tokens_rejected=counts.rejected_tokens,
                    tokens_surplus=counts.surplus_tokens,
                    tokens_generated_total=tokens_generated_total,
                    sampling_rounds=counts.rounds,
                    unjudged=counts.unjudged_responses,
                    time_generation=time_generation,
                    time_scoring=time_scoring,
                    time_scoring_and_passes=time_rollout_passes,
                    time_update=time_update,
                )
                for status, n in counts.by_status.items():
                    metrics[f"status/{status}"] = n
                by_domain: dict[str, list[float]] = defaultdict(list)
                penalties: dict[str, float] = defaultdict(float)
                for s, r in zip(judged, ok_results, strict=True):
                    by_domain[s.prompt.domain].append(_reward(r))
                    for name, amount in r.penalties.items():
                        penalties[name] += amount
                for domain, values in by_domain.items():
                    metrics[f"reward/{domain}"] = _mean(values)
                for name, amount in penalties.items():
                    metrics[f"penalty/{name}"] = amount / max(1, len(judged))
                metrics = combine_ranks(world.gather(metrics))
                if metrics_log is not None:
                    metrics_log.write(metrics)
                log.info(
                    "step %d [%s] reward %s score %s kl %.4f groups %d accepted, %d rejected "
                    "in %d rounds",
                    step,
                    stage.name,
                    _fmt(metrics["reward_mean"]),
                    _fmt(metrics["score_mean"]),
                    metrics["kl"],
                    counts.accepted_groups,
                    counts.rejected_groups,
                    counts.rounds,
                )

                # ---- checkpoints: stage boundaries, resets, every N, and on stopping -------
                done = step + 1
                next_resets = done < schedule.total_steps and (
                    schedule.begins_at(done) or done in args.reset_steps or plateau_fired
                )
                periodic = args.checkpoint_every and done % args.checkpoint_every == 0
                (stopping,) = world.sum([float(stop_requested[0])])  # any rank asked
                if next_resets or periodic or done == end_step or stopping:
                    last_checkpoint = save(done)
                if stopping:
                    break
    finally:
        scorer.close()
        if metrics_log is not None:
            metrics_log.close()
    return last_checkpoint


_RANK_SEED = 1000
"""Rank r samples prompts and tokens from seed + 1000 r (rank 0, or a single process: seed)."""


def _checksum(model: torch.nn.Module) -> float:
    """A sum over the weights: equal on every rank while data parallelism holds."""
    with torch.no_grad():
        return float(sum(p.double().sum() for p in model.parameters()))


def _rank_state(sampler: PromptSampler, cuda: bool) -> dict[str, Any]:
    """This rank's random generators, for a checkpoint."""
    state: dict[str, Any] = {
        "sampler": sampler.state(),
        "torch_rng": torch.get_rng_state(),
        "python_rng": random.getstate(),
    }
    if cuda:
        state["cuda_rng"] = torch.cuda.get_rng_state()
    return state


def _set_rank_state(state: dict[str, Any], sampler: PromptSampler) -> None:
    sampler.set_state(state["sampler"])
    torch.set_rng_state(state["torch_rng"])
    random.setstate(state["python_rng"])
    if "cuda_rng" in state:
        torch.cuda.set_rng_state(state["cuda_rng"])


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


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None
