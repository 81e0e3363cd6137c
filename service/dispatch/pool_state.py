"""What the worker pool's manager keeps track of: batches, their chunks, the workers and what
each is scoring. Plain data, used by the manager thread alone (`service.dispatch.pool` and
`service.dispatch.ledger`)."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

from reward_specs import Item, Outcome
from service.dispatch.outcomes import OutcomeLedger

__all__ = ["Batch", "PoolChunk", "PoolStats", "WorkerSlot"]


@dataclass(eq=False)
class Batch:
    spec_name: str
    items: Sequence[Item]
    deadline: float
    future: Future[list[Outcome]]
    outcomes: OutcomeLedger
    costs: Sequence[float] | None = None
    tenant: str = ""
    """Whose batch (`service.core.tenancy`): the ledger shares the workers fairly among tenants."""
    done: bool = False
    survived_crash: bool = False
    """A manager crash already retried this batch's missing items once."""

    @property
    def abandoned(self) -> bool:
        """Finished, or no longer awaited (a cancelled job): nothing more to score."""
        return self.done or self.future.cancelled()

    def missing(self) -> list[int]:
        return self.outcomes.missing()


@dataclass(eq=False)
class PoolChunk:
    """A part of a batch given to one worker process of the pool."""

    id: int
    batch: Batch
    positions: list[int]


@dataclass(eq=False)
class WorkerSlot:
    process: BaseProcess
    conn: Connection
    progress: Any
    """Shared doubles: [position being scored or -1, monotonic time it started]."""
    ready: bool = False
    chunk: PoolChunk | None = None

    def current(self) -> tuple[int, float] | None:
        """The chunk item this worker last started and since when (its batch may be over: a
        stuck item is still killed then)."""
        chunk = self.chunk
        position, since = int(self.progress[0]), float(self.progress[1])
        if chunk is None or position < 0 or position not in chunk.positions:
            return None
        return position, since

    def unfinished(self) -> list[int]:
        chunk = self.chunk
        if chunk is None:
            return []
        return [p for p in chunk.positions if not chunk.batch.outcomes.has(p)]


@dataclass
class PoolStats:
    """What the manager counts (`DispatchStats` says what each is); `WorkerPool.stats` reports
    them with the workers and the pending chunks as they are at the time."""

    restarts: int = 0
    timeouts: int = 0
    poison_items: int = 0
    manager_restarts: int = 0
    broken: str | None = None
