"""The dispatch interface: how the routes get items scored, whatever runs them.

The local backend (a worker-process pool plus a thread pool, in this process) is the embedded
default; a queue backend for workers on other machines implements the same three methods, so routes
and scorers never change with the deployment.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from reward_specs import Item, Outcome, Spec

__all__ = ["Dispatcher"]


class Dispatcher(Protocol):
    async def start(self) -> None:
        """Bring workers up; return once the dispatcher accepts work (workers may still warm up)."""

    async def stop(self) -> None:
        """Stop workers; pending items resolve as `infra_error`, never silently vanish."""

    def readiness(self) -> dict[str, bool]:
        """Component name -> ready, for /readyz."""

    async def run(
        self,
        spec: Spec,
        items: Sequence[Item],
        deadline: float,
        on_done: Callable[[int], None] | None = None,
    ) -> list[Outcome]:
        """Exactly one outcome per item, in order, by `deadline` (a `time.monotonic()` instant),
        whatever part of the dispatcher has died. `on_done(position)` is called, from any
        thread, as each item gets its outcome (a job's progress)."""
