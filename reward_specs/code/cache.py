"""Run identical work once: a bounded cache of verdicts plus de-duplication of work in flight.

In a GRPO group many responses are identical, and they usually arrive in the same batch on
different threads at once; the first caller computes, the others wait for its result. If the
first caller fails (a sandbox error), a waiter computes for itself rather than inherit the error.
The verdicts are a `reward_specs.caches.Cache` (registered under the name given).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar, cast

from reward_specs.caches import Cache

__all__ = ["SingleFlightCache"]

V = TypeVar("V")


class _Flight(Generic[V]):
    """One computation in flight: its lock is held until it has a value or has failed (a lock
    rather than a `Future`, whose condition and callbacks each call would pay for)."""

    __slots__ = ("failed", "finished", "value")

    def __init__(self) -> None:
        self.finished = threading.Lock()
        self.finished.acquire()
        self.failed = False
        self.value: V | None = None

    def end(self, value: V | None, failed: bool) -> None:
        self.value, self.failed = value, failed
        self.finished.release()

    def wait(self) -> None:
        with self.finished:
            pass


class SingleFlightCache(Generic[V]):
    def __init__(self, name: str, capacity: int) -> None:
        self._done: Cache[str, V] = Cache(name, capacity)
        self._lock = threading.Lock()
        self._running: dict[str, _Flight[V]] = {}

    def get(self, key: str) -> V | None:
        """The value stored under `key`, if any (nothing is computed or waited for)."""
        return self._done.get(key)

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
                    mine: _Flight[V] = _Flight()
                    self._running[key] = mine
                    break
            running.wait()
            if not running.failed:
                return cast(V, running.value)  # set, with failed=False
            # the leader raised: we compute ourselves
        try:
            value = compute()
        except BaseException:
            with self._lock:
                del self._running[key]
            mine.end(None, failed=True)
            raise
        self._done.put(key, value)
        with self._lock:
            del self._running[key]
        mine.end(value, failed=False)
        return value

    def clear(self) -> None:
        self._done.clear()

    def __len__(self) -> int:
        return len(self._done)
