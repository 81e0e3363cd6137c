"""Gathering single-item calls into batches: trainers whose reward loop asks for one sample at a
time (verl's reward managers) still send one request per batch, not one per sample."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from proctor_client._async_client import AsyncProctorClient
from proctor_client._models import ScoreItem, ScoreResult

__all__ = ["Coalescer"]


@dataclass(eq=False)
class Coalescer:
    """`score_one` waits up to `linger_s` for other calls, then sends them all in one `score()`
    (at once when `max_items` are waiting). Bound to the event loop it was first used on."""

    client: AsyncProctorClient
    spec: str | None
    linger_s: float
    max_items: int
    deadline_s: float | None
    _waiting: list[tuple[ScoreItem, asyncio.Future[ScoreResult]]] = field(
        default_factory=list, init=False
    )
    _timer: asyncio.TimerHandle | None = field(default=None, init=False)
    _sending: set[asyncio.Task[None]] = field(default_factory=set, init=False)

    async def score_one(self, item: ScoreItem) -> ScoreResult:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[ScoreResult] = loop.create_future()
        self._waiting.append((item, future))
        if len(self._waiting) >= self.max_items:
            self._flush()
        elif self._timer is None:
            self._timer = loop.call_later(self.linger_s, self._flush)
        return await future

    def _flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        batch, self._waiting = self._waiting, []
        if batch:
            task = asyncio.get_running_loop().create_task(self._send(batch))
            self._sending.add(task)
            task.add_done_callback(self._sending.discard)

    async def _send(self, batch: list[tuple[ScoreItem, asyncio.Future[ScoreResult]]]) -> None:
        try:
            results = await self.client.score(
                [item for item, _ in batch], spec=self.spec, deadline_s=self.deadline_s
            )
        except BaseException as exc:
            # Every caller of the batch raises it too: none is left waiting.
            for _, future in batch:
                if not future.done():
                    future.set_exception(
                        exc if isinstance(exc, Exception) else asyncio.CancelledError()
                    )
            raise
        for (_, future), result in zip(batch, results, strict=True):
            if not future.done():
                future.set_result(result)
