"""Per-step diagnostics: one JSON object a line in `OUT/metrics.jsonl`, and TensorBoard scalars.

On resume, lines of steps the checkpoint does not cover (a crashed run's last steps) are dropped
first, so the file reads as one uninterrupted run.
"""

from __future__ import annotations

import json
import logging
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torch.utils.tensorboard import SummaryWriter

__all__ = ["MetricsLog", "StepClock", "combine_ranks", "log_step", "read_metrics"]

log = logging.getLogger("proctor_client.trainer")

_SUMMED = ("groups_", "tokens_", "status/", "unjudged")
"""Counts, added up over ranks; timings take the slowest rank, other numbers the ranks' mean."""


def read_metrics(path: Path) -> list[dict[str, Any]]:
    """Every step's object in a metrics file."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def combine_ranks(per_rank: list[dict[str, Any]]) -> dict[str, Any]:
    """One step's metrics from every rank's (the first rank's alone with one process)."""
    if len(per_rank) == 1:
        return per_rank[0]
    combined: dict[str, Any] = {}
    for key in sorted({k for metrics in per_rank for k in metrics}):
        values = [m[key] for m in per_rank if m.get(key) is not None]
        numbers = [v for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
        if key == "step" or len(numbers) != len(values) or not values:
            combined[key] = per_rank[0].get(key)
        elif key.startswith(_SUMMED):
            combined[key] = sum(numbers)
        elif key.startswith("time_"):
            combined[key] = max(numbers)
        else:
            combined[key] = sum(numbers) / len(numbers)
    return combined


class MetricsLog:
    def __init__(self, out: Path, resume_from_step: int, tensorboard: bool = True) -> None:
        self.path = out / "metrics.jsonl"
        if self.path.exists():
            kept = [m for m in read_metrics(self.path) if m["step"] < resume_from_step]
            self.path.write_text("".join(json.dumps(m) + "\n" for m in kept))
        self._file = self.path.open("a", encoding="utf-8")
        self._board = SummaryWriter(str(out / "tensorboard")) if tensorboard else None

    def write(self, metrics: dict[str, Any]) -> None:
        self._file.write(json.dumps(metrics, sort_keys=True) + "\n")
        self._file.flush()
        if self._board is not None:
            for key, value in metrics.items():
                number = isinstance(value, int | float) and not isinstance(value, bool)
                if number and math.isfinite(value):
                    self._board.add_scalar(key, value, metrics["step"])
            self._board.flush()

    def close(self) -> None:
        self._file.close()
        if self._board is not None:
            self._board.close()


@dataclass
class StepClock:
    """Steps done in this process and their mean wall time, for `step i/N` and an ETA."""

    first: int
    end: int
    began: float = field(default_factory=time.perf_counter)
    done: int = 0

    def tick(self) -> str:
        self.done += 1
        left = self.end - self.first - self.done
        seconds = (time.perf_counter() - self.began) / self.done * left
        return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"


def log_step(metrics: dict[str, Any], eta: str, end: int) -> None:
    """One line per step: `step i (i+1/N)` (i as metrics.jsonl's `step`, counted from 0), the
    stage, reward, score, KL, groups and the ETA."""
    rounds = metrics["sampling_rounds"]
    log.info(
        "step %d (%d/%d) [%s] reward %s score %s kl %.4f groups %d accepted, %d rejected in %d "
        "%s, ETA %s",
        metrics["step"],
        metrics["step"] + 1,
        end,
        metrics["stage"],
        _fmt(metrics["reward_mean"]),
        _fmt(metrics["score_mean"]),
        metrics["kl"],
        metrics["groups_accepted"],
        metrics["groups_rejected"],
        rounds,
        "round" if rounds == 1 else "rounds",
        eta,
    )


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"
