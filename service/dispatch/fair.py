"""The fair queue: work of many requests from many tenants (API keys), handed out round-robin
across tenants, then across the requests of a tenant, and in the order given within a request.

A request that arrives while a large one is being served waits for one unit per tenant ahead of
it, not for the large request. Used by the worker pool's ledger (units are chunks), by the sandbox
threads of the embedded dispatcher (units are items) and by queue mode's chunk grants (units are
chunks allowed onto the RQ queues); not thread-safe by itself: each user holds its own lock or is
a single thread.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Hashable, Iterator
from typing import Generic, TypeVar

__all__ = ["FairQueue"]

T = TypeVar("T")


class FairQueue(Generic[T]):
    def __init__(self) -> None:
        self._tenants: OrderedDict[str, OrderedDict[Hashable, deque[T]]] = OrderedDict()
        self._tenant_of: dict[Hashable, str] = {}
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[T]:
        for requests in self._tenants.values():
            for units in requests.values():
                yield from units

    def push(self, tenant: str, request: Hashable, unit: T, *, front: bool = False) -> None:
        """Queue `unit` of `request` (of `tenant`): last of the request, or with `front` the next
        of it out (work to redo after a lost worker)."""
        known = self._tenant_of.setdefault(request, tenant)
        if known != tenant:
            raise ValueError(f"request {request!r} belongs to another tenant")
        units = self._tenants.setdefault(tenant, OrderedDict()).setdefault(request, deque())
        if front:
            units.appendleft(unit)
        else:
            units.append(unit)
        self._size += 1

    def pop(self) -> T | None:
        """The next unit: of the tenant served longest ago, of its request served longest ago."""
        if not self._tenants:
            return None
        tenant, requests = next(iter(self._tenants.items()))
        request, units = next(iter(requests.items()))
        unit = units.popleft()
        self._size -= 1
        if units:
            requests.move_to_end(request)
        else:
            del requests[request]
            del self._tenant_of[request]
        if requests:
            self._tenants.move_to_end(tenant)
        else:
            del self._tenants[tenant]
        return unit

    def discard(self, request: Hashable) -> list[T]:
        """Take every unit of `request` out (it is over); returns them."""
        tenant = self._tenant_of.pop(request, None)
        if tenant is None:
            return []
        requests = self._tenants[tenant]
        units = list(requests.pop(request))
        if not requests:
            del self._tenants[tenant]
        self._size -= len(units)
        return units

    def clear(self) -> None:
        self._tenants.clear()
        self._tenant_of.clear()
        self._size = 0
