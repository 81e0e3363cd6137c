"""The embedded default: CPU-bound scorers in a worker-process pool, sandbox-bound ones in threads.

No Redis, no Docker: everything runs in this process and its children. Items whose scorer says
`executor="process"` go to the `WorkerPool`; those whose scorer says `executor="thread"` (code,
which mostly waits on a sandbox) run in a thread pool here with the sandbox backend in their
context. A watchdog restarts the pool's manager if it is ever gone, and no request waits past
its deadline for any part, dead or alive.

The sandbox's environment is probed when it opens (its digest enters the code hashes) and watched
after (`service.dispatch.environment`): once it has changed, sandboxed items are `infra_error`
(`environment_changed`), `/readyz` names `<domain>_environment`, and the digest stays the one
probed at start, until a restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import threading
import time
from concurrent.futures import Future

from reward_specs import Outcome, Registry, ScoreContext, codes, score_item
from reward_specs.judge.domain import judge_stages
from sandboxes import SandboxBackend, SandboxError, open_backend
from sandboxes.checkers import open_checker_backend
from service.core.tenancy import tenant
from service.dispatch.base import DispatchStats, Work, sandboxed_domains
from service.dispatch.costs import CostModel
from service.dispatch.environment import EnvironmentWatch, probe_digests
from service.dispatch.judges import JudgeWatch, judge_setup
from service.dispatch.pool import WorkerPool
from service.dispatch.threads import FairThreads
from service.settings import Settings

__all__ = ["LocalDispatcher"]

log = logging.getLogger(__name__)

WATCHDOG_S = 1.0
"""How often the watchdog looks for a vanished pool manager."""
GRACE_S = 2.0
"""How long past a deadline the dispatcher still waits for the pool's own answer (which resolves
late items itself) before it resolves them here."""


class LocalDispatcher:
    def __init__(self, settings: Settings, registry: Registry) -> None:
        self.settings = settings
        self.registry = registry
        self.pool = WorkerPool(
            settings.workers,
            registry_path=settings.registry,
            spec_dirs=settings.spec_dirs,
            item_timeout_s=settings.item_timeout_s,
            memory_mb=settings.worker_memory_mb,
            chunk_size=settings.chunk_size,
            judges=judge_setup(settings),
        )
        self.costs = CostModel(registry)
        # No more threads than sandboxes: a thread waiting for a sandbox would hold its item
        # in a first-come, first-served line again, out of the fair queue's reach.
        threads = min(settings.thread_workers, settings.sandbox.pool_size)
        self._threads = FairThreads(threads, "proctor-score")
        self._sandbox: SandboxBackend | None = None
        self._sandbox_error: str | None = None
        self._needs_sandbox = any(s.executor == "thread" for s in registry)
        self._environments: dict[str, str] = {}
        self._environment: EnvironmentWatch | None = None
        # opened on first use: the code domain's checkers, never in a response's sandbox
        self._checkers = open_checker_backend(settings.sandbox)
        self._watchdog: asyncio.Task[None] | None = None
        self._environment_watch: asyncio.Task[None] | None = None
        self._judges = JudgeWatch(judge_setup(settings), settings.environment_probe_interval_s)
        self._judge_watch: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.pool.start()
        self._watchdog = asyncio.create_task(self._watch(), name="proctor-watchdog")
        if self._needs_sandbox:
            try:
                self._sandbox = await asyncio.to_thread(open_backend, self.settings.sandbox)
                # the checkers' pool, not opened yet, in the environment about to be probed
                pinned = self._sandbox.same_environment(self.settings.sandbox)
                self._checkers = open_checker_backend(pinned)
                self._environment = await asyncio.to_thread(self._probe, self._sandbox)
                self._environment_watch = asyncio.create_task(
                    self._watch_environment(self._environment), name="proctor-environment"
                )
            except SandboxError as exc:
                self._sandbox_error = str(exc)
                log.error("sandbox backend unavailable, code items will fail: %s", exc)
                if self._sandbox is not None:
                    await asyncio.to_thread(self._sandbox.close)
                    self._sandbox = None
        await asyncio.to_thread(self._judges.check)  # the judge's models, before any item
        self._judge_watch = asyncio.create_task(self._watch_judges(), name="proctor-judges")

    def _probe(self, sandbox: SandboxBackend) -> EnvironmentWatch:
        """Probe the sandbox's environment: its digest for each domain that runs in it, and the
        watch that notices when it changes; says which toolchains the sandbox lacks (`proctor
        serve` says so for `local` before it starts)."""
        self._environments, report = probe_digests(sandbox, self.registry)
        watch = EnvironmentWatch(
            sandbox,
            report,
            self.settings.environment_probe_interval_s,
            self._forget,
            others=(self._checkers,),
        )
        backend = self.settings.sandbox.backend
        log.info("sandbox %s: code environment %s", backend, watch.digest)
        missing = sorted(tool for tool, version in report["tools"].items() if version is None)
        if missing and backend != "local":
            log.warning("the %s sandbox has no %s: those languages' items fail", backend, missing)
        return watch

    def _forget(self) -> None:
        """The environment changed: what the sandboxed domains' scorers keep of their verdicts
        is emptied."""
        for domain in sandboxed_domains(self.registry):
            forget = self.registry.get(domain).forget
            if forget is not None:
                forget()

    def environments(self) -> dict[str, str]:
        judge = self._judges.digest
        return {**self._environments, "judge": judge} if judge else self._environments

    async def _watch_judges(self) -> None:
        """Probe the judge endpoints' models when due (`JudgeWatch.check`) until they change."""
        while self._judges.changed is None:
            await asyncio.sleep(WATCHDOG_S)
            try:
                await asyncio.to_thread(self._judges.check)
            except Exception:  # a bug of ours: were the watch gone, no change would be seen
                log.exception("checking the judge endpoints failed; the watch goes on")

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(WATCHDOG_S)
            self.pool.heal()

    async def _watch_environment(self, watch: EnvironmentWatch) -> None:
        """Look for a changed environment every `WATCHDOG_S` (its probes on a thread) until one
        is found."""
        while watch.changed is None:
            await asyncio.sleep(WATCHDOG_S)
            try:
                await asyncio.to_thread(watch.check)
            except Exception:  # a bug of ours: were the watch gone, no change would be seen
                log.exception("checking the code environment failed; the watch goes on")

    async def stop(self) -> None:
        for task in (self._watchdog, self._environment_watch, self._judge_watch):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        await asyncio.to_thread(self.pool.stop)
        self._threads.shutdown()
        if self._sandbox is not None:
            await asyncio.to_thread(self._sandbox.close)
        await asyncio.to_thread(self._checkers.close)
        self._judges.close()

    def stats(self) -> DispatchStats:
        stats = self.pool.stats()
        changes = self._judges.changes
        if self._environment is not None:
            changes += self._environment.changes
        if changes:
            stats = dataclasses.replace(stats, environment_changes=changes)
        if self._sandbox is None:
            return stats
        sandboxes = self._sandbox.stats()
        extras = {
            **stats.extras,
            "sandbox_pool_size": sandboxes.size,
            "sandboxes": sandboxes.live,
            "idle_sandboxes": sandboxes.idle,
            "sandbox_replacements": sandboxes.retired,
        }
        return dataclasses.replace(stats, extras=extras)

    def readiness(self) -> dict[str, bool]:
        ready = {"workers": self.pool.ready()}
        if self._needs_sandbox:
            ready["sandbox"] = self._sandbox is not None and self._sandbox.ready()
            unchanged = self._environment is None or self._environment.changed is None
            for domain in sandboxed_domains(self.registry):
                ready[f"{domain}_environment"] = unchanged
        ready.update(self._judges.readiness())
        return ready

    async def run(self, work: Work) -> list[Outcome]:
        in_pool: list[int] = []
        in_threads: list[int] = []
        threaded: dict[str, bool] = {}
        judge_changed = self._judges.changed
        judged = judge_stages(work.spec) if judge_changed is not None else {}
        stale: list[int] = []
        for position, item in enumerate(work.items):
            if item.domain in judged:  # the judge domain, or a domain with a judge stage
                stale.append(position)  # its models are no longer those of the hash
                continue
            in_thread = threaded.get(item.domain)
            if in_thread is None:
                in_thread = threaded[item.domain] = (
                    item.domain in self.registry
                    and self.registry.get(item.domain).executor == "thread"
                )
            # Unknown domains go to the pool too: the engine answers `invalid`.
            (in_threads if in_thread else in_pool).append(position)

        pooled = work.part(in_pool)
        labels = [self.costs.label(item) for item in pooled.items]
        whose = tenant()
        pool_future = self.pool.submit(
            work.spec.name,
            pooled.items,
            work.deadline,
            self.costs.estimates(labels),
            pooled.on_done,
            whose,
        )
        request = _Request(whose)
        try:
            thread_outcomes = await self._run_in_threads(work, in_threads, request)
        finally:
            self._threads.forget(request)
        pool_outcomes = await self._await_pool(pool_future, len(in_pool), work.deadline)
        self.costs.observe(labels, pool_outcomes)
        outcomes = dict(zip(in_threads, thread_outcomes, strict=True))
        outcomes.update(zip(in_pool, pool_outcomes, strict=True))
        for position in stale:
            outcomes[position] = Outcome.failure(
                "infra_error", codes.ENVIRONMENT_CHANGED, judge_changed or ""
            )
            work.done(position)
        return [outcomes[position] for position in range(len(work.items))]

    async def _await_pool(
        self, future: Future[list[Outcome]], n: int, deadline: float
    ) -> list[Outcome]:
        """The pool's outcomes; should the pool not answer (a part of it died and has not been
        healed in time), every item is `infra_error` shortly after the deadline, never a hang."""
        wrapped = asyncio.wrap_future(future)
        try:
            outcomes: list[Outcome] = await asyncio.wait_for(
                wrapped, timeout=max(0.0, deadline - time.monotonic()) + GRACE_S
            )
            return outcomes
        except TimeoutError:  # waiting was cancelled, and so is the batch in the pool
            log.error("the worker pool did not answer a batch by its deadline")
            message = "the worker pool did not answer by the request deadline"
            return [Outcome.failure("infra_error", codes.DEADLINE_EXCEEDED, message)] * n

    async def _run_in_threads(
        self, work: Work, positions: list[int], request: _Request
    ) -> list[Outcome]:
        """The items at `positions`, each scored on a sandbox thread in `request`'s fair turn.
        The event loop is woken once for them all (when the last is scored, or one raised), not
        once per item; an item not scored by the deadline is `infra_error`."""
        if not positions:
            return []
        if self._sandbox is None:
            message = self._sandbox_error or "no sandbox backend is running"
            outcomes = []
            for position in positions:
                outcomes.append(Outcome.failure("infra_error", codes.SANDBOX_UNAVAILABLE, message))
                work.done(position)
            return outcomes
        changed = self._changed()
        if changed is not None:
            for position in positions:
                work.done(position)
            return [changed] * len(positions)
        ctx = ScoreContext(sandbox=self._sandbox, checker_sandbox=self._checkers)
        batch = _ThreadBatch(work, positions, asyncio.get_running_loop())
        for k, position in enumerate(positions):
            call = functools.partial(
                score_item, self.registry, work.spec, work.items[position], ctx
            )
            future = self._threads.submit(request.tenant, request, call)
            future.add_done_callback(functools.partial(batch.finished, k))
        try:
            remaining = max(0.0, work.deadline - time.monotonic())
            await asyncio.wait_for(asyncio.shield(batch.all_done), timeout=remaining)
        except TimeoutError:
            pass  # what is not scored yet gets the deadline's outcome below
        except BaseException:
            batch.abandon()
            raise
        outcomes = batch.close()
        # A change found while these ran: they may have run in the new environment (`local`,
        # within a second of a change to the stamp, else within one probe interval), and their
        # verdicts may have been kept after the watch emptied the scorers' caches.
        changed = self._changed()
        if changed is None:
            return outcomes
        self._forget()
        return [changed] * len(positions)

    def _changed(self) -> Outcome | None:
        """The outcome of a sandboxed item once the environment has changed; None before."""
        watch = self._environment
        why = None if watch is None else watch.changed
        if watch is None or why is None:
            return None
        message = (
            f"the sandbox's environment is no longer {watch.digest}, the one this service's "
            f"hashes name ({why}): restart the service"
        )
        return Outcome.failure("infra_error", codes.ENVIRONMENT_CHANGED, message)


class _ThreadBatch:
    """The outcomes of one `run`'s thread items as the sandbox threads finish them. Each item
    is reported to `work.done` from the thread that scored it; the waiting coroutine is woken
    once, when the last item is in or one raised (`all_done`)."""

    def __init__(self, work: Work, positions: list[int], loop: asyncio.AbstractEventLoop) -> None:
        self._work = work
        self._positions = positions
        self._loop = loop
        self._lock = threading.Lock()
        self._outcomes: list[Outcome | BaseException | None] = [None] * len(positions)
        self._left = len(positions)
        self._closed = False
        self.all_done: asyncio.Future[None] = loop.create_future()

    def finished(self, k: int, future: Future[Outcome]) -> None:
        """Item `k`'s call ended (any thread): scored, raised, or cancelled."""
        result: Outcome | BaseException
        if future.cancelled():
            result = asyncio.CancelledError()
        else:
            result = future.exception() or future.result()
        with self._lock:
            if self._closed:
                return
            self._outcomes[k] = result
            self._left -= 1
            wake = self._left == 0 or isinstance(result, BaseException)
        if not isinstance(result, BaseException):
            self._work.done(self._positions[k])
        if wake:
            self._loop.call_soon_threadsafe(self._wake)

    def _wake(self) -> None:
        if not self.all_done.done():
            self.all_done.set_result(None)

    def abandon(self) -> None:
        """The waiter is gone: what is still scored is no longer recorded or reported."""
        with self._lock:
            self._closed = True

    def close(self) -> list[Outcome]:
        """Every item's outcome; one still unscored is `infra_error` (the deadline passed). An
        exception a call raised is raised here."""
        with self._lock:
            self._closed = True
            taken = list(self._outcomes)
        outcomes: list[Outcome] = []
        for k, outcome in enumerate(taken):
            if isinstance(outcome, BaseException):
                raise outcome
            if outcome is None:
                outcome = Outcome.failure(
                    "infra_error",
                    codes.DEADLINE_EXCEEDED,
                    "the request deadline passed before this item was scored",
                )
                self._work.done(self._positions[k])
            outcomes.append(outcome)
        return outcomes


class _Request:
    """One `run`'s share of the sandbox threads (compared by identity)."""

    __slots__ = ("tenant",)

    def __init__(self, tenant: str) -> None:
        self.tenant = tenant
