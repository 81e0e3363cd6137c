"""Resets (the review's eq. 9 and Algorithm 2): the reference and the optimizer, separately.

A reference reset copies the policy's weights into the reference, so that the KL to it is 0 again;
an optimizer reset drops AdamW's moment estimates while the learning rate (and its schedule) carry
on. They are two switches because the review's section 13.3 asks for exactly that ablation.

The plateau rule decides when a monitored validation score has stopped improving.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["PlateauRule", "reset_optimizer", "reset_reference"]


def reset_reference(policy: torch.nn.Module, reference: torch.nn.Module) -> None:
    """Copy the policy's weights (and buffers) into the reference, in place."""
    with torch.no_grad():
        reference.load_state_dict(policy.state_dict())


def reset_optimizer(optimizer: torch.optim.Optimizer) -> None:
    """Forget the optimizer's per-parameter state (AdamW's moments and step counts).

    The parameter groups, and so the learning rate a scheduler set on them, are untouched; the
    next step initialises fresh state as on the first step of training.
    """
    optimizer.state.clear()


@dataclass
class PlateauRule:
    """Fires when `patience` evaluations in a row failed to beat the best score by `min_delta`.

    The best score is the highest seen since the start or the last firing; after firing the rule
    starts afresh from the next evaluation (the score just after a reset is measured against a new
    reference, not the old best).
    """

    patience: int
    min_delta: float = 0.0
    best: float | None = None
    stale: int = 0

    def __post_init__(self) -> None:
        if self.patience < 1:
            raise ValueError(f"patience must be at least 1, got {self.patience}")

    def observe(self, score: float) -> bool:
        """Record one validation score; True when the rule fires (and it then starts afresh)."""
        if self.best is None or score > self.best + self.min_delta:
            self.best = score
            self.stale = 0
            return False
        self.stale += 1
        if self.stale < self.patience:
            return False
        self.best = None
        self.stale = 0
        return True

    def state_dict(self) -> dict[str, float | int | None]:
        return {"best": self.best, "stale": self.stale}

    def load_state_dict(self, state: dict[str, float | int | None]) -> None:
        best, stale = state["best"], state["stale"]
        self.best = None if best is None else float(best)
        self.stale = int(stale or 0)
