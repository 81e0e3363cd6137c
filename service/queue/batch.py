"""One batch through the queue, on the API side: its chunks enqueued on RQ queues, its results
collected, lost chunks re-run, until every item has exactly one outcome.

Runs on a thread of its own (it blocks on Redis). What it guarantees:

- results are recorded per item position in an `outcomes.OutcomeLedger`, first one wins: a chunk
  that finishes twice (its first worker was only slow, or stopped) counts once;
- chunks go on the queues only as `grants.Grants` allows (a fair share of the live workers'
  loops, round-robin across tenants and batches), so no batch queues another behind all of it;
- a chunk claimed by a worker whose lease then lapses (the worker was killed, stopped or cut off)
  is re-enqueued at once, and so is one taken off its queue but never claimed (its worker died
  in between, or its job failed); a chunk lost twice is split into single items, and a single
  item lost twice is judged 0 as `poison` (as the local pool judges an item that kills two
  workers), so an item that kills every worker it meets costs at most three of them;
- chunks of a domain no live worker has served for `queue_wait_s` come back `infra_error`
  (`workers_unavailable`), and items with no outcome by the deadline `deadline_exceeded`;
- Redis unreachable: `Unavailable`, at once (the request fails fast; nothing is guessed).
"""

from __future__ import annotations

import logging
import math
import pickle
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import redis
from rq import Queue
from rq.job import Job

from reward_specs import Outcome, codes
from service.core.logs import request_id
from service.dispatch.base import Unavailable, Work
from service.dispatch.outcomes import POISON_MESSAGE, OutcomeLedger
from service.queue import keys, leases, timings, transport
from service.queue.grants import Grants

WAKE_S = 0.1
"""How often a batch waiting for results looks for chunks granted to it by other threads."""

__all__ = ["BatchRun", "Counters", "chunk_size"]

log = logging.getLogger(__name__)

_MAX_LAPSES = 2


@dataclass
class Counters:
    """Counts since start, shared by a dispatcher's batches (under `lock`)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    chunks: int = 0
    retries: int = 0
    """Chunks re-enqueued after their worker was lost."""
    abandoned: int = 0
    """Chunks whose worker's lease lapsed."""
    duplicates: int = 0
    """Outcomes that came a second time (a chunk finished twice) and were dropped."""
    poison_items: int = 0
    orphaned_items: int = 0
    """Items that came back `workers_unavailable` (no live worker for their domain)."""
    unreadable: int = 0
    """Results that could not be read and were dropped."""

    def add(self, **counts: int) -> None:
        with self.lock:
            for name, n in counts.items():
                setattr(self, name, getattr(self, name) + n)


@dataclass(eq=False)
class _ChunkJob:
    """A part of a batch sent as one RQ job (re-sent as new ones if its worker is lost)."""

    domain: str
    positions: list[int]
    lapses: int = 0
    job_id: str = ""
    """Set once enqueued (granted)."""
    held: bool = False
    """Counted in the grants until it is finished or lost."""
    orphan_since: float | None = None
    unclaimed_since: float | None = None


def chunk_size(n: int, workers: int, configured: int) -> int:
    """Items per job: `configured`, or about four jobs per live worker, between 1 and 256 (a
    worker spreads a job over all its processes; a lost job is cheap to redo)."""
    if configured:
        return configured
    return max(1, min(256, math.ceil(n / (4 * max(1, workers)))))


class BatchRun:
    def __init__(
        self,
        client: redis.Redis,
        batch_id: str,
        work: Work,
        *,
        chunk_items: Callable[[str, int], int],
        alive: Callable[[str], int],
        queue_wait_s: float,
        counters: Counters,
        grants: Grants,
        tenant: str = "",
        queue_of: Callable[[str], str] = keys.queue_name,
    ) -> None:
        """`work`'s items are all of domains that have a queue; `chunk_items(domain, n)` is
        the job size for `n` items of a domain, `alive(domain)` how many live workers serve
        it, `queue_of(domain)` the RQ queue its chunks go on (a sandboxed domain's: its
        environment's)."""
        self.client = client
        self.queue_of = queue_of
        self.batch_id = batch_id
        self.log_extra = {"request_id": request_id()}
        """The request this batch serves, named on its log lines (they come from other threads)."""
        self.spec_name = work.spec.name
        self.items = work.items
        self.deadline = work.deadline
        self.deadline_at = 0.0
        """The deadline on Redis's clock (`transport.server_time`), set by `clock` before `run`."""
        self.alive = alive
        self.queue_wait_s = queue_wait_s
        self.counters = counters
        self.grants = grants
        self.tenant = tenant
        self.outcomes = OutcomeLedger(len(work.items), work.on_done, self.log_extra)
        self.granted: deque[_ChunkJob] = deque()
        self.cancelled = threading.Event()
        self._stopped_by = (codes.DEADLINE_EXCEEDED, "the request deadline passed")
        self._jobs = 0
        self._chunks: list[_ChunkJob] = []
        by_domain: dict[str, list[int]] = {}
        for position, item in enumerate(work.items):
            by_domain.setdefault(item.domain, []).append(position)
        for domain, positions in by_domain.items():
            size = chunk_items(domain, len(positions))
            for start in range(0, len(positions), size):
                self._chunks.append(_ChunkJob(domain, positions[start : start + size]))

    def clock(self, redis_now: float) -> None:
        """Place the deadline on Redis's clock, `redis_now` being its time now."""
        self.deadline_at = redis_now + max(0.0, self.deadline - time.monotonic())

    def cancel(self, code: str, why: str) -> None:
        """Stop waiting (any thread): the items without an outcome get `infra_error` `code`."""
        self._stopped_by = (code, why)
        self.cancelled.set()

    def grant(self, chunk: _ChunkJob) -> None:
        """`grants` lets `chunk` go on its queue (any thread; this batch's loop enqueues it)."""
        chunk.held = True
        self.granted.append(chunk)

    def _offer(self, chunks: Sequence[_ChunkJob], *, front: bool = False) -> None:
        by_domain: dict[str, list[_ChunkJob]] = {}
        for chunk in chunks:
            by_domain.setdefault(chunk.domain, []).append(chunk)
        for domain, offered in by_domain.items():
            self.grants.offer(self, domain, offered, front=front)

    def _release_finished(self) -> None:
        for chunk in self._chunks:
            if chunk.held and not self._todo(chunk):
                self._release(chunk)

    def _release(self, chunk: _ChunkJob) -> None:
        if chunk.held:
            chunk.held = False
            self.grants.finish(self, chunk.domain)

    def _send_granted(self) -> None:
        chunks = []
        while self.granted:
            chunks.append(self.granted.popleft())
        if chunks:
            self._enqueue(chunks)

    # ------------------------------------------------------------------ the loop

    def run(self) -> list[Outcome]:
        """Block until every item has its outcome (or the deadline, or `cancelled`)."""
        key = keys.results_key(self.batch_id)
        try:
            self._offer(self._chunks)
            checked = time.monotonic()
            while not self.outcomes.complete and not self.cancelled.is_set():
                self._send_granted()
                now = time.monotonic()
                if now >= self.deadline + timings.RESULT_GRACE_S:
                    break
                wait = min(WAKE_S, self.deadline + timings.RESULT_GRACE_S - now)
                popped = self.client.blpop([key], timeout=max(0.01, wait))
                if popped is not None:
                    self._take(popped[1])
                if time.monotonic() - checked >= timings.LEASE_CHECK_S:
                    self._check_chunks()
                    checked = time.monotonic()
            self.client.delete(key)
        except transport.REDIS_ERRORS as exc:
            raise Unavailable(
                f"the queue (Redis) became unreachable during this batch: {exc}; "
                "nothing of the batch is returned, retry once the queue is back"
            ) from exc
        finally:
            self.grants.forget(self)
        code, why = self._stopped_by
        self.outcomes.fill_missing(code, f"{why} before this item was scored")
        return self.outcomes.outcomes()

    def _record(self, position: int, outcome: Outcome) -> bool:
        return self.outcomes.record(position, outcome)

    def _take(self, payload: object) -> None:
        """Record a chunk's outcomes; one that cannot be read (a worker of another version, a
        stray write) is dropped and logged: its items are re-run or time out like lost ones."""
        try:
            outcomes = _outcomes(payload)
        except Exception:  # whatever the bytes hold, they never fail the batch
            log.exception(
                "batch %s: a result that cannot be read was dropped",
                self.batch_id,
                extra=self.log_extra,
            )
            self.counters.add(unreadable=1)
            return
        duplicates = 0
        for position, outcome in outcomes:
            if 0 <= position < len(self.items) and not self._record(position, outcome):
                duplicates += 1
        if duplicates:
            self.counters.add(duplicates=duplicates)
        self._release_finished()

    def _drain(self) -> None:
        """Take every result already pushed, without waiting."""
        key = keys.results_key(self.batch_id)
        while True:
            payload = self.client.lpop(key)
            if payload is None:
                return
            self._take(payload)

    # ------------------------------------------------------------------ chunks

    def _todo(self, chunk: _ChunkJob) -> list[int]:
        return [p for p in chunk.positions if not self.outcomes.has(p)]

    def _enqueue(self, chunks: Sequence[_ChunkJob]) -> None:
        by_queue: dict[str, list[Any]] = {}
        remaining_s = max(1, math.ceil(self.deadline - time.monotonic()))
        for chunk in chunks:
            self._jobs += 1
            chunk.job_id = f"proctor-{self.batch_id}-{self._jobs}"
            tasks = [(p, self.items[p]) for p in chunk.positions]
            data = Queue.prepare_data(
                keys.JOB_FUNCTION,
                args=(
                    self.batch_id,
                    chunk.job_id,
                    self.spec_name,
                    tasks,
                    self.deadline_at,
                    self.tenant,
                ),
                job_id=chunk.job_id,
                timeout=remaining_s + 60,
                ttl=remaining_s,
                result_ttl=0,
                failure_ttl=int(timings.KEEP_S) * 10,
                description=f"proctor chunk of {len(tasks)} {chunk.domain} items",
            )
            by_queue.setdefault(chunk.domain, []).append(data)
        for domain, datas in by_queue.items():
            queue = Queue(self.queue_of(domain), connection=self.client)
            with self.client.pipeline() as pipe:
                queue.enqueue_many(datas, pipeline=pipe)
                pipe.execute()
        self.counters.add(chunks=len(chunks))

    def _check_chunks(self) -> None:
        """Re-run the chunks whose worker was lost; give up on domains no worker serves."""
        open_chunks = [c for c in self._chunks if c.job_id and self._todo(c)]
        if not open_chunks:
            return
        states = leases.chunk_states(self.client, [c.job_id for c in open_chunks])
        claims = dict(zip(open_chunks, states, strict=True))
        queued = self._queued([c for c in open_chunks if not claims[c][0]])
        now = time.monotonic()
        lapsed, unclaimed = [], []
        for chunk, (claimed, leased) in claims.items():
            if claimed:
                if not leased:
                    lapsed.append(chunk)
                continue
            # Taken off its queue, yet never claimed: its worker died (or lost Redis) in
            # between, or the job function failed. Lost too, once the worker had time to claim;
            # but no item of it was scored, so none of them is a suspect.
            if chunk.job_id in queued:
                chunk.unclaimed_since = None
            elif chunk.unclaimed_since is None:
                chunk.unclaimed_since = now
            elif now - chunk.unclaimed_since >= leases.CHUNK.ttl_s:
                unclaimed.append(chunk)
        if lapsed or unclaimed:
            self._drain()  # a chunk that finished pushed its results before it dropped its lease
            self._rerun([c for c in lapsed if self._todo(c)], strike=True)
            self._rerun([c for c in unclaimed if self._todo(c)], strike=False)
        self._check_orphans()
        self._release_finished()

    def _queued(self, chunks: Sequence[_ChunkJob]) -> set[str]:
        """The jobs of `chunks` still waiting on their queue, as RQ's job records say."""
        if not chunks:
            return set()
        jobs = Job.fetch_many([c.job_id for c in chunks], connection=self.client)
        return {j.id for j in jobs if j is not None and j.get_status(refresh=False) == "queued"}

    def _rerun(self, lost: Sequence[_ChunkJob], *, strike: bool) -> None:
        """Enqueue again what is left of `lost` chunks; with `strike`, their items were being
        scored when the worker was lost, and count that against them."""
        again: list[_ChunkJob] = []
        for chunk in lost:
            todo = self._todo(chunk)
            chunk.positions = []  # closed: what is left of it goes on as new chunks
            self.counters.add(abandoned=1)
            lapses = chunk.lapses + strike
            log.warning(
                "chunk %s (%d %s items) was lost (%d time(s) with its worker); re-running it",
                chunk.job_id,
                len(todo),
                chunk.domain,
                lapses,
                extra=self.log_extra,
            )
            if lapses < _MAX_LAPSES:
                again.append(_ChunkJob(chunk.domain, todo, lapses))
            elif len(todo) > 1:  # which item killed the workers? each goes alone from now
                again += [_ChunkJob(chunk.domain, [p], 1) for p in todo]
            else:
                self.counters.add(poison_items=1)
                self._record(todo[0], Outcome.judged_zero("poison", message=POISON_MESSAGE))
        if again:
            self._chunks += again
            self.counters.add(retries=len(again))
            self._offer(again, front=True)
        for chunk in lost:  # after the offer: what was lost takes the first slots freed
            self._release(chunk)

    def _check_orphans(self) -> None:
        now = time.monotonic()
        for chunk in self._chunks:
            todo = self._todo(chunk)
            if not todo:
                continue
            if self.alive(chunk.domain):
                chunk.orphan_since = None
                continue
            if chunk.orphan_since is None:
                chunk.orphan_since = now
            elif now - chunk.orphan_since >= self.queue_wait_s:
                message = (
                    f"no worker for domain {chunk.domain!r} was alive for "
                    f"{self.queue_wait_s:g}s while this item waited"
                )
                self.counters.add(orphaned_items=len(todo))
                for position in todo:
                    failed = Outcome.failure("infra_error", codes.WORKERS_UNAVAILABLE, message)
                    self._record(position, failed)


def _outcomes(payload: object) -> list[tuple[int, Outcome]]:
    """A worker's result: (position, outcome) pairs, checked to be that."""
    if not isinstance(payload, bytes):
        raise TypeError(f"a result is {type(payload).__name__}, not bytes")
    value = pickle.loads(payload)
    if not isinstance(value, list) or not all(
        isinstance(pair, tuple)
        and len(pair) == 2
        and isinstance(pair[0], int)
        and isinstance(pair[1], Outcome)
        for pair in value
    ):
        raise TypeError("a result is not a list of (position, outcome) pairs")
    return value
