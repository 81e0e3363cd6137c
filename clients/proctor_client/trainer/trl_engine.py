"""`proctor-train CONFIG --engine trl`: the same YAML run on TRL's `GRPOTrainer`, with Proctor as
its only reward (the `trl` extra: TRL 1.16, accelerate).

What TRL has natively is configured from the YAML, not rewritten: the clipped surrogate
(`epsilon` = eps_low, `epsilon_high` = eps_high), the token-level loss (`loss_type="dapo"`: every
update averaged over its tokens), the KL to the reference with its coefficient (`beta`; TRL
computes the k3 estimator only, so another `kl_estimator` is refused), AdamW with its betas,
decay, clipping and warm-up, and through the YAML's `trl:` table anything else TRL offers:
vLLM rollouts (`use_vllm`, `vllm_mode: colocate|server`), and with `accelerate launch
--config_file` DeepSpeed ZeRO or FSDP (clients/configs/accelerate-*.yaml). What it lacks comes
from trl_parts.py: advantages by the recipe's group rule, unjudged completions and uninformative
groups masked out of the loss, resets at listed steps and on a plateau, validation, metrics.

The stage schedule runs one `GRPOTrainer` per stage, so each stage has its own G, temperature,
response length, spec and mixture from its first step; the policy, the optimizer and its
learning-rate schedule carry over from stage to stage, and the reference too unless the stage
opens with a reset. A rollout step of the recipe is `prompts_per_step / prompts_per_minibatch`
TRL updates on one generation batch (`steps_per_generation`).

Where the two engines differ, honestly: TRL's token denominator is the generation batch's tokens
over its updates (the mean minibatch), the reference engine's each minibatch's own tokens: equal
with one update per step. Dynamic sampling generates `oversample` times the batch's prompts
once and keeps the first informative groups up to the batch (the reference engine's first
round); it draws no further rounds, so a step may train on fewer groups. A resumed
run continues from the last checkpoint's weights, optimizer and prompt draws, but TRL's own
random state is not restored, so it does not repeat an uninterrupted run exactly.
"""

from __future__ import annotations

import json
import logging
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from datasets import Dataset  # type: ignore[import-untyped]
from transformers import (
    AutoModelForCausalLM,
    PreTrainedTokenizerBase,
    PrinterCallback,
    TrainerCallback,
)
from trl.trainer.grpo_config import GRPOConfig

from proctor_client.trainer.checkpoint import checkpoint_path
from proctor_client.trainer.config import Args
from proctor_client.trainer.data import PromptSampler
from proctor_client.trainer.distributed import World
from proctor_client.trainer.grpo import (
    Rollouts,
    apply_resets,
    run_scorer,
    validate,
    validation_set,
)
from proctor_client.trainer.loading import load_model, load_pools
from proctor_client.trainer.metrics import MetricsLog, StepClock, log_step
from proctor_client.trainer.proctor import BackgroundScorer, preflight
from proctor_client.trainer.resets import reset_reference
from proctor_client.trainer.schedule import Schedule, Stage
from proctor_client.trainer.state import RunState
from proctor_client.trainer.trl_parts import (
    JudgedReward,
    ProctorGRPOTrainer,
    RecipeCallback,
    StepHooks,
    batch_metrics,
    update_metrics,
)

__all__ = ["OWN_FIELDS", "grpo_config", "refusals", "train"]

log = logging.getLogger("proctor_client.trainer")

OWN_FIELDS = frozenset(
    {
        "output_dir", "num_generations", "max_completion_length", "temperature", "top_p",
        "top_k", "epsilon", "epsilon_high", "beta", "loss_type", "scale_rewards",
        "learning_rate", "weight_decay", "adam_beta1", "adam_beta2", "max_grad_norm",
        "per_device_train_batch_size", "gradient_accumulation_steps", "steps_per_generation",
        "num_iterations", "max_steps", "seed", "importance_sampling_level",
        "mask_truncated_completions", "remove_unused_columns", "shuffle_dataset",
        "disable_dropout",
    }
)  # fmt: skip
"""GRPOConfig fields the run's YAML sets; its `trl:` table may not set them again."""


def refusals(args: Args) -> list[str]:
    """The settings TRL cannot honour as the reference engine does, each with its reason."""
    problems = []
    if args.kl_estimator != "k3" and args.kl_coef > 0:
        problems.append(
            f"kl_estimator {args.kl_estimator!r}: TRL's GRPOTrainer computes the k3 estimator "
            "only; set kl_estimator: k3 (or kl_coef: 0) to run this config on TRL"
        )
    if args.chat_template:
        problems.append("chat_template: give the TRL engine conversational prompts instead")
    own = sorted(set(args.trl) & OWN_FIELDS)
    if own:
        problems.append(f"trl: {own} are set by the config's own fields; set those instead")
    return problems


def updates_per_step(args: Args) -> int:
    return args.prompts_per_step // args.prompts_per_minibatch


def drawn_prompts(args: Args) -> int:
    """Prompts generated per step: `oversample` times the batch, rounded up to a multiple of
    the updates (the reference engine's first sampling round; TRL has no further rounds)."""
    updates = updates_per_step(args)
    return math.ceil(args.prompts_per_step * args.oversample / updates) * updates


def grpo_config(args: Args, stage: Stage, steps: int, out: Path, processes: int) -> GRPOConfig:
    """TRL's configuration of `steps` rollout steps of `stage`."""
    updates = updates_per_step(args)
    rows = drawn_prompts(args) // updates * stage.group_size // processes
    # responses per forward pass: the largest divisor of an update's rows within micro_batch_size
    micro = max(d for d in range(1, min(args.micro_batch_size, rows) + 1) if rows % d == 0)
    return GRPOConfig(
        output_dir=str(out / "trl"),
        num_generations=stage.group_size,
        max_completion_length=stage.max_response_tokens,
        temperature=stage.temperature,
        top_p=1.0,
        top_k=0,
        epsilon=args.eps_low,
        epsilon_high=args.eps_high,
        beta=args.kl_coef,
        loss_type="dapo",
        scale_rewards="none",  # JudgedReward returns the advantages themselves
        importance_sampling_level="token",
        mask_truncated_completions=False,
        learning_rate=args.learning_rate,
        weight_decay=args.weight_decay,
        adam_beta1=args.adam_betas[0],
        adam_beta2=args.adam_betas[1],
        max_grad_norm=args.max_grad_norm,
        per_device_train_batch_size=micro,
        gradient_accumulation_steps=rows // micro,
        steps_per_generation=updates * (rows // micro),
        num_iterations=1,
        max_steps=steps * updates,
        seed=args.seed,
        remove_unused_columns=False,
        shuffle_dataset=False,  # the rows are drawn at random already, in the run's own order
        use_cpu=args.device == "cpu",
        bf16=args.dtype == "bfloat16",
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        disable_tqdm=True,
        activation_checkpointing=False,
        disable_dropout=True,  # the ratio must compare deterministic policies
        **args.trl,
    )


def _dataset(sampler: PromptSampler, stage: Stage, prompts: int) -> Dataset:
    rows = [
        {
            "prompt": p.text,
            "domain": p.domain,
            "reference": _json(p.reference),
            "row": i,
        }
        for i, p in enumerate(sampler.sample(prompts, stage.mixture))
    ]
    return Dataset.from_list(rows)


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


@dataclass
class _Run:
    """One run of the TRL engine: the state it checkpoints and what its steps share."""

    args: Args
    url: str
    out: Path
    schedule: Schedule
    run: RunState
    tokenizer: PreTrainedTokenizerBase
    scorer: BackgroundScorer
    world: World
    end_step: int
    metrics_log: MetricsLog | None
    clock: StepClock
    validation: list[Any]
    judge: JudgedReward | None = None
    began: float = 0.0
    reset: str = ""
    """The causes of the reset that opened the current step, comma-separated."""

    def begin(self, step: int) -> None:
        self.began = time.perf_counter()
        stage = self.schedule.stages[self.schedule.index_at(step)]
        opened = self.schedule.begins_at(step) and stage.reset_at_start
        self.reset = "stage" if opened else ""  # done when the stage's trainer was built
        if self.run.plateau_fired or step in self.args.reset_steps:
            self.reset = apply_resets(self.args, self.schedule, self.run, step)

    def end(self, step: int, logs: list[dict[str, float]]) -> bool:
        assert self.judge is not None
        stage = self.schedule.stages[self.schedule.index_at(step)]
        batches, self.judge.batches = self.judge.batches, []
        metrics: dict[str, Any] = {"step": step, "stage": stage.name, "reset": self.reset}
        metrics.update(batch_metrics(batches))
        metrics.update(update_metrics(logs))
        metrics.update(temperature=stage.temperature, spec=stage.spec)
        self.run.tokens_generated_total += sum(sum(b.lengths) for b in batches)
        metrics["tokens_generated_total"] = self.run.tokens_generated_total
        if self.args.validation_every and (step + 1) % self.args.validation_every == 0:
            rollouts = Rollouts(self.args, self.tokenizer, self.scorer, _pad(self.tokenizer))
            metrics.update(validate(rollouts, self.run, self.validation, stage, step, self.world))
        seconds = time.perf_counter() - self.began
        metrics["time_step"] = seconds
        self.run.count_device_time(metrics, self.world.size, seconds)
        if self.metrics_log is not None:
            self.metrics_log.write(metrics)
        log_step(metrics, self.clock.tick(), self.end_step)
        self.run.completed_steps = step + 1
        periodic = self.args.checkpoint_every and (step + 1) % self.args.checkpoint_every == 0
        if periodic or step + 1 == self.end_step:
            self.run.save(self.out, self.world)
        return step + 1 >= self.end_step


def train(
    args: Args,
    url: str,
    out: Path,
    stop_after: int | None = None,
    api_key: str | None = None,
    callbacks: list[TrainerCallback] | None = None,
) -> Path:
    """Run (or resume) the schedule on TRL against the Proctor at `url`, writing to `out`; the
    path of the last checkpoint. `callbacks` are added to every stage's trainer after the
    recipe's own (tests use them to look at the trainer between steps)."""
    problems = refusals(args)
    if problems:
        raise ValueError("--engine trl cannot run this config: " + "; ".join(problems))
    preflight(url, api_key, [s.spec for s in args.stages])
    out.mkdir(parents=True, exist_ok=True)
    if args.torch_threads is not None:
        torch.set_num_threads(args.torch_threads)
    world = _world()
    engine = _start(args, url, out, stop_after, api_key, world)
    try:
        while engine.run.completed_steps < engine.end_step:
            _run_stage(engine, callbacks or [])
    finally:
        engine.scorer.close()
        if engine.metrics_log is not None:
            engine.metrics_log.close()
    return checkpoint_path(out, engine.run.completed_steps)


def _start(
    args: Args, url: str, out: Path, stop_after: int | None, api_key: str | None, world: World
) -> _Run:
    schedule = Schedule(args.stages)
    torch.manual_seed(args.seed)
    policy, tokenizer = load_model(args, "cpu" if args.device == "cpu" else args.device)
    initial = out / "initial-model"
    if args.model == "tiny-digits":  # TRL builds its reference from a path
        policy.save_pretrained(str(initial))
        policy = AutoModelForCausalLM.from_pretrained(str(initial))
    pools = load_pools(args.data, url, args.seed)
    run = RunState.create(args, policy, PromptSampler(pools, args.seed))
    run.resume(out, world)
    end = schedule.total_steps if stop_after is None else min(stop_after, schedule.total_steps)
    scorer = run_scorer(args, url, api_key)
    return _Run(
        args=args,
        url=url,
        out=out,
        schedule=schedule,
        run=run,
        tokenizer=tokenizer,
        scorer=scorer,
        world=world,
        end_step=end,
        metrics_log=MetricsLog(out, run.completed_steps, args.tensorboard) if world.main else None,
        clock=StepClock(run.completed_steps, end),
        validation=validation_set(args, pools, url)[world.rank :: world.size],
    )


def _run_stage(engine: _Run, callbacks: list[TrainerCallback]) -> None:
    """The rest of the current stage (up to the run's end) on one GRPOTrainer."""
    args, schedule, run = engine.args, engine.schedule, engine.run
    step = run.completed_steps
    index = schedule.index_at(step)
    stage = schedule.stages[index]
    stage_end = min(schedule.starts[index] + stage.steps, engine.end_step)
    steps = stage_end - step
    config = grpo_config(args, stage, steps, engine.out, engine.world.size)
    judge = JudgedReward(
        engine.scorer,
        stage,
        eos_token_ids=frozenset([engine.tokenizer.eos_token_id]),
        advantage_std=args.advantage_std,
        dynamic_sampling_on=args.dynamic_sampling_on,
        process_index=engine.world.rank,
        groups_wanted=args.prompts_per_step,
    )
    hooks = StepHooks(
        step, args.prompts_per_step // args.prompts_per_minibatch, engine.begin, engine.end
    )
    trainer = ProctorGRPOTrainer(
        model=run.policy,
        judge=judge,
        args=config,
        train_dataset=_dataset(run.sampler, stage, steps * drawn_prompts(args)),
        processing_class=engine.tokenizer,
        callbacks=[RecipeCallback(hooks), *callbacks],
        optimizers=(run.optimizer, run.scheduler),
    )
    reference = trainer.ref_model
    if reference is not None:  # None with kl_coef 0: TRL then builds no reference
        opens_with_reset = schedule.begins_at(step) and stage.reset_at_start
        source = run.policy if opens_with_reset and args.reset_reference else run.reference
        reset_reference(source, reference)
        run.reference = reference
    if schedule.begins_at(step) and stage.reset_at_start and args.reset_optimizer:
        run.optimizer.state.clear()
    engine.judge = judge
    log.info("stage %s: %d steps on TRL (G %d, temperature %s, spec %s)", stage.name, steps,
             stage.group_size, stage.temperature, stage.spec)  # fmt: skip
    trainer.remove_callback(PrinterCallback)  # the recipe's own step line says it
    trainer.train()


def _world() -> World:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return World(torch.distributed.get_rank(), torch.distributed.get_world_size())
    return World()


def _pad(tokenizer: PreTrainedTokenizerBase) -> int:
    pad = tokenizer.pad_token_id
    return int(tokenizer.eos_token_id if pad is None else pad)
