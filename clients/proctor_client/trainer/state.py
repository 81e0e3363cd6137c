"""Everything a run carries from one step to the next, and its checkpoint form.

`RunState` holds the policy, the reference, the optimizer and its learning-rate schedule, the
prompt sampler, the plateau rule and the loop's counters. `state_dict()` is one rank's share of a
checkpoint and `load_state_dict()` restores it, so that a resumed run continues exactly as an
uninterrupted one; `save()` gathers every rank's random generators and writes the file on rank 0.
"""

from __future__ import annotations

import copy
import logging
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from transformers import PreTrainedModel

from proctor_client.trainer.checkpoint import (
    checkpoint_path,
    latest_checkpoint,
    load_checkpoint,
    save_checkpoint,
)
from proctor_client.trainer.config import Args
from proctor_client.trainer.data import PromptSampler
from proctor_client.trainer.distributed import World
from proctor_client.trainer.resets import PlateauRule

__all__ = ["RunState"]

log = logging.getLogger("proctor_client.trainer")


@dataclass
class RunState:
    """The run's models, optimizer, generators and counters."""

    policy: PreTrainedModel
    reference: PreTrainedModel
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    sampler: PromptSampler
    plateau: PlateauRule | None
    cuda: bool
    completed_steps: int = 0
    plateau_fired: bool = False
    """The plateau rule fired at the last validation: the next step opens with a reset."""
    tokens_generated_total: int = 0
    """This rank's generated tokens since the start of the run."""
    device_hours_total: float = 0.0
    """Devices times wall time of every step since the start of the run, in hours."""

    def count_device_time(self, metrics: dict[str, Any], ranks: int, seconds: float) -> None:
        """Devices (the ranks) times the step's wall time, and the total since the start, as
        `gpu_hours` / `gpu_hours_total` when the ranks run on GPUs and `cpu_hours` /
        `cpu_hours_total` when they run on CPUs: a CPU run reports no GPU hours."""
        hours = ranks * seconds / 3600
        self.device_hours_total += hours
        kind = "gpu" if self.cuda else "cpu"
        metrics[f"{kind}_hours"] = hours
        metrics[f"{kind}_hours_total"] = self.device_hours_total

    @staticmethod
    def create(args: Args, policy: PreTrainedModel, sampler: PromptSampler) -> RunState:
        """A fresh run's state: the reference a frozen copy of the policy, AdamW with a linear
        warm-up (resets do not restart it)."""
        # dropout off: the ratio must compare deterministic policies
        policy.eval()  # type: ignore[no-untyped-call]
        reference = copy.deepcopy(policy).requires_grad_(False)
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
        plateau = None
        if args.plateau_patience is not None:
            plateau = PlateauRule(args.plateau_patience, min_delta=args.plateau_min_delta)
        cuda = next(policy.parameters()).device.type == "cuda"
        return RunState(policy, reference, optimizer, scheduler, sampler, plateau, cuda)

    def state_dict(self) -> dict[str, Any]:
        """This rank's checkpoint: the shared state, and under `rank` its own generators."""
        rank: dict[str, Any] = {
            "sampler": self.sampler.state(),
            "torch_rng": torch.get_rng_state(),
            "python_rng": random.getstate(),
            "tokens_generated_total": self.tokens_generated_total,
        }
        if self.cuda:
            rank["cuda_rng"] = torch.cuda.get_rng_state()
        return {
            "completed_steps": self.completed_steps,
            "policy": self.policy.state_dict(),
            "reference": self.reference.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "plateau": self.plateau.state_dict() if self.plateau is not None else None,
            "plateau_fired": self.plateau_fired,
            "device_hours_total": self.device_hours_total,
            "rank": rank,
        }

    def load_state_dict(self, state: dict[str, Any], world: World) -> None:
        """Restore a checkpoint written by as many ranks as this run has."""
        if len(state["ranks"]) != world.size:
            raise ValueError(
                f"the checkpoint was written by {len(state['ranks'])} ranks, not {world.size}"
            )
        self.policy.load_state_dict(state["policy"])
        self.reference.load_state_dict(state["reference"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        if self.plateau is not None:
            self.plateau.load_state_dict(state["plateau"])
        self.plateau_fired = state["plateau_fired"]
        self.completed_steps = state["completed_steps"]
        self.device_hours_total = state.get("device_hours_total", 0.0)
        mine = state["ranks"][world.rank]
        self.sampler.set_state(mine["sampler"])
        torch.set_rng_state(mine["torch_rng"])
        random.setstate(mine["python_rng"])
        if "cuda_rng" in mine:
            torch.cuda.set_rng_state(mine["cuda_rng"])
        self.tokens_generated_total = mine["tokens_generated_total"]

    def resume(self, out: Path, world: World) -> Path | None:
        """Load the latest checkpoint under `out` into this state, if there is one; its path."""
        checkpoint = latest_checkpoint(out)
        if checkpoint is not None:
            self.load_state_dict(load_checkpoint(checkpoint), world)
            log.info("resuming from %s (%d steps done)", checkpoint, self.completed_steps)
        return checkpoint

    def save(self, out: Path, world: World) -> Path:
        """Write the checkpoint after `completed_steps` steps (rank 0 writes; every rank takes
        part, with its generators); refuse ranks whose weights have diverged."""
        state = self.state_dict()
        ranks = world.gather(state.pop("rank"))
        checksums = world.gather(_checksum(self.policy))
        if len(set(checksums)) > 1:
            raise RuntimeError(f"the ranks' weights have diverged (checksums {checksums})")
        if not world.main:
            return checkpoint_path(out, self.completed_steps)
        completed = state.pop("completed_steps")
        return save_checkpoint(out, completed, {**state, "ranks": ranks})


def _checksum(model: torch.nn.Module) -> float:
    """A sum over the weights: equal on every rank while data parallelism holds."""
    with torch.no_grad():
        return float(sum(p.double().sum() for p in model.parameters()))
