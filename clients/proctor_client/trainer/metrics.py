"""Per-step diagnostics: one JSON object a line in `OUT/metrics.jsonl`, and TensorBoard scalars.

On resume, lines of steps the checkpoint does not cover (a crashed run's last steps) are dropped
first, so the file reads as one uninterrupted run.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from torch.utils.tensorboard import SummaryWriter

__all__ = ["MetricsLog", "read_metrics"]


def read_metrics(path: Path) -> list[dict[str, Any]]:
    """Every step's object in a metrics file."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


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
