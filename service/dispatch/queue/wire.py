"""What the API side and the workers of queue mode share: Redis key names, timings, the job
function's name and how to connect. Every default of queue mode is here (as rq's `defaults.py`).

Keys (all under `proctor:`), besides RQ's own (`rq:queue:proctor-<domain>`, and
`rq:queue:proctor-code@<digest>` for code, one per environment; jobs, registries):

- `proctor:alive:<worker>`: a worker's `WorkerReport` (the domains it serves, its sandbox's
  environment digest, its pool's counts), while it is alive and warm (expires `ALIVE_TTL_S`
  after its last refresh), and `proctor:workers`, the set of workers that have said so (the
  API side drops those whose key has expired);
- `proctor:claim:<job>`: the worker that took a chunk's job (kept until the batch is over);
- `proctor:lease:<job>`: held while that worker scores the chunk (expires `LEASE_TTL_S` after its
  last refresh): a claim without a lease is a chunk whose worker is gone;
- `proctor:results:<batch>`: the list a batch's outcomes are pushed on, one entry per chunk;
- `proctor:inflight`: batch -> "<items> <expiry>", the items waiting for a result (the queue
  depth `max_queue_depth` bounds), across API replicas.

Payloads are pickled (RQ's default serializer pickles job arguments too): Redis is part of the
trusted deployment, since whoever can write to it runs code in the workers.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from urllib.parse import urlsplit, urlunsplit

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from service.dispatch.base import DispatchStats

__all__ = [
    "ALIVE_REFRESH_S",
    "ALIVE_TTL_S",
    "INFLIGHT_KEY",
    "JOB_FUNCTION",
    "KEEP_S",
    "LEASE_CHECK_S",
    "LEASE_REFRESH_S",
    "LEASE_TTL_S",
    "REDIS_ERRORS",
    "RESULT_GRACE_S",
    "WORKERS_KEY",
    "WorkerReport",
    "alive_key",
    "claim_key",
    "connect",
    "lease_key",
    "queue_name",
    "redacted",
    "results_key",
    "server_time",
]

LEASE_TTL_S = 3.0
"""A chunk whose worker has not refreshed its lease for this long is taken to be lost and is
re-enqueued (RQ itself notices a dead worker only when its heartbeat key expires, minutes)."""
LEASE_REFRESH_S = 0.5
"""How often a worker refreshes the leases of the chunks it holds."""
LEASE_CHECK_S = 0.5
"""How often the API side looks for lapsed leases of a batch's chunks."""
ALIVE_TTL_S = 3.0
"""A worker that has not said it is alive for this long no longer counts (readiness, routing)."""
ALIVE_REFRESH_S = 1.0
RESULT_GRACE_S = 2.0
"""How long past a deadline the API still waits for a worker's own answer (which resolves late
items itself) before it resolves them."""
KEEP_S = 60.0
"""How long a batch's keys outlive its deadline (a late worker's results expire with them)."""
SOCKET_TIMEOUT_S = 5.0
"""No Redis command waits longer than this for an answer (blocking pops wait less)."""
JOB_FUNCTION = "service.dispatch.queue.host.score_chunk"

REDIS_ERRORS = (redis.RedisError,)
"""What a Redis that is unreachable (down, restarting, partitioned) or unable to serve (out of
memory, a replica, a changed password) raises: the queue is unavailable either way."""


@dataclass(frozen=True, slots=True)
class WorkerReport:
    """What a live worker says of itself, refreshed with its liveness: the API side sums these
    for /metrics (the counters count since that worker started)."""

    domains: tuple[str, ...]
    processes: int = 0
    ready_processes: int = 0
    restarts: int = 0
    timeouts: int = 0
    poison_items: int = 0
    sandboxes: int = 0
    sandbox_replacements: int = 0
    loops: int = 0
    """RQ loops the worker runs (chunks it scores at once); 0 from a worker that does not say."""
    environments: tuple[tuple[str, str], ...] = ()
    """(domain, environment digest) of its sandboxed domains: it takes their chunks from the
    queues of those digests only (`queue_name`)."""

    def environment(self, domain: str) -> str | None:
        return dict(self.environments).get(domain)

    @classmethod
    def of(
        cls,
        domains: tuple[str, ...],
        stats: DispatchStats,
        loops: int = 0,
        environments: dict[str, str] | None = None,
    ) -> WorkerReport:
        return cls(
            domains,
            stats.workers,
            stats.ready_workers,
            stats.restarts,
            stats.timeouts,
            stats.poison_items,
            int(stats.extras.get("sandboxes", 0)),
            int(stats.extras.get("sandbox_replacements", 0)),
            loops,
            tuple(sorted((environments or {}).items())),
        )

    def encode(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def decode(cls, raw: bytes | str) -> WorkerReport | None:
        """The report in `raw`, or None if it is not one (a worker of another version)."""
        try:
            value = json.loads(raw)
            counts = {k: int(value.get(k, 0)) for k in ("processes", "ready_processes",
                      "restarts", "timeouts", "poison_items", "sandboxes",
                      "sandbox_replacements", "loops")}  # fmt: skip
            environments = tuple(sorted((str(d), str(e)) for d, e in
                                        value.get("environments", ())))  # fmt: skip
            return cls(tuple(str(d) for d in value["domains"]), **counts,
                       environments=environments)  # fmt: skip
        except (ValueError, TypeError, KeyError, AttributeError):
            return None


def queue_name(domain: str, environment: str | None = None) -> str:
    """The RQ queue of a domain's chunks (one queue per domain, so workers can pick domains);
    a sandboxed domain's chunks go on one queue per environment digest, so that only workers
    whose sandbox has that digest take them."""
    if environment is None:
        return f"proctor-{domain}"
    return f"proctor-{domain}@{environment}"


def alive_key(worker: str) -> str:
    return f"proctor:alive:{worker}"


def claim_key(job_id: str) -> str:
    return f"proctor:claim:{job_id}"


def lease_key(job_id: str) -> str:
    return f"proctor:lease:{job_id}"


def results_key(batch_id: str) -> str:
    return f"proctor:results:{batch_id}"


INFLIGHT_KEY = "proctor:inflight"
WORKERS_KEY = "proctor:workers"


def connect(url: str) -> redis.Redis:
    """A client for `url` (`redis://`, `rediss://` for TLS, `redis://:PASSWORD@...`, `unix://`),
    as redis-py's `from_url` reads it. It fails fast when Redis is down (one immediate retry,
    which a connection left stale by a restart of Redis needs), so that nothing waits on it."""
    return redis.Redis.from_url(
        url,
        socket_connect_timeout=2.0,
        socket_timeout=SOCKET_TIMEOUT_S,
        retry=Retry(NoBackoff(), 1),
        retry_on_error=[redis.ConnectionError, redis.TimeoutError],
        health_check_interval=10,
    )


def server_time(client: redis.Redis) -> float:
    """Redis's clock (seconds since the epoch): the one clock the API side and every worker
    share, so deadlines travel as instants on it and no machine's own clock matters."""
    seconds, micros = client.time()
    return float(seconds) + float(micros) / 1e6


def redacted(url: str) -> str:
    """`url` without its password, for logs and error messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    user = f"{parts.username}:***@" if parts.username else ":***@"
    return urlunsplit((parts.scheme, user + host, parts.path, parts.query, parts.fragment))
