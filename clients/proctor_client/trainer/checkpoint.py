"""Checkpoints: everything a resumed run needs to continue exactly as an uninterrupted one.

A checkpoint is one `torch.save` file per completed step count, `OUT/checkpoints/step-NNNNNN.pt`,
written to a temporary name and renamed, so a run killed while saving leaves the previous one
whole. It holds the policy and reference weights, the optimizer and learning-rate schedule, every
random generator the loop draws from, and the loop's own counters.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

__all__ = ["checkpoint_path", "latest_checkpoint", "load_checkpoint", "save_checkpoint"]


def _directory(out: Path) -> Path:
    return out / "checkpoints"


def checkpoint_path(out: Path, completed_steps: int) -> Path:
    """Where the checkpoint after `completed_steps` steps is."""
    return _directory(out) / f"step-{completed_steps:06d}.pt"


def save_checkpoint(out: Path, completed_steps: int, state: dict[str, Any]) -> Path:
    """Write `state` as the checkpoint after `completed_steps` steps; its path."""
    path = checkpoint_path(out, completed_steps)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".pt.partial")
    torch.save({"completed_steps": completed_steps, **state}, partial)
    os.replace(partial, path)
    return path


def latest_checkpoint(out: Path) -> Path | None:
    """The checkpoint with the most completed steps under `out`, if any."""
    found = sorted(_directory(out).glob("step-*.pt"))
    return found[-1] if found else None


def load_checkpoint(path: Path) -> dict[str, Any]:
    """The state saved at `path` (random generator states included, hence no weights_only)."""
    state: dict[str, Any] = torch.load(path, map_location="cpu", weights_only=False)
    return state
