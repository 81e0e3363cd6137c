"""The embedded backend for callers on plain threads: `proctor worker`'s RQ loops.

`LocalDispatcher` is async (the API awaits it on its event loop). A caller with no loop of its
own calls `BlockingDispatcher`, whose `start`, `run` and `stop` block: it owns the loop the
dispatcher's async parts (its watchdog, its sandbox's start) run on, on a thread of its own, so
no caller makes or drives a loop.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from reward_specs import Outcome, Registry
from service.core.tenancy import set_tenant
from service.dispatch.base import DispatchStats, Work
from service.dispatch.local import LocalDispatcher
from service.settings import Settings

__all__ = ["BlockingDispatcher"]

T = TypeVar("T")

STOP_TIMEOUT_S = 30.0
"""How long `stop` waits for the pool and the sandbox to close."""


class BlockingDispatcher:
    """A `LocalDispatcher` behind blocking calls, safe from any thread."""

    def __init__(self, settings: Settings, registry: Registry) -> None:
        self.dispatcher = LocalDispatcher(settings, registry)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="proctor-dispatch-loop", daemon=True
        )

    def start(self) -> None:
        self._thread.start()
        self._call(self.dispatcher.start())

    def stop(self) -> None:
        try:
            self._call(self.dispatcher.stop(), STOP_TIMEOUT_S)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)

    def run(self, work: Work, tenant: str) -> list[Outcome]:
        """`LocalDispatcher.run` for `tenant` (whose share of the processes the items take),
        blocking until every item has its outcome (by `work.deadline`)."""
        return self._call(_as_tenant(tenant, self.dispatcher.run(work)))

    def readiness(self) -> dict[str, bool]:
        return self.dispatcher.readiness()

    def environments(self) -> dict[str, str]:
        return self.dispatcher.environments()

    def stats(self) -> DispatchStats:
        return self.dispatcher.stats()

    def _call(self, work: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        return asyncio.run_coroutine_threadsafe(work, self._loop).result(timeout)


async def _as_tenant(tenant: str, run: Coroutine[Any, Any, list[Outcome]]) -> list[Outcome]:
    """`run` with `tenant` as the tenant of its context (the loop's task does not inherit the
    caller's context)."""
    set_tenant(tenant)
    return await run
