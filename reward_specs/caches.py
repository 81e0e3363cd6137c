"""The one cache type of reward_specs, and the one registry of its instances.

A `Cache` is a bounded, thread-safe memo (`get`/`put`) or, as a decorator, the cache of a pure
function. Scorers use them where a GRPO step repeats work: the same final answer against the same
gold, the same puzzle entry regenerated 16 times. Every cache registers under its name, so that
`registered()` lists them all (with `len` and `size`) and `clear_all()` empties them (tests).
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Generic, ParamSpec, TypeVar, cast, overload

__all__ = ["BytesCache", "Cache", "clear_all", "registered"]

K = TypeVar("K")
V = TypeVar("V")
D = TypeVar("D")
P = ParamSpec("P")
R = TypeVar("R")

_REGISTRY: dict[str, Cache[Any, Any]] = {}
_REGISTRY_LOCK = threading.Lock()
_ABSENT: Any = object()
_KEYWORDS = object()
"""Separates positional from keyword arguments in a decorated function's keys."""


class Cache(Generic[K, V]):
    """At most `size` entries, the one stored first evicted first; a value for which `never` is
    true is returned but not stored (a verdict cut short by a timeout, say).

    As a decorator (`@Cache(name, size)`) it caches a pure function by its (hashable) arguments,
    as `functools.lru_cache` does, which backs it when there is no `never` (the least recently
    used is evicted first): such a cache is filled only by calling the function. A memo does not
    refresh an entry on a hit, which would hash its key twice: memo keys hold configs, whose hash
    is computed in Python. Exceptions are never cached.
    """

    __slots__ = ("_entries", "_function", "_lock", "_wraps", "name", "never", "size")

    def __init__(self, name: str, size: int, never: Callable[[V], bool] | None = None) -> None:
        if size < 1:
            raise ValueError(f"cache {name!r}: a cache holds at least one entry")
        self.name = name
        self.size = size
        self.never = never
        self._entries: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()
        self._function: functools._lru_cache_wrapper[Any] | None = None
        self._wraps = False
        with _REGISTRY_LOCK:
            if name in _REGISTRY:
                raise ValueError(f"a cache named {name!r} is registered already")
            _REGISTRY[name] = self

    @overload
    def get(self, key: K) -> V | None: ...
    @overload
    def get(self, key: K, default: D) -> V | D: ...
    def get(self, key: K, default: Any = None) -> Any:
        with self._lock:
            return self._entries.get(key, default)

    def put(self, key: K, value: V) -> None:
        """Store `value` under `key` (unless `never(value)`), evicting the oldest when full."""
        if self.never is not None and self.never(value):
            return
        if self._function is not None:
            raise TypeError(f"cache {self.name!r} is its function's: calling it fills it")
        with self._lock:
            self._entries[key] = value
            if len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        if self._function is not None:
            self._function.cache_clear()
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        if self._function is not None:
            return self._function.cache_info().currsize
        with self._lock:
            return len(self._entries)

    def __repr__(self) -> str:
        return f"Cache({self.name!r}, {len(self)}/{self.size})"

    def __call__(self, function: Callable[P, R]) -> Callable[P, R]:
        """`function`, cached by its arguments in this cache (which then serves it alone)."""
        if self._wraps:
            raise TypeError(f"cache {self.name!r} caches a function already")
        self._wraps = True
        if self.never is None:
            self._function = functools.lru_cache(maxsize=self.size)(function)
            return cast(Callable[P, R], self._function)
        memo = cast(Cache[Any, R], self)
        get, put = memo.get, memo.put

        @functools.wraps(function)
        def cached(*args: P.args, **kwargs: P.kwargs) -> R:
            key = (*args, _KEYWORDS, *kwargs.items()) if kwargs else args
            value: R = get(key, _ABSENT)
            if value is _ABSENT:
                value = function(*args, **kwargs)
                put(key, value)
            return value

        return cached


class BytesCache(Generic[K, V]):
    """At most `max_bytes` of entries, as `size_of(key, value)` counts them, the least recently
    used evicted first; an entry larger than the whole is not stored. Not registered: each
    belongs to one owner (a judge client per worker process, `judge.client.Judges`), which
    bounds and clears it; the registry's caches are the module-level ones."""

    __slots__ = ("_bytes", "_entries", "_lock", "_max", "_size_of")

    def __init__(self, max_bytes: int, size_of: Callable[[K, V], int]) -> None:
        self._max = max_bytes
        self._size_of = size_of
        self._bytes = 0
        self._entries: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
            return found

    def put(self, key: K, value: V) -> None:
        size = self._size_of(key, value)
        if size > self._max:
            return
        with self._lock:
            old = self._entries.pop(key, _ABSENT)
            if old is not _ABSENT:
                self._bytes -= self._size_of(key, old)
            self._entries[key] = value
            self._bytes += size
            while self._bytes > self._max:
                gone_key, gone = self._entries.popitem(last=False)
                self._bytes -= self._size_of(gone_key, gone)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)


def registered() -> dict[str, Cache[Any, Any]]:
    """Every cache by name, in the order they were made (each says its `len` and `size`)."""
    with _REGISTRY_LOCK:
        return dict(_REGISTRY)


def clear_all() -> None:
    """Empty every registered cache (tests; after patching what a cached function calls)."""
    for cache in registered().values():
        cache.clear()
