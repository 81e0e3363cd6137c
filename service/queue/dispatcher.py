"""The queue backend's API side: `Dispatcher` for `proctor serve --queue URL`.

Admission first: a batch is refused with `Overloaded` (429) when `max_queue_depth` items already
wait for results, and with `Unavailable` (503) when, after `queue_wait_s`, a domain it needs has
no live worker, or when Redis cannot be reached. Then its chunks go on RQ queues, one per domain
(`BatchRun`), and the request waits for their results. Items of domains no scorer knows are
answered here (`invalid`, as the engine answers them): they have no queue.

A monitor task keeps a snapshot of Redis's reachability, the live workers per domain and the
queue depths, for readiness, metrics and routing; admission reads Redis itself.

Code chunks go only to workers whose sandbox has the API's code environment (its content
digest, `reward_specs.code.environment`, which is in the code domain's spec hash): they go on
that digest's queue (`keys.queue_name`), which only such workers take from. The digest is
`settings.code_environment` if set, else the one the first live code workers report (the most
of them), kept for the process's life. A live code worker with another digest gets no code
chunk; `/readyz` says `code_environment: false` while there is one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import re
import secrets
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from rq import Queue

from reward_specs import Outcome, Registry, ScoreContext, codes, score_item
from sandboxes import SandboxStats
from service.core.logs import request_id
from service.core.tenancy import tenant
from service.dispatch.base import (
    DispatchStats,
    Overloaded,
    Unavailable,
    Work,
    sandboxed_domains,
)
from service.dispatch.judges import JudgeWatch, judge_setup
from service.queue import keys, timings, transport
from service.queue.batch import BatchRun, Counters, chunk_size
from service.queue.grants import Grants
from service.queue.run_queue import RunsView
from service.settings import Settings

__all__ = ["QueueDispatcher"]


def _batch_id() -> str:
    """A new batch's id: the request's id first (in the characters RQ allows in a job id), so
    that a worker's log line naming the batch names the request too."""
    prefix = re.sub(r"[^A-Za-z0-9_-]", "_", request_id() or "batch")
    return f"{prefix}-{secrets.token_hex(8)}"


log = logging.getLogger(__name__)

MONITOR_S = 0.5
"""How often the snapshot of workers and queues is refreshed."""
MAX_BATCH_THREADS = 256
"""Batches in flight at once per API process (each waits on Redis on a thread of its own)."""


@dataclass(frozen=True, slots=True)
class _QueueView:
    """What the API side last saw of the queue: whether Redis answers, the live workers, the
    queues' depths."""

    reachable: bool = False
    error: str | None = "not checked yet"
    workers: dict[str, transport.WorkerReport] = field(default_factory=dict)
    """Live worker -> what it last said of itself."""
    depth: dict[str, int] = field(default_factory=dict)
    """Domain -> chunks waiting in its queue."""
    sandboxed: frozenset[str] = frozenset()
    """The domains whose items run in a sandbox."""
    expected: dict[str, str] = field(default_factory=dict)
    """Sandboxed domain -> the environment digest its workers must have (once known)."""

    def serves(self, report: transport.WorkerReport, domain: str) -> bool:
        """Whether a worker takes `domain`'s chunks: it serves the domain, and for a sandboxed
        one its environment is the expected one."""
        if domain not in report.domains:
            return False
        if domain not in self.sandboxed:
            return True
        expected = self.expected.get(domain)
        return expected is not None and report.environment(domain) == expected

    def alive(self, domain: str) -> int:
        return sum(self.serves(r, domain) for r in self.workers.values())

    def slots(self, domain: str) -> tuple[int, int]:
        """(RQ loops of the live workers serving `domain`, those workers)."""
        serving = [r for r in self.workers.values() if self.serves(r, domain)]
        return sum(max(1, r.loops) for r in serving), len(serving)

    def strangers(self, domain: str) -> dict[str, str | None]:
        """Live workers of `domain` whose environment is not the expected one -> theirs."""
        return {
            name: r.environment(domain)
            for name, r in self.workers.items()
            if domain in r.domains and r.environment(domain) != self.expected.get(domain)
        }

    def total(self, count: str) -> int:
        return sum(getattr(report, count) for report in self.workers.values())

    def runs(self) -> RunsView:
        """The live workers' run loops and run pools, summed."""
        serving = [r for r in self.workers.values() if r.run_loops]
        loops = sum(r.run_loops for r in serving)
        counts = [r.run_sandboxes for r in serving]
        size, live, idle, started, retired = (sum(c[i] for c in counts) for i in range(5))
        return RunsView(
            self.reachable, loops, len(serving), SandboxStats(size, live, idle, started, retired)
        )


class QueueDispatcher:
    def __init__(self, settings: Settings, registry: Registry) -> None:
        if settings.queue_url is None:
            raise ValueError("the queue backend needs settings.queue_url")
        self.settings = settings
        self.registry = registry
        self.url = transport.redacted(settings.queue_url)
        self.client = transport.connect(settings.queue_url)
        self.counters = Counters()
        self._queues = {
            s.domain: Queue(keys.queue_name(s.domain), connection=self.client) for s in registry
        }
        self._sandboxed = frozenset(sandboxed_domains(registry))
        pinned = settings.code_environment
        self._expected = {d: pinned for d in self._sandboxed} if pinned else {}
        self._strangers_seen: set[tuple[str, str | None]] = set()
        self._adopting = threading.Lock()
        self._view = _QueueView(sandboxed=self._sandboxed, expected=self._expected)
        self._threads = ThreadPoolExecutor(MAX_BATCH_THREADS, thread_name_prefix="proctor-queue")
        self._monitor: asyncio.Task[None] | None = None
        self._batches: set[BatchRun] = set()
        self.grants = Grants(self._view_slots)
        # The judge's models in this API's hashes: it reads the endpoints of its own settings
        # (the workers', which call them, are configured alike); a worker that finds them
        # changed makes its judge items `environment_changed` itself.
        self._judges = JudgeWatch(judge_setup(settings), settings.environment_probe_interval_s)

    async def start(self) -> None:
        await asyncio.to_thread(self._judges.check)
        await asyncio.to_thread(self._refresh)
        if not self._view.reachable:
            log.error("the queue at %s is unreachable: %s", self.url, self._view.error)
        self._monitor = asyncio.create_task(self._watch(), name="proctor-queue-monitor")

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(MONITOR_S)
            try:
                await asyncio.get_running_loop().run_in_executor(self._threads, self._refresh)
            except Exception:  # a bug of ours must not freeze the snapshot for good
                log.exception("the queue monitor failed; it goes on")

    def _refresh(self) -> None:
        try:
            workers = self._live_workers()
            self._adopt(workers)
            view = _QueueView(True, None, workers, self._depths(), self._sandboxed, self._expected)
        except transport.REDIS_ERRORS as exc:
            view = _QueueView(
                False, f"{type(exc).__name__}: {exc}", {}, {}, self._sandboxed, self._expected
            )
        self._view = view
        self._warn_of_strangers(view)

    def _adopt(self, workers: dict[str, transport.WorkerReport]) -> None:
        """With no `code_environment` set: take, for each sandboxed domain not yet known, the
        environment most of its live workers report (then the first in order), for good."""
        with self._adopting:  # the monitor and the batch threads' admissions alike
            for domain in sorted(self._sandboxed - self._expected.keys()):
                reported = [r.environment(domain) for r in workers.values() if domain in r.domains]
                seen = Counter(digest for digest in reported if digest is not None)
                if seen:
                    digest = min(seen, key=lambda d: (-seen[d], d))
                    self._expected = {**self._expected, domain: digest}
                    log.info("%s environment %s, as its live workers report", domain, digest)

    def _warn_of_strangers(self, view: _QueueView) -> None:
        """Log once while it is live a worker whose environment is not the one expected: it
        gets no chunks of that domain."""
        live: set[tuple[str, str | None]] = set()
        for domain in sorted(self._sandboxed):
            for name, digest in view.strangers(domain).items():
                live.add((name, digest))
                if (name, digest) not in self._strangers_seen:
                    log.warning(
                        "worker %s has %s environment %s, this API expects %s: it gets no %s "
                        "chunks", name, domain, digest, view.expected.get(domain), domain,
                    )  # fmt: skip
        if view.reachable:
            self._strangers_seen = live

    def _queue_of(self, domain: str) -> str:
        """The RQ queue of `domain`'s chunks: for a sandboxed domain, its environment's."""
        return keys.queue_name(domain, self._expected.get(domain))

    def _live_workers(self) -> dict[str, transport.WorkerReport]:
        """Live worker -> its report; forgets the workers that are gone."""
        names = sorted(_text(name) for name in self.client.smembers(keys.WORKERS_KEY))
        if not names:
            return {}
        values = self.client.mget([keys.alive_key(name) for name in names])
        gone = [name for name, value in zip(names, values, strict=True) if value is None]
        if gone:
            self.client.srem(keys.WORKERS_KEY, *gone)
        reports = {}
        for name, value in zip(names, values, strict=True):
            report = None if value is None else transport.WorkerReport.decode(value)
            if report is not None:
                reports[name] = report
        return reports

    def _depths(self) -> dict[str, int]:
        with self.client.pipeline(transaction=False) as pipe:
            for domain in self._queues:
                pipe.llen(Queue.redis_queue_namespace_prefix + self._queue_of(domain))
            counts = pipe.execute()
        return dict(zip(self._queues, counts, strict=True))

    async def stop(self) -> None:
        if self._monitor is not None:
            self._monitor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._monitor
        for batch in list(self._batches):
            batch.cancel(codes.SHUTTING_DOWN, "the service is shutting down")
        self._threads.shutdown(wait=False, cancel_futures=True)
        self.client.close()
        self._judges.close()

    def readiness(self) -> dict[str, bool]:
        """`queue` and `workers`; per sandboxed domain, `<domain>_environment`: false while a
        live worker of it has another environment than the one expected (none has it, or the
        workers disagree)."""
        view = self._view
        ready = {"queue": view.reachable, "workers": view.reachable and bool(view.workers)}
        for domain in sorted(self._sandboxed):
            ready[f"{domain}_environment"] = not view.strangers(domain)
        ready.update(self._judges.readiness())
        return ready

    def environments(self) -> dict[str, str]:
        judge = self._judges.digest
        return {**self._expected, "judge": judge} if judge else self._expected

    def stats(self) -> DispatchStats:
        """Processes, restarts, timeouts and poison items are summed over the live workers'
        reports (a worker that goes takes its counts with it), with this API's own poison
        items; `pending` is the chunks on the queues; the extras are counted here."""
        view, c = self._view, self.counters
        extras: dict[str, float] = {
            "chunks": c.chunks,
            "chunk_retries": c.retries,
            "abandoned_chunks": c.abandoned,
            "duplicate_results": c.duplicates,
            "orphaned_items": c.orphaned_items,
            "unreadable_results": c.unreadable,
            "queue_reachable": float(view.reachable),
            "worker_hosts": len(view.workers),
            "sandboxes": view.total("sandboxes"),
            "sandbox_replacements": view.total("sandbox_replacements"),
        }
        for domain in self._queues:
            extras[f"workers_alive:{domain}"] = view.alive(domain)
            extras[f"queued_chunks:{domain}"] = view.depth.get(domain, 0)
        return DispatchStats(
            backend="queue",
            workers=view.total("processes"),
            ready_workers=view.total("ready_processes"),
            pending=sum(view.depth.values()),
            restarts=view.total("restarts"),
            timeouts=view.total("timeouts"),
            poison_items=c.poison_items + view.total("poison_items"),
            broken=None if view.reachable else f"the queue at {self.url} is unreachable",
            extras=extras,
        )

    async def run(self, work: Work) -> list[Outcome]:
        outcomes: dict[int, Outcome] = {}
        queued: list[int] = []
        for position, item in enumerate(work.items):
            if item.domain in self._queues:
                queued.append(position)
                continue
            outcomes[position] = score_item(self.registry, work.spec, item, ScoreContext())
            work.done(position)
        if queued:
            batch = BatchRun(
                self.client,
                _batch_id(),
                work.part(queued),
                chunk_items=self._chunk_items,
                alive=self._view_alive,
                queue_wait_s=self.settings.queue_wait_s,
                counters=self.counters,
                grants=self.grants,
                tenant=tenant(),
                queue_of=self._queue_of,
            )
            loop = asyncio.get_running_loop()
            self._batches.add(batch)
            try:
                await loop.run_in_executor(self._threads, self._admit, batch)
                scored = await loop.run_in_executor(self._threads, self._run_admitted, batch)
            except asyncio.CancelledError:
                batch.cancel(
                    codes.DISPATCH_ERROR, "the request was cancelled"
                )  # ends at its next look
                raise
            finally:
                self._batches.discard(batch)
            outcomes.update(zip(queued, scored, strict=True))
        return [outcomes[position] for position in range(len(work.items))]

    def runs_view(self) -> RunsView:
        """What the last snapshot says of the workers serving runs (`service.queue.run_queue`)."""
        return self._view.runs()

    def _view_alive(self, domain: str) -> int:
        return self._view.alive(domain)

    def _view_slots(self, domain: str) -> tuple[int, int]:
        return self._view.slots(domain)

    def _chunk_items(self, domain: str, n: int) -> int:
        return chunk_size(n, self._view.alive(domain), self.settings.queue_chunk_size)

    # ------------------------------------------------------------------ batch threads

    def _admit(self, batch: BatchRun) -> None:
        """Refuse the batch if the queue is full, or if a domain it needs has no live worker
        within `queue_wait_s`; else count its items as waiting."""
        n = len(batch.items)
        domains = sorted({item.domain for item in batch.items})
        try:
            now = transport.server_time(self.client)
            batch.clock(now)
            waiting = self._waiting_items(now)
            limit = self.settings.max_queue_depth
            if waiting and waiting + n > limit:
                raise Overloaded(
                    f"{waiting} items are waiting in the queue and this request has {n}; "
                    f"the server takes at most {limit} (max_queue_depth): retry later"
                )
            give_up = time.monotonic() + min(
                self.settings.queue_wait_s, max(0.0, batch.deadline - time.monotonic())
            )
            while True:
                live = self._live_workers()
                self._adopt(live)
                view = _QueueView(True, None, live, {}, self._sandboxed, self._expected)
                missing = [d for d in domains if not view.alive(d)]
                if batch.cancelled.is_set():
                    return
                if not missing:
                    break
                if time.monotonic() >= give_up:
                    raise Unavailable(
                        f"no worker serving {self._named(missing, view)} is alive on the queue "
                        f"at {self.url} (waited {self.settings.queue_wait_s:g}s); start "
                        "`proctor worker --queue URL` for these domains",
                        retry_after_s=max(1, math.ceil(self.settings.queue_wait_s)),
                    )
                time.sleep(0.1)
            expiry = batch.deadline_at + timings.KEEP_S
            self.client.hset(keys.INFLIGHT_KEY, batch.batch_id, f"{n} {expiry}")
        except transport.REDIS_ERRORS as exc:
            raise Unavailable(
                f"the queue at {self.url} is unreachable ({type(exc).__name__}: {exc})"
            ) from exc

    def _named(self, domains: list[str], view: _QueueView) -> str:
        """`domains`, each sandboxed one with the environment its workers must have and the
        count of live workers that have another."""
        named = []
        for domain in domains:
            strangers = len(view.strangers(domain))
            if domain in self._sandboxed and strangers:
                expected = view.expected.get(domain)
                named.append(
                    f"{domain} in the environment {expected} ({strangers} live worker(s) of "
                    "another environment get no chunks of it)"
                )
            else:
                named.append(domain)
        return ", ".join(named)

    def _waiting_items(self, now: float) -> int:
        """Items of batches waiting for results (any API replica) at `now` (Redis's clock);
        forgets expired entries."""
        waiting, expired = 0, []
        for batch_id, value in self.client.hgetall(keys.INFLIGHT_KEY).items():
            try:
                count, expiry = _text(value).split()
                if float(expiry) < now:
                    expired.append(batch_id)
                else:
                    waiting += int(count)
            except ValueError:  # not ours: ignored, and dropped
                expired.append(batch_id)
        if expired:
            self.client.hdel(keys.INFLIGHT_KEY, *expired)
        return waiting

    def _run_admitted(self, batch: BatchRun) -> list[Outcome]:
        try:
            return batch.run()
        finally:
            with contextlib.suppress(*transport.REDIS_ERRORS):  # it expires by itself otherwise
                self.client.hdel(keys.INFLIGHT_KEY, batch.batch_id)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
