"""Run identical work once: a bounded LRU of verdicts plus de-duplication of work in flight.

In a GRPO group many responses are identical, and they usually arrive in the same batch on
different threads at once; the first caller computes, the others wait for its result. If the
first caller fails (a sandbox error), a waiter computes for itself rather than inherit the error.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future
from typing import Generic, TypeVar

__all__ = ["SingleFlightCache"]

V = TypeVar("V")


class SingleFlightCache(Generic[V]):
    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._lock = threading.Lock()
        self._done: OrderedDict[str, V] = OrderedDict()
        self._running: dict[str, Future[V]] = {}

    def get_or_compute(self, key: str, compute: Callable[[], V]) -> V:
        while True:
            with self._lock:
                if key in self._done:
                    self._done.move_to_end(key)
                    return self._done[key]
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
        with self._lock:
            del self._running[key]
            self._done[key] = value
            while len(self._done) > self._capacity:
                self._done.popitem(last=False)
        mine.set_result(value)
        return value

    def clear(self) -> None:
        with self._lock:
            self._done.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._done)
