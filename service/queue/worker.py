"""`proctor worker --queue URL`: one command per machine that scores the chunks of RQ queues.

Why not RQ's default `Worker`: it forks a work horse per job, so every chunk would pay a cold
start (the verifiers' imports and grammars, the sandbox pool) that takes seconds, against
milliseconds of scoring. Instead the worker hosts the embedded default, warm, once: a
`LocalDispatcher` (the process pool, one process per core, and the sandbox pool for code) behind
the blocking calls of `BlockingDispatcher`, and runs RQ's non-forking `SimpleWorker` loops on
threads (`worker_concurrency` of them) that hand each chunk to it; each chunk is spread over all
the pool's processes. RQ still owns the queues, the job records and the registries (`rq info`
shows these workers).

A chunk is claimed in Redis when it starts and leased while it is scored (`leases.CHUNK`, which
says why that lease is ours and not RQ's): a worker that is killed, stopped or cut off stops
refreshing its leases, and the API re-runs its chunks within seconds. The worker says it is
alive (and which domains it serves, and its sandbox's environment digest) only while its pool is
ready; it takes code chunks from its digest's queue only, so an API sends them only to workers
that score them in the environment its code hash names. It survives Redis restarts: RQ's loops
reconnect (one that gives up is started again), and so do the lease and liveness beats.

A worker whose `--domains` name `run` (all do by default) also runs programs: `POST /v1/run`'s
and the compatibility routes' (`service.queue.run_queue`), each one RQ job on the `proctor-run`
queue, on loops of their own (one per sandbox of a `RunSandbox` of `run.pool_size`), claimed and
leased as chunks are.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import signal
import socket
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from types import FrameType
from typing import Any

from redis import Redis
from rq import Queue, SimpleWorker
from rq.timeouts import TimerDeathPenalty

from reward_specs import Item, Outcome, Registry, Spec, codes
from sandboxes import RunRequest, SandboxStats
from service.core.loading import load_all_specs, load_registry
from service.dispatch.base import Work, sandboxed_domains
from service.dispatch.blocking import BlockingDispatcher
from service.queue import keys, leases, timings, transport
from service.queue.run_queue import RUNS, Answer
from service.settings import Settings
from service.work.runs import RunSandbox

__all__ = ["WorkerHost", "run_program", "run_worker", "score_chunk"]

log = logging.getLogger(__name__)

_host: WorkerHost | None = None
"""The process's host, set by `run_worker`: the job function reaches the warm pool through it."""


def score_chunk(
    batch_id: str,
    job_id: str,
    spec_name: str,
    tasks: list[tuple[int, Item]],
    deadline: float,
    tenant: str = "",
) -> int:
    """RQ's job function (`keys.JOB_FUNCTION`): score `tasks` ((position, item) pairs) on the
    process's warm host and push their outcomes on the batch's result list. `deadline` is an
    instant on Redis's clock; `tenant` whose the batch is (the host's dispatcher shares its
    processes among tenants). The chunk is claimed, and leased while it is scored."""
    host = _host
    if host is None:
        raise RuntimeError("score_chunk runs inside `proctor worker` only")
    client = host.client
    remaining = deadline - transport.server_time(client)
    if remaining <= 0:
        return 0  # the API side has answered these items already
    keep = _ms(remaining + timings.KEEP_S)
    with host.leasing(job_id, keep):
        items = [item for _, item in tasks]
        outcomes = host.score(batch_id, spec_name, items, remaining, tenant)
    payload = pickle.dumps([(p, o) for (p, _), o in zip(tasks, outcomes, strict=True)])
    _answer(client, keys.results_key(batch_id), payload, keep, job_id)
    return len(tasks)


def _answer(client: Redis, key: str, payload: bytes, keep_ms: int, job_id: str) -> None:
    """Push a job's answer on `key` (kept `keep_ms`) and release the job's lease, in one
    transaction: an API that finds the lease gone finds the answer there."""
    with client.pipeline() as pipe:
        pipe.rpush(key, payload)
        pipe.pexpire(key, keep_ms)
        leases.CHUNK.release(pipe, job_id)
        pipe.execute()


def run_program(
    results_key: str, run_id: str, job_id: str, request: RunRequest, deadline: float
) -> int:
    """RQ's job function for a run (`keys.RUN_FUNCTION`): run `request` in the host's run pool
    and push (run_id, the sandbox's result or failure) on `results_key`, the list of the API
    process that waits for it. Claimed, and leased while it runs, as a chunk is."""
    host = _host
    if host is None or host.runs is None:
        raise RuntimeError("run_program runs inside a `proctor worker` that serves runs only")
    client = host.client
    remaining = deadline - transport.server_time(client)
    if remaining <= 0:
        return 0  # the API side has answered this run already
    keep = _ms(remaining + timings.KEEP_S)
    with host.leasing(job_id, keep):
        answer: Answer = host.runs.run(request)
    _answer(client, results_key, pickle.dumps((run_id, answer)), keep, job_id)
    return 1


class ChunkWorker(SimpleWorker):
    """RQ's non-forking worker, run on a thread of the host.

    RQ's `work` loop starts by installing its signal handlers, which only the main thread may
    do, so a loop on another thread cannot call it. `serve` is that loop made of RQ's public
    steps instead (`bootstrap`, which RQ provides for workers with a loop of their own,
    `check_for_suspension`, `dequeue_job_and_maintain_ttl`, `execute_job`, `teardown`); the
    host's main thread owns the signals, and stops a loop with `stop_after_job`."""

    death_penalty_class = TimerDeathPenalty
    """RQ's job timeout for threads (its default, `signal.alarm`, is the main thread's only): a
    backstop, since the dispatcher answers each item by the chunk's deadline itself."""
    max_connection_wait_time = 2.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.stopping = threading.Event()

    def stop_after_job(self) -> None:
        """End `serve` once its current job (if any) is done; any thread may call it."""
        self.stopping.set()

    def serve(self) -> None:
        """Take and run jobs until `stop_after_job`: a wait for a job lasts `dequeue_timeout`
        at most (its idle limit), so a stop is seen within that."""
        self.bootstrap(logging_level="WARNING")
        try:
            while not self.stopping.is_set():
                self.check_for_suspension(burst=False)
                found = self.dequeue_job_and_maintain_ttl(
                    self.dequeue_timeout, max_idle_time=self.dequeue_timeout
                )
                if found is not None:
                    self.execute_job(*found)
        finally:
            self.teardown()  # type: ignore[no-untyped-call]  # rq leaves it unannotated


class WorkerHost:
    """The warm scoring machinery of one machine, and its beats to Redis."""

    def __init__(self, settings: Settings, domains: Sequence[str] | None = None) -> None:
        if settings.queue_url is None:
            raise ValueError("a worker needs settings.queue_url")
        self.settings = settings
        registry = load_registry(settings.registry)
        self.specs: dict[str, Spec] = load_all_specs(registry, settings.spec_dirs)
        known = [s.domain for s in registry]
        chosen = list(domains if domains else [*known, RUNS])
        unknown = sorted(set(chosen) - {*known, RUNS})
        if unknown:
            raise ValueError(f"unknown domains {unknown}; this registry has {known} (and {RUNS})")
        self.runs = RunSandbox(settings) if RUNS in chosen else None
        """The run pool, when the worker serves runs (`run` among its domains)."""
        chosen = [d for d in chosen if d != RUNS]
        self.domains = chosen
        self.registry = Registry([s for s in registry if s.domain in chosen])
        self._full_registry = registry
        self.name = f"{socket.gethostname()}-{os.getpid()}"
        self.client = transport.connect(settings.queue_url)
        self.dispatcher = BlockingDispatcher(settings, self.registry)
        self._leases: set[str] = set()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self.environments: dict[str, str] = {}
        """Sandboxed domain -> its sandbox's environment digest, once started."""

    def start(self) -> None:
        self.dispatcher.start()
        self.environments = self.dispatcher.environments()
        if self.environments:  # the hashes its outcomes are scored under, as the API's
            self.specs = load_all_specs(
                self._full_registry, self.settings.spec_dirs, self.environments
            )
        threading.Thread(target=self._beat, name="proctor-host-beat", daemon=True).start()

    def stop(self) -> None:
        self._stopping.set()
        if self.runs is not None:
            self.runs.close()
        try:
            with self.client.pipeline() as pipe:
                pipe.delete(keys.alive_key(self.name))
                pipe.srem(keys.WORKERS_KEY, self.name)
                pipe.execute()
        except transport.REDIS_ERRORS:
            log.warning("could not withdraw this worker from the queue (it expires by itself)")
        self.dispatcher.stop()

    def ready(self) -> bool:
        """Whether the pool (and the sandbox, for code) can score: only then does the worker
        say it is alive, and take chunks."""
        runs_ready = self.runs is None or self.runs.ready()
        return runs_ready and all(self.dispatcher.readiness().values())

    def _beat(self) -> None:
        """Refresh the leases of the chunks held, and say this worker is alive while it is
        ready; a Redis that is down is retried, never fatal."""
        said_alive = 0.0
        while not self._stopping.wait(timings.LEASE_REFRESH_S):
            try:
                with self._lock:
                    held = list(self._leases)
                with self.client.pipeline(transaction=False) as pipe:
                    for job_id in held:
                        leases.CHUNK.refresh(pipe, job_id)
                    if time.monotonic() - said_alive >= timings.ALIVE_REFRESH_S:
                        ready = self.ready()
                        key = keys.alive_key(self.name)
                        if ready:
                            stats = self.dispatcher.stats()
                            report = transport.WorkerReport.of(
                                tuple(self.domains),
                                stats,
                                self.settings.worker_concurrency,
                                self.environments,
                                self.run_report(),
                            )
                            pipe.set(key, report.encode(), px=_ms(timings.ALIVE_TTL_S))
                            pipe.sadd(keys.WORKERS_KEY, self.name)
                        else:
                            pipe.delete(key)
                        said_alive = time.monotonic()
                    pipe.execute()
            except transport.REDIS_ERRORS as exc:
                log.warning("the queue is unreachable (%s); retrying", exc)
            except Exception:  # a bug of ours: were this thread gone, every lease would lapse
                log.exception("the worker's beat failed; it goes on")

    def run_report(self) -> tuple[int, SandboxStats] | None:
        """(run loops, run pool stats) for its report; None when it serves no runs. The pool's
        size is the configured one, also before its first run opens it."""
        if self.runs is None:
            return None
        size = self.settings.run.pool_size
        return size, replace(self.runs.stats(), size=size)

    @contextlib.contextmanager
    def leasing(self, job_id: str, keep_ms: int) -> Iterator[None]:
        """Claim chunk `job_id` (for `keep_ms`) and hold its lease, refreshed by the beat while
        the body runs; releasing it is the caller's, with the chunk's results."""
        with self.client.pipeline() as pipe:
            pipe.set(keys.claim_key(job_id), self.name, px=keep_ms)
            leases.CHUNK.acquire(pipe, job_id)
            pipe.execute()
        with self._lock:
            self._leases.add(job_id)
        try:
            yield
        finally:
            with self._lock:
                self._leases.discard(job_id)

    def score(
        self, batch_id: str, spec_name: str, items: list[Item], remaining_s: float, tenant: str
    ) -> list[Outcome]:
        """One outcome per item within `remaining_s`; a bug of ours fails every item, loudly."""
        spec = self.specs.get(spec_name)
        if spec is None:
            message = f"worker {self.name} has no spec {spec_name!r}"
            return [Outcome.failure("infra_error", codes.UNKNOWN_SPEC, message)] * len(items)
        deadline = time.monotonic() + remaining_s
        try:
            return self.dispatcher.run(Work(spec, items, deadline), tenant)
        except Exception as exc:  # a bug of ours: every item says so, none is lost
            log.exception("a chunk of batch %s failed in worker %s", batch_id, self.name)
            message = f"the worker failed on this chunk ({type(exc).__name__}: {exc})"
            return [Outcome.failure("infra_error", codes.DISPATCH_ERROR, message)] * len(items)


_RQ_WORKER_TTL_S = 18
"""RQ's worker TTL; its blocking dequeue waits `worker_ttl - 15` s, so a stop request is seen
within about 3 s (a lost worker is noticed through the leases, not through RQ's heartbeats)."""


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))


def run_worker(settings: Settings, domains: Sequence[str] | None = None) -> int:
    """Serve until SIGTERM or SIGINT: warm up, then run `worker_concurrency` RQ loops taking
    chunks (and one per run sandbox taking runs, if it serves them), starting again any that
    ends
    while the worker is not stopping (Redis was down, most often)."""
    global _host
    host = WorkerHost(settings, domains)
    host.start()
    _host = host
    loops = _Loops(host, settings.worker_concurrency, settings.run.pool_size)
    signal.signal(signal.SIGTERM, loops.request_stop)
    signal.signal(signal.SIGINT, loops.request_stop)
    url = transport.redacted(settings.queue_url or "")
    log.info(
        "worker %s serving %s%s on %s%s", host.name, host.domains,
        f" and runs ({settings.run.pool_size} sandboxes)" if host.runs is not None else "", url,
        "".join(f", {d} environment {e}" for d, e in sorted(host.environments.items())),
    )  # fmt: skip
    try:
        loops.serve()
        loops.join(settings.shutdown_grace_s)
    finally:
        host.stop()
    return 0


class _Loops:
    """The host's RQ loops, one thread each: `n` taking chunks of its domains, `runs` taking runs
    (if it serves them); the main thread starts them and restarts any that ends."""

    def __init__(self, host: WorkerHost, n: int, runs: int) -> None:
        self.host = host
        # A sandboxed domain's chunks are routed by its environment; the judge's environment
        # (its endpoints' models) is in the hash but routes nothing: its queue is the plain one.
        sandboxed = set(sandboxed_domains(host.registry))
        chunks = [
            Queue(
                keys.queue_name(d, host.environments.get(d) if d in sandboxed else None),
                connection=host.client,
            )
            for d in host.domains
        ]
        self.slots: list[list[Queue]] = [chunks] * n if chunks else []
        if host.runs is not None:
            self.slots += [[Queue(keys.RUN_QUEUE, connection=host.client)]] * runs
        self.stop = threading.Event()
        self.workers: list[ChunkWorker | None] = [None] * len(self.slots)
        self.threads: list[threading.Thread | None] = [None] * len(self.slots)
        self._generation = 0

    def request_stop(self, signum: int, frame: FrameType | None) -> None:
        self.stop.set()
        for slot in range(len(self.workers)):
            self._stop_loop(slot)

    def _stop_loop(self, slot: int) -> None:
        worker = self.workers[slot]
        if worker is not None:
            worker.stop_after_job()

    def serve(self) -> None:
        """Keep the loops running while the host is ready; while it is not (its pool broken,
        its sandbox gone), they stop after their job: chunks go to workers that can score."""
        while not self.stop.is_set():
            ready = self.host.ready()
            for slot, thread in enumerate(self.threads):
                if not ready:
                    self._stop_loop(slot)
                elif thread is None or not thread.is_alive():
                    self._generation += 1
                    name = f"{self.host.name}.{self._generation}"
                    started = threading.Thread(
                        target=self._work, args=(slot, name), name=f"proctor-rq-{slot}", daemon=True
                    )
                    self.threads[slot] = started
                    started.start()
            self.stop.wait(1.0)

    def _work(self, slot: int, name: str) -> None:
        try:  # RQ talks to Redis from its constructor on: all of it may fail
            worker = ChunkWorker(
                self.slots[slot],
                connection=self.host.client,
                name=name,
                worker_ttl=_RQ_WORKER_TTL_S,
            )
            self.workers[slot] = worker
            if not self.stop.is_set():
                worker.serve()
        except Exception:  # the main thread starts another loop a second later
            log.exception("RQ loop %s ended", name)

    def join(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for thread in self.threads:
            if thread is not None:
                thread.join(max(0.0, deadline - time.monotonic()))
