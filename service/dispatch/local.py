"""The embedded default: CPU-bound scorers in a worker-process pool, sandbox-bound ones in threads.

No Redis, no Docker: everything runs in this process and its children. Items whose scorer says
`executor="process"` go to the `WorkerPool`; those whose scorer says `executor="thread"` (code,
which
mostly waits on a sandbox) run in a thread pool here with the sandbox backend in their context.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from reward_specs import Item, Outcome, Registry, ScoreContext, Spec, score_item
from sandboxes import SandboxBackend, SandboxError, open_backend
from service.dispatch.costs import CostModel
from service.dispatch.pool import WorkerPool
from service.settings import Settings

__all__ = ["LocalDispatcher"]

log = logging.getLogger(__name__)


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
        )
        self.costs = CostModel(registry)
        self._threads = ThreadPoolExecutor(
            settings.thread_workers, thread_name_prefix="proctor-score"
        )
        self._sandbox: SandboxBackend | None = None
        self._sandbox_error: str | None = None
        self._needs_sandbox = any(s.executor == "thread" for s in registry)

    async def start(self) -> None:
        self.pool.start()
        if self._needs_sandbox:
            try:
                self._sandbox = await asyncio.to_thread(open_backend, self.settings.sandbox)
            except SandboxError as exc:
                self._sandbox_error = str(exc)
                log.error("sandbox backend unavailable, code items will fail: %s", exc)

    async def stop(self) -> None:
        await asyncio.to_thread(self.pool.stop)
        self._threads.shutdown(wait=False, cancel_futures=True)
        if self._sandbox is not None:
            await asyncio.to_thread(self._sandbox.close)

    def readiness(self) -> dict[str, bool]:
        ready = {"workers": self.pool.ready()}
        if self._needs_sandbox:
            ready["sandbox"] = self._sandbox is not None and self._sandbox.ready()
        return ready

    async def run(self, spec: Spec, items: Sequence[Item], deadline: float) -> list[Outcome]:
        in_pool: list[int] = []
        in_threads: list[int] = []
        threaded: dict[str, bool] = {}
        for position, item in enumerate(items):
            in_thread = threaded.get(item.domain)
            if in_thread is None:
                in_thread = threaded[item.domain] = (
                    item.domain in self.registry
                    and self.registry.get(item.domain).executor == "thread"
                )
            # Unknown domains go to the pool too: the engine answers `invalid`.
            (in_threads if in_thread else in_pool).append(position)

        pool_items = [items[p] for p in in_pool]
        labels = [self.costs.label(item) for item in pool_items]
        pool_future = self.pool.submit(
            spec.name, pool_items, deadline, self.costs.estimates(labels)
        )
        thread_outcomes = await asyncio.gather(
            *(self._run_in_thread(spec, items[p], deadline) for p in in_threads)
        )
        pool_outcomes: list[Outcome] = await asyncio.wrap_future(pool_future)
        self.costs.observe(labels, pool_outcomes)
        outcomes = dict(zip(in_threads, thread_outcomes, strict=True))
        outcomes.update(zip(in_pool, pool_outcomes, strict=True))
        return [outcomes[position] for position in range(len(items))]

    async def _run_in_thread(self, spec: Spec, item: Item, deadline: float) -> Outcome:
        if self._sandbox is None:
            return Outcome.failure(
                "infra_error",
                "sandbox_unavailable",
                self._sandbox_error or "no sandbox backend is running",
            )
        ctx = ScoreContext(sandbox=self._sandbox)
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(self._threads, score_item, self.registry, spec, item, ctx)
        try:
            return await asyncio.wait_for(future, timeout=max(0.0, deadline - time.monotonic()))
        except TimeoutError:
            return Outcome.failure(
                "infra_error",
                "deadline_exceeded",
                "the request deadline passed before this item was scored",
            )
