"""Leases: a Redis key its holder keeps alive by refreshing it, and that lapses once the holder
is gone (killed, stopped, cut off), so that another takes the work over.

Queue mode holds two kinds, one mechanism: a chunk's (`CHUNK`, held by the worker scoring it;
the API side re-runs a chunk whose lease lapsed) and a job's (`JOB`, held by the API replica
running it; another replica takes a job whose lease lapsed over).

Why these are ours and not RQ's: RQ notices a lost job only when its worker's heartbeat key
expires (the worker's TTL plus the job's timeout, about a minute at the least), and then marks
it failed; a chunk must be re-run within `timings.LEASE_TTL_S` of its worker's loss, and a job
run by an API replica is no RQ job at all. Everything else is RQ's: the queues, the chunks' job
records and registries, the workers' registration and heartbeats.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from redis import Redis
from redis.client import Pipeline

from service.queue import keys, timings

__all__ = ["CHUNK", "JOB", "Lease", "chunk_states"]

Connection = Redis | Pipeline
"""A client, or a pipeline whose `execute` gives the answers."""


@dataclass(frozen=True, slots=True)
class Lease:
    """One kind of lease: its key for a name, and how long it lives past a refresh."""

    key_of: Callable[[str], str]
    ttl_s: float

    @property
    def ttl_ms(self) -> int:
        return max(1, int(self.ttl_s * 1000))

    def acquire(self, conn: Connection, name: str, holder: str = "1") -> Any:
        """Take the lease for `holder`, or renew it, whoever held it (the holder re-takes a
        lease a Redis restart lost)."""
        return conn.set(self.key_of(name), holder, px=self.ttl_ms)

    def refresh(self, conn: Connection, name: str, holder: str = "1") -> Any:
        """Renew the lease if it is still there: one released meanwhile stays released."""
        return conn.set(self.key_of(name), holder, px=self.ttl_ms, xx=True)

    def take_over(self, conn: Connection, name: str, holder: str) -> Any:
        """Take the lease only if it has lapsed (or never was): true if `holder` won it."""
        return conn.set(self.key_of(name), holder, px=self.ttl_ms, nx=True)

    def held(self, conn: Connection, name: str) -> Any:
        """Whether anyone holds the lease."""
        return conn.exists(self.key_of(name))

    def release(self, conn: Connection, name: str) -> Any:
        return conn.delete(self.key_of(name))


CHUNK = Lease(keys.lease_key, timings.LEASE_TTL_S)
"""A chunk's lease, named by its RQ job's id, held by the worker scoring it."""
JOB = Lease(keys.job_lease_key, timings.JOB_LEASE_TTL_S)
"""A job's lease, named by the job's id, held by the API replica running it (`owner`)."""


def chunk_states(client: Redis, job_ids: Sequence[str]) -> list[tuple[bool, bool]]:
    """For each of `job_ids` (a chunk's or a run's RQ job): whether a worker has claimed it,
    and whether its `CHUNK` lease is held. Claimed without a lease: its worker is gone."""
    with client.pipeline(transaction=False) as pipe:
        for job_id in job_ids:
            pipe.exists(keys.claim_key(job_id))
            CHUNK.held(pipe, job_id)
        answers = pipe.execute()
    return [(bool(c), bool(h)) for c, h in zip(answers[::2], answers[1::2], strict=True)]
