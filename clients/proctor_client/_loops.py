"""Event-loop plumbing the client's faces share: an event loop run in a thread of its own
(`LoopThread`, behind the blocking client and the trainer's background scorer), and one value per
event loop (`PerLoop`, for the reward functions trainers await on loops of their own: an httpx
client belongs to the loop it was made on)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from typing import Any, Generic, TypeVar

__all__ = ["LoopThread", "PerLoop"]

_T = TypeVar("_T")


class LoopThread:
    """An event loop running forever in a daemon thread named `name`."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def submit(self, coroutine: Coroutine[Any, Any, _T]) -> Future[_T]:
        """Start `coroutine` on the loop; its result comes back through the Future."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)

    def run(self, coroutine: Coroutine[Any, Any, _T]) -> _T:
        """Run `coroutine` on the loop and block until it is done; if the wait is interrupted
        (e.g. KeyboardInterrupt in the caller), the work is cancelled too."""
        future = self.submit(coroutine)
        try:
            return future.result()
        except BaseException:
            future.cancel()
            raise

    def stop(self, timeout_s: float | None = None) -> None:
        """Stop the loop, wait for its thread (up to `timeout_s`) and close it."""
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=timeout_s)
        self.loop.close()


class PerLoop(Generic[_T]):
    """One value per event loop, made on its first use in that loop.

    A value made on a loop that has since closed is dropped (it can no longer be closed there).
    """

    def __init__(self) -> None:
        self._values: dict[int, tuple[asyncio.AbstractEventLoop, _T]] = {}

    def get(self, make: Callable[[], _T]) -> _T:
        """The running loop's value, made by `make` if it has none yet."""
        loop = asyncio.get_running_loop()
        found = self._values.get(id(loop))
        if found is None or found[0] is not loop:  # an id is reused once its loop is gone
            for key, (owner, _) in list(self._values.items()):
                if owner.is_closed():
                    self._values.pop(key, None)
            found = self._values[id(loop)] = (loop, make())
        return found[1]

    def pop(self) -> _T | None:
        """Forget the running loop's value and return it (None if it has none)."""
        loop = asyncio.get_running_loop()
        found = self._values.get(id(loop))
        if found is None or found[0] is not loop:
            return None
        del self._values[id(loop)]
        return found[1]
