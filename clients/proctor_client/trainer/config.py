"""A run's configuration: the YAML file's top-level keys, checked before anything is loaded."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, TypeAdapter, ValidationError, model_validator
from pydantic.dataclasses import dataclass

from proctor_client._defaults import CHUNK_SIZE
from proctor_client.trainer.groups import StdKind
from proctor_client.trainer.objective import KLEstimator
from proctor_client.trainer.schedule import Schedule, Source, Stage, read_yaml

__all__ = ["Args", "load_args"]


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
    dynamic_sampling_on: Literal["reward", "score"] = "reward"
    """What dynamic sampling compares within a group: `reward`, the shaped reward the advantages
    are formed from (a group whose rewards are all equal has zero advantages, so it teaches
    nothing, and a group of right answers some of which were cut off is kept, which termination
    shaping is for), or `score`, the raw task score (the review's wording; it keeps zero-advantage
    groups and drops those cut-off ones under termination shaping)."""
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
    validation_data: dict[str, Source] = dataclasses.field(default_factory=dict)
    """Held-out prompt sources for the validation blend only (the review's blend: AIME24,
    Codeforces, GPQA, IFEval, graph colouring), never drawn from by a stage. Empty: the blend is
    drawn from the training sources, which measures training reward rather than held-out skill."""
    validation_mixture: dict[str, float] | None = None
    """The validation blend's sources and weights: names in `validation_data` when it is given
    (None: equal weights over them), else in `data` (None: the first stage's mixture)."""
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
    trl: dict[str, Any] = dataclasses.field(default_factory=dict)
    """`--engine trl` only: further `trl.GRPOConfig` fields passed as they are (vLLM rollouts:
    `use_vllm`, `vllm_mode`, ...; see clients/configs/vllm.yaml). Fields this config already
    sets (the clip, the KL, the batch shape) are refused there, so one YAML means one objective."""

    @model_validator(mode="after")
    def _adds_up(self) -> Args:
        Schedule.check(self.stages, self.data, self.total_steps, self.reset_steps)
        if self.prompts_per_step % self.prompts_per_minibatch:
            raise ValueError(
                f"prompts_per_step ({self.prompts_per_step}) must be a multiple of "
                f"prompts_per_minibatch ({self.prompts_per_minibatch})"
            )
        pool = self.validation_data or self.data
        unknown = sorted(set(self.validation_mixture or {}) - set(pool))
        if unknown:
            table = "validation_data" if self.validation_data else "data"
            raise ValueError(f"validation_mixture: unknown {table} sources {unknown}")
        shared = sorted(set(self.validation_data) & set(self.data))
        if shared:
            raise ValueError(f"validation_data: {shared} are also training sources in `data`")
        trained = {s.path for s in self.data.values() if s.path is not None}
        leaked = sorted(n for n, s in self.validation_data.items() if s.path in trained)
        if leaked:
            raise ValueError(f"validation_data: {leaked} read a file a training source reads")
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
    for table in (args.data, args.validation_data):
        for name, source in table.items():
            if source.path is not None and not source.path.is_absolute():
                table[name] = source.model_copy(update={"path": path.parent / source.path})
    return args
