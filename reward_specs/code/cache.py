"""Run identical work once: a bounded cache of verdicts plus de-duplication of work in flight.

In a GRPO group many responses are identical, and they usually arrive in the same batch on
different threads at once; the first caller computes, the others wait for its result. If the
first caller fails (a sandbox error), a waiter computes for itself rather than inherit the error.
The verdicts are a `reward_specs.caches.Cache` (registered under the name given).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Generic, TypeVar

from reward_specs.caches import Cache

__all__ = ["SingleFlightCache"]

V = TypeVar("V")


class SingleFlightCache(Generic[V]):
    def __init__(self, name: str, capacity: int) -> None:
        self._done: Cache[str, V] = Cache(name, capacity)
        self._lock = threading.Lock()
        self._running: dict[str, Future[V]] = {}

    def get_or_compute(self, key: str, compute: Callable[[], V]) -> V:
        while True:
            done = self._done.get(key)
            if done is not None:
                return done
            with self._lock:
                # Again under the lock: a leader stores its value before it leaves `_running`.
                done = self._done.get(key)
                if done is not None:
                    return done
                running = self._running.get(key)
                if running is None:
                    mine: Future[V] = Future()
                    self._running[key] = mine
                    break
            try:
                return running.result()
            except BaseException:  # noqa: BLE001 - the leader raised it; we compute ourselves
                continue
        try:
            value = compute()
        except BaseException as exc:
            with self._lock:
                del self._running[key]
            mine.set_exception(exc)
            raise
        self._done.put(key, value)
        with self._lock:
            del self._running[key]
        mine.set_result(value)
        return value

    def clear(self) -> None:
        self._done.clear()

    def __len__(self) -> int:
        return len(self._done)
