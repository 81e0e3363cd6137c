"""Per-key limits: requests and items in flight for each API key, so one tenant cannot hold
every worker while another waits.

A request takes a *lease* for its key (`service.core.tenancy`): one request slot when it starts, and
its items once it knows how many it has. Past `max_inflight_requests_per_key` or
`max_inflight_items_per_key` it is refused with 429 and `Retry-After`; other keys are not
affected. A job's lease holds its items while the job runs, not the request that created it.

The counts live in this process (embedded mode) or in Redis (queue mode), where every API
replica shares them: a key behind N replicas gets one share, not N. In Redis a lease is a field
of the tenant's hashes with an expiry that its replica refreshes every second; a lease whose
replica died lapses after `LEASE_TTL_S`, so nothing a crash leaves behind counts for long. A
lease is released in a `finally`, so a request that errors, is cancelled or loses its client
gives its share back at once.

A route uses it as a dependency: `lease: KeyLease` takes the request slot (and releases it when
the route is done), and `await lease.take_items(n)` counts the request's items.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Annotated, Protocol

import redis.asyncio as aioredis
from fastapi import Depends, HTTPException, Request
from redis.exceptions import RedisError

from service.core.tenancy import tenant
from service.settings import Settings

__all__ = [
    "LEASE_TTL_S",
    "RETRY_AFTER_S",
    "KeyLease",
    "KeyLimits",
    "Lease",
    "LocalCounts",
    "RedisCounts",
    "Usage",
    "make_limits",
]

log = logging.getLogger(__name__)

LEASE_TTL_S = 10.0
"""Queue mode: a lease its replica has not refreshed for this long no longer counts."""
REFRESH_S = 1.0
"""Queue mode: how often a replica refreshes the leases it holds."""
RETRY_AFTER_S = 1
"""What a client refused for a per-key limit or the byte budget is told to wait: requests in
flight finish continually."""


@dataclass(frozen=True)
class Usage:
    """What one key has in flight."""

    requests: int = 0
    items: int = 0


class Counts(Protocol):
    """Where the counts live: this process (`LocalCounts`) or Redis (`RedisCounts`)."""

    async def take(self, key: str, lease: str, requests: int, items: int) -> str | None:
        """Add `requests` and `items` to `lease` of `key`, unless that passes a limit: then
        the name of the limit passed, and nothing is added."""

    async def release(self, key: str, lease: str) -> None: ...

    async def usage(self, key: str) -> Usage: ...

    async def close(self) -> None: ...


class LocalCounts:
    """Counts of this process (the embedded service): one event loop changes them."""

    def __init__(self, max_requests: int, max_items: int) -> None:
        self.max_requests = max_requests
        self.max_items = max_items
        self._leases: dict[str, dict[str, list[int]]] = {}

    async def take(self, key: str, lease: str, requests: int, items: int) -> str | None:
        leases = self._leases.setdefault(key, {})
        held = sum(r for r, _ in leases.values()), sum(i for _, i in leases.values())
        if requests and held[0] + requests > self.max_requests:
            return "max_inflight_requests_per_key"
        if items and held[1] + items > self.max_items:
            return "max_inflight_items_per_key"
        counts = leases.setdefault(lease, [0, 0])
        counts[0] += requests
        counts[1] += items
        return None

    async def release(self, key: str, lease: str) -> None:
        leases = self._leases.get(key, {})
        leases.pop(lease, None)
        if not leases:
            self._leases.pop(key, None)

    async def usage(self, key: str) -> Usage:
        leases = self._leases.get(key, {}).values()
        return Usage(sum(r for r, _ in leases), sum(i for _, i in leases))

    async def close(self) -> None:
        self._leases.clear()


_TAKE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[6])
local dead = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now)
for _, lease in ipairs(dead) do
  redis.call('HDEL', KEYS[1], lease)
  redis.call('HDEL', KEYS[2], lease)
end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
local requests = tonumber(ARGV[2])
local items = tonumber(ARGV[3])
if requests > 0 and redis.call('HLEN', KEYS[1]) + requests > tonumber(ARGV[4]) then
  return 'max_inflight_requests_per_key'
end
if items > 0 then
  local held = 0
  for _, n in ipairs(redis.call('HVALS', KEYS[2])) do held = held + tonumber(n) end
  if held + items > tonumber(ARGV[5]) then return 'max_inflight_items_per_key' end
end
if requests > 0 then redis.call('HSET', KEYS[1], ARGV[1], requests) end
if items > 0 then redis.call('HINCRBY', KEYS[2], ARGV[1], items) end
redis.call('ZADD', KEYS[3], now + ttl, ARGV[1])
for _, k in ipairs(KEYS) do redis.call('PEXPIRE', k, ttl * 2) end
return ''
"""
"""Drop the key's lapsed leases, check the limits with this lease's addition, and add it: one
atomic step, so replicas admitting at once cannot pass a limit together. KEYS: the key's
requests hash, items hash and expiry set; ARGV: lease, requests, items, the two limits, TTL."""

_USAGE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local requests, items = 0, 0
for _, lease in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3], now, '+inf')) do
  if redis.call('HEXISTS', KEYS[1], lease) == 1 then requests = requests + 1 end
  items = items + (tonumber(redis.call('HGET', KEYS[2], lease)) or 0)
end
return {requests, items}
"""
"""The key's live leases' requests and items (lapsed ones not counted)."""

_REFRESH = """
local t = redis.call('TIME')
local until_ = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[2])
redis.call('ZADD', KEYS[3], 'XX', until_, ARGV[1])
for _, k in ipairs(KEYS) do redis.call('PEXPIRE', k, tonumber(ARGV[2]) * 2) end
"""
"""Push a live lease's expiry on (only if it is still there: a lapsed one stays gone)."""


def _redis_keys(key: str) -> list[str]:
    """The key's requests hash, items hash and lease expiry set (one hash slot)."""
    return [f"proctor:limits:{{{key}}}:{part}" for part in ("requests", "items", "expiry")]


class RedisCounts:
    """Counts shared by every API replica behind one Redis (queue mode)."""

    def __init__(self, url: str, max_requests: int, max_items: int) -> None:
        self.max_requests = max_requests
        self.max_items = max_items
        self.client = aioredis.Redis.from_url(url, socket_connect_timeout=2.0, socket_timeout=5.0)
        self._take = self.client.register_script(_TAKE)
        self._refresh = self.client.register_script(_REFRESH)
        self._usage = self.client.register_script(_USAGE)
        self._held: dict[str, str] = {}  # lease -> key, of the leases this replica holds
        self._refresher: asyncio.Task[None] | None = None

    async def take(self, key: str, lease: str, requests: int, items: int) -> str | None:
        ttl_ms = int(LEASE_TTL_S * 1000)
        args: list[str | int] = [lease, requests, items, self.max_requests, self.max_items, ttl_ms]
        try:
            refused = await self._take(keys=_redis_keys(key), args=args)
        except RedisError as exc:
            raise HTTPException(
                status_code=503,
                detail={"code": "queue_unavailable", "message": f"the queue is unreachable: {exc}"},
                headers={"Retry-After": str(RETRY_AFTER_S)},
            ) from exc
        if refused:
            return refused.decode() if isinstance(refused, bytes) else str(refused)
        self._held[lease] = key
        if self._refresher is None or self._refresher.done():
            self._refresher = asyncio.create_task(self._refresh_leases(), name="proctor-leases")
        return None

    async def release(self, key: str, lease: str) -> None:
        self._held.pop(lease, None)
        requests, items, expiry = _redis_keys(key)
        try:
            async with self.client.pipeline(transaction=True) as pipe:
                pipe.hdel(requests, lease)
                pipe.hdel(items, lease)
                pipe.zrem(expiry, lease)
                await pipe.execute()
        except RedisError as exc:  # it lapses by itself within LEASE_TTL_S
            log.warning("could not release a lease of key %s (%s); it lapses by itself", key, exc)

    async def usage(self, key: str) -> Usage:
        requests, items = await self._usage(keys=_redis_keys(key))
        return Usage(int(requests), int(items))

    async def _refresh_leases(self) -> None:
        """Keep this replica's leases alive while it holds any."""
        ttl_ms = int(LEASE_TTL_S * 1000)
        while self._held:
            await asyncio.sleep(REFRESH_S)
            try:
                async with self.client.pipeline(transaction=False) as pipe:
                    for lease, key in list(self._held.items()):
                        await self._refresh(
                            keys=_redis_keys(key), args=[lease, ttl_ms], client=pipe
                        )
                    await pipe.execute()
            except RedisError as exc:
                log.warning("could not refresh the per-key leases: %s", exc)

    async def close(self) -> None:
        if self._refresher is not None:
            self._refresher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._refresher
        await self.client.aclose()


class Lease:
    """One request's (or job's) share of its key's limits; `release` gives it back."""

    def __init__(self, counts: Counts, key: str) -> None:
        self.counts = counts
        self.key = key
        self.id = secrets.token_hex(8)

    async def take(self, requests: int = 0, items: int = 0) -> None:
        """Count `requests` and `items` more, or 429 naming the limit (nothing is counted)."""
        refused = await self.counts.take(self.key, self.id, requests, items)
        if refused is not None:
            what = "requests" if refused == "max_inflight_requests_per_key" else "items"
            raise HTTPException(
                status_code=429,
                detail={
                    "code": "key_limit",
                    "message": f"this API key has too many {what} in flight ({refused}); "
                    f"retry after {RETRY_AFTER_S} s",
                },
                headers={"Retry-After": str(RETRY_AFTER_S)},
            )

    async def take_items(self, n: int) -> None:
        """Count the request's `n` items (429 past `max_inflight_items_per_key`)."""
        await self.take(items=n)

    async def release(self) -> None:
        """Give the lease back; shielded, so a request cancelled again meanwhile still does."""
        await asyncio.shield(self.counts.release(self.key, self.id))


class KeyLimits:
    """The per-key limits of one app (`AppState.limits`)."""

    def __init__(self, counts: Counts) -> None:
        self.counts = counts

    async def lease(self, requests: int = 0, items: int = 0) -> Lease:
        """A lease of the calling tenant's holding `requests` and `items`, or 429."""
        lease = Lease(self.counts, tenant())
        if requests or items:
            await lease.take(requests, items)
        return lease

    async def usage(self) -> Usage:
        """What the calling tenant has in flight."""
        return await self.counts.usage(tenant())

    async def close(self) -> None:
        await self.counts.close()


def make_limits(settings: Settings) -> KeyLimits:
    """The limits the settings pick: counted in Redis in queue mode, else in this process."""
    limits = settings.max_inflight_requests_per_key, settings.max_inflight_items_per_key
    if settings.queue_url is not None:
        return KeyLimits(RedisCounts(settings.queue_url, *limits))
    return KeyLimits(LocalCounts(*limits))


async def _request_lease(request: Request) -> AsyncIterator[Lease]:
    """The route's request slot, held until the route returns, fails or is cancelled."""
    limits: KeyLimits = request.app.state.proctor.limits
    lease = await limits.lease(requests=1)
    try:
        yield lease
    finally:
        await lease.release()


KeyLease = Annotated[Lease, Depends(_request_lease)]
"""A route parameter: one request slot of the caller's key (429 past the limit)."""
