"""A small bounded, thread-safe memo for pure functions of hashable keys.

Scorers use it where a GRPO step repeats work: the same final answer against the same gold, the
same puzzle entry validated 16 times. The oldest entry goes first when the memo is full.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Generic, TypeVar

__all__ = ["Memo"]

K = TypeVar("K")
V = TypeVar("V")


class Memo(Generic[K, V]):
    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError("a memo holds at least one entry")
        self.size = size
        self._entries: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            return self._entries.get(key)

    def put(self, key: K, value: V) -> None:
        with self._lock:
            self._entries[key] = value
            if len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)
