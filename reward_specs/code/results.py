"""One test's outcome, and how a failed execution reads as one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from sandboxes.api import ExecutionResult

__all__ = ["FAILED_RUN", "TestResult", "TestStatus", "run_error", "tail"]

TestStatus = Literal["passed", "wrong_answer", "runtime_error", "timeout", "memory", "output_limit"]


@dataclass(slots=True)
class TestResult:
    status: TestStatus
    time: float = 0.0
    diff: dict[str, Any] | None = None
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        time = self.time  # a float zero (most tests) is its own rounding: no round() for it
        out: dict[str, Any] = {
            "status": self.status,
            "time": time if type(time) is float and not time else round(time, 4),
        }
        if self.diff is not None:
            out["diff"] = self.diff
        if self.error is not None:
            out["error"] = self.error
        return out


FAILED_RUN: dict[str, TestStatus] = {
    "runtime_error": "runtime_error",
    "timeout": "timeout",
    "memory": "memory",
    "output_limit": "output_limit",
    "skipped": "timeout",
}
"""A failed execution's status as its test's (a run never started had no budget left)."""


def tail(data: bytes, limit: int) -> str:
    """The end of a program's output as text, at most `limit` characters."""
    text = data.decode("utf-8", "replace").strip()
    return text if len(text) <= limit else "..." + text[-(limit - 3) :]


def run_error(result: ExecutionResult, limit: int) -> str | None:
    """Why an execution failed (its signal or exit code, then the end of its stderr)."""
    parts = []
    if result.signal is not None:
        parts.append(f"killed by signal {result.signal}")
    elif result.exit_code not in (None, 0):
        parts.append(f"exit code {result.exit_code}")
    if result.stderr:
        parts.append(tail(result.stderr, limit))
    return "; ".join(parts) or None
