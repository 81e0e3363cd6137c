"""Which chunks of this API's batches may be on the RQ queues now: a fair share of the workers.

RQ serves a queue first come, first served, so a batch that put all its chunks on the queue at
once would have every later request wait behind all of them. Instead each batch offers its
chunks here, and they are granted (the batch then enqueues them) round-robin across tenants,
then across batches (`fair.FairQueue`), while fewer chunks of a domain are held (granted and not
finished) than the live workers of that domain have RQ loops. One batch holds at most that less
one loop per worker host: each host keeps a loop free for whatever request comes next, and the
host's own dispatcher interleaves the items of the chunks it holds, so a newcomer waits for one
item per sandbox thread or worker process, not for a chunk. Shared by the batch threads of one
API process (under a lock); replicas grant independently.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Sequence
from typing import Any, Protocol

from service.dispatch.fair import FairQueue

__all__ = ["Grantee", "Grants", "Slots"]

Slots = Callable[[str], tuple[int, int]]
"""Domain -> (RQ loops of the live workers serving it, those workers)."""


class Grantee(Hashable, Protocol):
    @property
    def tenant(self) -> str: ...

    def grant(self, chunk: Any) -> None:
        """`chunk` may go on its queue now (called under the grants' lock: no I/O)."""


class Grants:
    def __init__(self, slots: Slots) -> None:
        self._slots = slots
        self._lock = threading.Lock()
        self._queues: dict[str, FairQueue[tuple[Grantee, Any]]] = {}
        self._held: dict[str, dict[Grantee, int]] = {}

    def offer(
        self, batch: Grantee, domain: str, chunks: Sequence[Any], *, front: bool = False
    ) -> None:
        """`chunks` of `batch` (all of `domain`) wait for a grant, behind the batch's others or
        (`front`: work to redo) before them; each is handed to `batch.grant` once granted, from
        whichever thread releases it."""
        with self._lock:
            queue = self._queues.setdefault(domain, FairQueue())
            for chunk in reversed(chunks) if front else chunks:
                queue.push(batch.tenant, batch, (batch, chunk), front=front)
            self._release(domain)

    def finish(self, batch: Grantee, domain: str) -> None:
        """One chunk `batch` held in `domain` is over (finished, or lost and offered again)."""
        with self._lock:
            held = self._held.get(domain, {})
            if held.get(batch, 0) > 0:
                held[batch] -= 1
                if not held[batch]:
                    del held[batch]
            self._release(domain)

    def forget(self, batch: Grantee) -> None:
        """`batch` is over: what it waits for is withdrawn, what it holds is free."""
        with self._lock:
            for domain, queue in self._queues.items():
                queue.discard(batch)
                self._held.get(domain, {}).pop(batch, None)
            for domain in list(self._queues):
                self._release(domain)

    def held(self, domain: str) -> int:
        with self._lock:
            return sum(self._held.get(domain, {}).values())

    def _release(self, domain: str) -> None:
        queue = self._queues.get(domain)
        if not queue:
            return
        loops, hosts = self._slots(domain)
        total = max(1, loops)
        per_batch = max(1, loops - hosts)
        held = self._held.setdefault(domain, {})
        in_use = sum(held.values())
        skipped: list[tuple[Grantee, Any]] = []
        while in_use < total and (unit := queue.pop()) is not None:
            batch, chunk = unit
            if held.get(batch, 0) >= per_batch:
                skipped.append(unit)
                continue
            held[batch] = held.get(batch, 0) + 1
            in_use += 1
            batch.grant(chunk)
        for batch, chunk in reversed(skipped):
            queue.push(batch.tenant, batch, (batch, chunk), front=True)
