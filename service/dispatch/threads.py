"""Threads that take their calls from a `fair.FairQueue`: the embedded dispatcher's sandbox
threads, so that one request's thousands of code items do not queue another's one item behind
them (a `ThreadPoolExecutor` serves its queue first come, first served)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from concurrent.futures import Future
from typing import Any, TypeVar

from service.dispatch.fair import FairQueue

__all__ = ["FairThreads"]

R = TypeVar("R")

_Call = tuple["Future[Any]", Callable[[], Any]]


class FairThreads:
    def __init__(self, workers: int, name: str) -> None:
        self._queue: FairQueue[_Call] = FairQueue()
        self._ready = threading.Condition()
        self._stopping = False
        self._threads = [
            threading.Thread(target=self._work, name=f"{name}-{n}", daemon=True)
            for n in range(workers)
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, tenant: str, request: Hashable, call: Callable[[], R]) -> Future[R]:
        """Run `call` on a thread, in `request`'s (of `tenant`) fair turn."""
        future: Future[R] = Future()
        with self._ready:
            if self._stopping:
                raise RuntimeError("these threads are shut down")
            self._queue.push(tenant, request, (future, call))
            self._ready.notify()
        return future

    def forget(self, request: Hashable) -> None:
        """Cancel what is left of `request` (it has its answer)."""
        with self._ready:
            calls = self._queue.discard(request)
        for future, _ in calls:
            future.cancel()

    def pending(self) -> int:
        with self._ready:
            return len(self._queue)

    def _work(self) -> None:
        while True:
            with self._ready:
                while not self._queue and not self._stopping:
                    self._ready.wait()
                if self._stopping:
                    return
                taken = self._queue.pop()
            if taken is None:
                continue
            future, call = taken
            if not future.set_running_or_notify_cancel():
                continue  # its waiter gave up (a deadline) before it started
            try:
                future.set_result(call())
            except Exception as exc:  # noqa: BLE001 - the caller gets it, as from an executor
                future.set_exception(exc)

    def shutdown(self) -> None:
        """Stop taking calls; those not started are cancelled (running ones finish)."""
        with self._ready:
            self._stopping = True
            calls = list(self._queue)
            self._queue.clear()
            self._ready.notify_all()
        for future, _ in calls:
            future.cancel()
