"""Queue mode's runs: `POST /v1/run`'s programs and the compatibility routes', run by workers.

verl sends one SandboxFusion request per test case, thousands per step: on the API host's own
run pool that traffic would not grow with the workers. So in queue mode each run is one RQ job
on the `proctor-run` queue, taken by the run loops of the workers that serve runs (`run` in
their `--domains`, the default; `run.pool_size` loops each, one sandbox of the worker's
`RunSandbox` per loop). What a run gets here is what a chunk gets from `batch.BatchRun`:

- it waits for a grant (`grants.Grants`, in the domain `run`): no more runs are on the queue or
  running than the live workers have run loops, granted round-robin across tenants, so one
  key's flood of runs does not queue another key's run behind it;
- the worker claims it and holds its lease (`leases.CHUNK`) while it runs: a run whose lease
  lapses is enqueued again at once, one taken off the queue and never claimed once the lease's
  TTL has passed; a run lost with its worker twice is not run a third time, and its answer is a
  failed run (`runs.lost_twice`), as an item that kills two workers is judged 0;
- no live worker serving runs for `queue_wait_s` while it waits: `infra_error`
  (`workers_unavailable`); no answer by the request deadline: `deadline_exceeded`; Redis
  unreachable: `infra_error` (`workers_unavailable`) at once;
- the worker pushes the sandbox's `RunResult` (or its failure, an `infra_error` outcome) on this
  API process's own result list, which one collector thread reads; the route's `read` runs here.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import math
import os
import pickle
import secrets
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import redis
from rq import Queue
from rq.job import Job

from reward_specs import codes
from sandboxes import RunRequest, RunResult, SandboxStats
from service.core.tenancy import tenant
from service.queue import keys, leases, timings, transport
from service.queue.grants import Grants
from service.settings import Settings
from service.work.runs import RunOutcome, RunPoolStats, lost_twice, outcome_of, tally

__all__ = ["RUNS", "QueueRuns", "RunsView"]

log = logging.getLogger(__name__)

T = TypeVar("T")

RUNS = "run"
"""The runs' name among a worker's `--domains`, and their domain in the grants."""
WAKE_S = 0.1
"""How long the collector waits for a result before it looks at leases and orphans again."""
_MAX_LAPSES = 2

Answer = RunResult | RunOutcome
"""What a worker sends back for a run: the sandbox's result, or the outcome of its failure."""


@dataclass(frozen=True, slots=True)
class RunsView:
    """What the dispatcher's snapshot of the live workers says of runs."""

    reachable: bool
    loops: int
    """Run loops of the live workers (runs at once)."""
    hosts: int
    """Live workers that serve runs."""
    sandboxes: SandboxStats


@dataclass(eq=False)
class _Ticket:
    """One run, from its offer to the grants to its answer (compared by identity: a grantee)."""

    tenant: str
    loop: asyncio.AbstractEventLoop
    request: RunRequest
    run_id: str
    granted: asyncio.Event = field(default_factory=asyncio.Event)
    answer: asyncio.Future[Answer] = field(init=False)
    job_id: str = ""
    """Set once enqueued; a new one each time it is enqueued again."""
    deadline_at: float = 0.0
    """The request deadline on Redis's clock."""
    jobs: int = 0
    lapses: int = 0
    unclaimed_since: float | None = None
    orphan_since: float | None = None
    settled: bool = False
    """Answered (set on the thread that answers it, before its future is, on the loop): the
    collector must not take a run it has just answered for a lost one."""

    def __post_init__(self) -> None:
        self.answer = self.loop.create_future()

    def __hash__(self) -> int:
        return id(self)

    def grant(self, chunk: Any) -> None:
        """The grants let this run go on the queue (under their lock: no I/O)."""
        self.loop.call_soon_threadsafe(self.granted.set)

    def settle(self, answer: Answer) -> None:
        """Answer the run (any thread); the first answer wins."""
        self.settled = True
        self.loop.call_soon_threadsafe(_set_once, self.answer, answer)


def _set_once(future: asyncio.Future[Answer], answer: Answer) -> None:
    if not future.done():
        future.set_result(answer)


class QueueRuns:
    """`service.work.runs.Runs` for queue mode: each run a job for the workers' run loops."""

    def __init__(
        self, settings: Settings, client: redis.Redis, view: Callable[[], RunsView]
    ) -> None:
        self.settings = settings
        self.client = client
        self._view = view
        self._grants = Grants(self._slots)
        self._results = keys.run_results_key(
            f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(4)}"
        )
        self._tickets: dict[str, _Ticket] = {}
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._answered: dict[str, int] = {}
        self._collector: threading.Thread | None = None
        self._stopping = threading.Event()

    def _slots(self, domain: str) -> tuple[int, int]:
        view = self._view()
        return view.loops, view.hosts

    async def run(self, request: RunRequest) -> RunOutcome:
        return await self.execute(request, outcome_of)

    async def execute(
        self,
        request: RunRequest,
        read: Callable[[RunResult], T],
        start_within_s: float | None = None,
    ) -> T | RunOutcome:
        """`Runs.execute` on the workers: `start_within_s` bounds the wait for a grant (a run
        loop of a live worker)."""
        self._start_collector()
        started = time.monotonic()
        deadline = started + self.settings.request_deadline_s
        run_id = f"{next(self._ids)}-{secrets.token_hex(4)}"
        ticket = _Ticket(tenant(), asyncio.get_running_loop(), request, run_id)
        with self._lock:
            self._tickets[run_id] = ticket
        try:
            self._grants.offer(ticket, RUNS, [ticket])
            answer = await self._answer(ticket, deadline, start_within_s)
        finally:
            with self._lock:
                self._tickets.pop(run_id, None)
            self._grants.forget(ticket)
        if isinstance(answer, RunOutcome):
            return tally(self._answered, answer)
        return tally(self._answered, await asyncio.to_thread(read, answer))

    async def _answer(
        self, ticket: _Ticket, deadline: float, start_within_s: float | None
    ) -> Answer:
        """The run's answer: the worker's, or the outcome of a wait that ended first."""
        grant: asyncio.Future[Any] = asyncio.ensure_future(ticket.granted.wait())
        limit = deadline - time.monotonic()
        if start_within_s is not None:
            limit = min(limit, start_within_s)
        waits: set[asyncio.Future[Any]] = {grant, ticket.answer}
        done, _ = await asyncio.wait(
            waits, timeout=max(0.0, limit), return_when=asyncio.FIRST_COMPLETED
        )
        grant.cancel()
        if ticket.answer.done():  # no live worker for `queue_wait_s`
            return ticket.answer.result()
        if not done:
            waited = time.monotonic() - (deadline - self.settings.request_deadline_s)
            message = f"no sandbox of the workers' run pools was free within {waited:.0f} s"
            return RunOutcome(
                "infra_error", error_code=codes.DEADLINE_EXCEEDED, error_message=message
            )
        try:
            await asyncio.to_thread(self._enqueue, ticket, deadline)
        except transport.REDIS_ERRORS as exc:
            url = transport.redacted(self.settings.queue_url or "")
            message = f"the queue at {url} is unreachable ({exc})"
            return RunOutcome(
                "infra_error", error_code=codes.WORKERS_UNAVAILABLE, error_message=message
            )
        left = deadline + timings.RESULT_GRACE_S - time.monotonic()
        try:
            return await asyncio.wait_for(asyncio.shield(ticket.answer), timeout=max(0.0, left))
        except TimeoutError:
            message = (
                f"no worker answered this run within {self.settings.request_deadline_s:g} s "
                "(request_deadline_s)"
            )
            return RunOutcome(
                "infra_error", error_code=codes.DEADLINE_EXCEEDED, error_message=message
            )

    def _enqueue(self, ticket: _Ticket, deadline: float | None = None) -> None:
        """Put `ticket` on the run queue (again, after a loss: a new job id)."""
        if deadline is not None:
            now = transport.server_time(self.client)
            ticket.deadline_at = now + max(0.0, deadline - time.monotonic())
        remaining = max(1, math.ceil(ticket.deadline_at - transport.server_time(self.client)))
        ticket.jobs += 1
        job_id = f"proctor-run-{ticket.run_id}-{ticket.jobs}"
        data = Queue.prepare_data(
            keys.RUN_FUNCTION,
            args=(self._results, ticket.run_id, job_id, ticket.request, ticket.deadline_at),
            job_id=job_id,
            timeout=remaining + 60,
            ttl=remaining,
            result_ttl=0,
            failure_ttl=int(timings.KEEP_S) * 10,
            description="proctor run",
        )
        queue = Queue(keys.RUN_QUEUE, connection=self.client)
        with self.client.pipeline() as pipe:
            queue.enqueue_many([data], pipeline=pipe)
            pipe.execute()
        ticket.job_id = job_id
        ticket.unclaimed_since = None

    # ------------------------------------------------------------------ the collector

    def _start_collector(self) -> None:
        with self._lock:
            if self._collector is None:
                self._collector = threading.Thread(
                    target=self._collect, name="proctor-run-collector", daemon=True
                )
                self._collector.start()

    def _collect(self) -> None:
        """Take the workers' answers; look for lost runs and orphans every `LEASE_CHECK_S`."""
        checked = time.monotonic()
        while not self._stopping.is_set():
            try:
                popped = self.client.blpop([self._results], timeout=WAKE_S)
                if popped is not None:
                    self._take(popped[1])
                if time.monotonic() - checked >= timings.LEASE_CHECK_S:
                    self._check()
                    checked = time.monotonic()
            except transport.REDIS_ERRORS as exc:
                log.warning("runs: the queue is unreachable (%s); retrying", exc)
                self._stopping.wait(timings.LEASE_CHECK_S)
            except Exception:  # a bug of ours must not leave every run without its answer
                log.exception("the run collector failed; it goes on")

    def _take(self, payload: object) -> None:
        try:
            if not isinstance(payload, bytes):
                raise TypeError(f"a run's answer is {type(payload).__name__}, not bytes")
            run_id, answer = pickle.loads(payload)
            if not isinstance(run_id, str) or not isinstance(answer, RunResult | RunOutcome):
                raise TypeError(f"a run's answer is {type(answer).__name__}")
        except Exception:  # whatever the bytes hold, they never stop the collector
            log.exception("runs: an answer that cannot be read was dropped")
            return
        with self._lock:
            ticket = self._tickets.get(run_id)
        if ticket is not None:
            ticket.settle(answer)

    def _check(self) -> None:
        with self._lock:
            tickets = [t for t in self._tickets.values() if not t.settled]
        self._check_orphans(tickets)
        enqueued = [t for t in tickets if t.job_id]
        if not enqueued:
            return
        states = leases.chunk_states(self.client, [t.job_id for t in enqueued])
        pairs = list(zip(enqueued, states, strict=True))
        queued = self._queued([ticket for ticket, (claimed, _) in pairs if not claimed])
        now = time.monotonic()
        for ticket, (claimed, leased) in pairs:
            if claimed and not leased:
                self._lost(ticket, strike=True)
            elif claimed or ticket.job_id in queued:
                ticket.unclaimed_since = None
            elif ticket.unclaimed_since is None:
                ticket.unclaimed_since = now
            elif now - ticket.unclaimed_since >= leases.CHUNK.ttl_s:
                self._lost(ticket, strike=False)

    def _queued(self, tickets: list[_Ticket]) -> set[str]:
        if not tickets:
            return set()
        jobs = Job.fetch_many([t.job_id for t in tickets], connection=self.client)
        return {j.id for j in jobs if j is not None and j.get_status(refresh=False) == "queued"}

    def _lost(self, ticket: _Ticket, *, strike: bool) -> None:
        """`ticket`'s job was lost (its worker with it, with `strike`): run it again, or answer
        it once it was lost with its worker twice. An answer already pushed wins."""
        self._drain()
        if ticket.settled:
            return
        ticket.lapses += strike
        log.warning("run %s was lost (%d time(s) with its worker)", ticket.job_id, ticket.lapses)
        if ticket.lapses >= _MAX_LAPSES:
            ticket.settle(lost_twice())
            ticket.job_id = ""
            return
        self._enqueue(ticket)

    def _drain(self) -> None:
        while (payload := self.client.lpop(self._results)) is not None:
            self._take(payload)

    def _check_orphans(self, tickets: list[_Ticket]) -> None:
        """Answer the runs that waited `queue_wait_s` with no live worker serving runs."""
        if self._view().hosts:
            for ticket in tickets:
                ticket.orphan_since = None
            return
        now, wait = time.monotonic(), self.settings.queue_wait_s
        for ticket in tickets:
            if ticket.orphan_since is None:
                ticket.orphan_since = now
            elif now - ticket.orphan_since >= wait:
                message = f"no worker serving runs was alive for {wait:g} s while this run waited"
                ticket.settle(
                    RunOutcome(
                        "infra_error", error_code=codes.WORKERS_UNAVAILABLE, error_message=message
                    )
                )

    # ------------------------------------------------------------------ health

    def pending(self) -> int:
        """Runs waiting for a run loop of a live worker."""
        with self._lock:
            return sum(not t.granted.is_set() for t in self._tickets.values())

    def ready(self) -> bool:
        """The queue is reachable (runs wait for workers as chunks do: `workers` says whether
        any is alive)."""
        return self._view().reachable

    def stats(self) -> RunPoolStats:
        """The live workers' run pools, summed, and this API process's runs."""
        return RunPoolStats(self._view().sandboxes, self.pending(), dict(self._answered))

    def close(self) -> None:
        self._stopping.set()
        collector = self._collector
        if collector is not None:
            collector.join(timeout=2 * WAKE_S + timings.SOCKET_TIMEOUT_S)
        with contextlib.suppress(*transport.REDIS_ERRORS):
            self.client.delete(self._results)
