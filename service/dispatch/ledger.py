"""The work a worker pool holds: its batches, the chunks of them still to hand out (in a
`fair.FairQueue`: round-robin across tenants, then across their batches), and each batch's
`outcomes.OutcomeLedger`, so that every batch's future resolves once with one `Outcome` per item.

Used by the pool's manager thread alone (`service.dispatch.pool`), which owns the processes; the
ledger knows nothing of them.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import math
from collections.abc import Sequence
from concurrent.futures import InvalidStateError
from multiprocessing.reduction import ForkingPickler

from reward_specs import Outcome, codes
from service.dispatch.fair import FairQueue
from service.dispatch.pool_state import Batch, PoolChunk

__all__ = ["Ledger", "plan_chunks"]

log = logging.getLogger(__name__)


class Ledger:
    """Batches in flight and their pending chunks, for a pool of `workers` processes; chunks
    hold `chunk_size` items, or (0) a size picked per batch."""

    def __init__(self, workers: int, chunk_size: int = 0) -> None:
        self.batches: list[Batch] = []
        self.pending: FairQueue[PoolChunk] = FairQueue()
        self._workers = workers
        self._chunk_size = chunk_size
        self._chunk_ids = itertools.count()

    # -- handing out work --------------------------------------------------------------------------

    def add(self, batch: Batch) -> None:
        self.batches.append(batch)
        self.plan(batch, range(len(batch.items)))

    def plan(self, batch: Batch, positions: Sequence[int]) -> None:
        """Queue `positions` of `batch` as chunks, in the order `plan_chunks` gives."""
        size = self._size_for(len(positions))
        costs = None if batch.costs is None else [batch.costs[p] for p in positions]
        for chunk in plan_chunks(len(positions), size, self._workers, costs):
            chosen = [positions[i] for i in chunk]
            self.pending.push(batch.tenant, batch, PoolChunk(next(self._chunk_ids), batch, chosen))

    def _size_for(self, n: int) -> int:
        if self._chunk_size:
            return self._chunk_size
        # Several chunks per worker keep the pool balanced; a cap keeps deaths cheap to redo.
        return max(1, min(64, math.ceil(n / (self._workers * 4))))

    def requeue(self, batch: Batch, positions: list[int]) -> None:
        """`positions` go out again, first, as a chunk of their own (after a worker was lost)."""
        if positions:
            chunk = PoolChunk(next(self._chunk_ids), batch, positions)
            self.pending.push(batch.tenant, batch, chunk, front=True)

    def next_message(self) -> tuple[PoolChunk, bytes] | None:
        """The next chunk with something left to score and its message for a worker, or None
        when nothing is pending. Chunks of abandoned batches are dropped on the way."""
        while (chunk := self.pending.pop()) is not None:
            batch = chunk.batch
            if batch.abandoned:
                self.drop(batch)
                continue
            todo = [p for p in chunk.positions if not batch.outcomes.has(p)]
            payload = self._pickle(chunk, todo)
            if payload is not None:
                return chunk, payload
        return None

    def put_back(self, chunk: PoolChunk) -> None:
        """A chunk `next_message` gave that could not be sent: it is the next one out."""
        self.pending.push(chunk.batch.tenant, chunk.batch, chunk, front=True)

    def _pickle(self, chunk: PoolChunk, todo: list[int]) -> bytes | None:
        """The chunk's message for a worker, or None if nothing of it is left to send. An item
        that cannot be pickled is resolved `invalid` on its own; the rest of its chunk goes."""
        batch = chunk.batch
        for attempt in range(2):
            todo = [p for p in todo if not batch.outcomes.has(p)]
            if not todo:
                return None
            chunk.positions = todo
            try:
                tasks = [(p, batch.spec_name, batch.items[p]) for p in todo]
                return bytes(ForkingPickler.dumps((chunk.id, tasks)))
            except Exception:  # whatever an item holds: find the item and refuse it alone
                log.warning("a chunk could not be pickled (attempt %d)", attempt, exc_info=True)
                if attempt == 0:
                    self._refuse_unpicklable(batch, todo)
        for position in todo:  # each item pickles alone, yet not together: a failure of ours
            message = "this item's chunk could not be sent to a worker"
            self.record(
                batch, position, Outcome.failure("infra_error", codes.DISPATCH_ERROR, message)
            )
        return None

    def _refuse_unpicklable(self, batch: Batch, positions: list[int]) -> None:
        for position in positions:
            try:
                ForkingPickler.dumps((position, batch.spec_name, batch.items[position]))
            except Exception as exc:
                log.info("item %d cannot be pickled", position, exc_info=True)
                message = f"this item cannot be sent to a worker ({type(exc).__name__})"
                failed = Outcome.failure("invalid", codes.UNSERIALISABLE_ITEM, message)
                self.record(batch, position, failed)

    # -- resolving ---------------------------------------------------------------------------------

    def record(self, batch: Batch, position: int, outcome: Outcome) -> None:
        """`outcome` for `position`, unless it already has one; the batch resolves with its last."""
        if batch.done or not batch.outcomes.record(position, outcome):
            return
        if batch.outcomes.complete:
            self._complete(batch)

    def strike(self, batch: Batch, position: int) -> bool:
        """`position` was being scored when its worker died: True if it is now a poison item
        (judged 0), False if it goes out again."""
        if batch.done:
            return False
        poisoned = batch.outcomes.strike(position)
        if batch.outcomes.complete:
            self._complete(batch)
        return poisoned

    def _complete(self, batch: Batch) -> None:
        batch.done = True
        self.batches = [b for b in self.batches if b is not batch]
        self.pending.discard(batch)
        with contextlib.suppress(InvalidStateError):  # cancelled by its caller meanwhile
            batch.future.set_result(batch.outcomes.outcomes())

    def drop(self, batch: Batch) -> None:
        """Forget a batch nobody awaits any more, and its chunks."""
        batch.done = True
        self.pending.discard(batch)
        if batch in self.batches:
            self.batches.remove(batch)

    def finish_missing(self, batch: Batch, code: str, message: str) -> None:
        """Resolve `batch` now: each item without an outcome is `infra_error` with `code`."""
        if batch.done:
            return
        batch.outcomes.fill_missing(code, message)
        self._complete(batch)

    def fail_all(self, code: str, message: str) -> None:
        """Resolve every batch held (`finish_missing`) and forget every pending chunk."""
        for batch in list(self.batches):
            self.finish_missing(batch, code, message)
        self.pending.clear()

    def expire(self, now: float) -> None:
        """Drop abandoned batches; resolve those past their deadline (`deadline_exceeded`)."""
        for batch in list(self.batches):
            if batch.abandoned:
                self.drop(batch)
            elif now >= batch.deadline:
                self.finish_missing(
                    batch,
                    codes.DEADLINE_EXCEEDED,
                    "the request deadline passed before this item was scored",
                )

    def retry_after_crash(self) -> None:
        """After a manager crash, with every worker gone: each batch's missing items go out once
        more; a batch that already survived a crash is resolved (`pool_crashed`)."""
        self.pending.clear()
        for batch in list(self.batches):
            if batch.abandoned:
                self.batches.remove(batch)
            elif batch.survived_crash:
                self.finish_missing(batch, codes.POOL_CRASHED, "the worker pool manager crashed")
            else:
                batch.survived_crash = True
                batch.outcomes.strikes.clear()
                self.plan(batch, batch.missing())


def plan_chunks(
    n: int, size: int, workers: int, costs: Sequence[float] | None = None
) -> list[list[int]]:
    """Positions 0..n-1 cut into chunks of at most `size`, in the order they are handed out.

    Without costs: request order. With costs (one estimate per position): costliest first
    (longest-processing-time-first scheduling), and a chunk also closes once it holds a
    `1 / (8 * workers)` share of the batch's estimated cost, so costly items travel alone or in
    small chunks while cheap ones travel in full ones, and the batch ends with cheap chunks that
    spread over every worker rather than with one slow item keeping one worker busy."""
    if costs is None:
        return [list(range(start, min(n, start + size))) for start in range(0, n, size)]
    order = sorted(range(n), key=lambda p: -costs[p])
    share = sum(costs) / (8 * workers)
    chunks: list[list[int]] = []
    current: list[int] = []
    spent = 0.0
    for position in order:
        current.append(position)
        spent += costs[position]
        if len(current) >= size or spent >= share:
            chunks.append(current)
            current, spent = [], 0.0
    if current:
        chunks.append(current)
    return chunks
