"""How queue mode talks to Redis: connecting (failing fast), the shared clock, a URL without its
password, what an unreachable Redis raises, and the report a live worker publishes.

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

from sandboxes import SandboxStats
from service.dispatch.base import DispatchStats
from service.queue.timings import SOCKET_TIMEOUT_S

__all__ = ["REDIS_ERRORS", "WorkerReport", "connect", "redacted", "server_time"]


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
    run_loops: int = 0
    """RQ loops taking runs (`service.queue.run_queue`), one per sandbox of its run pool; 0: it
    serves no runs."""
    run_sandboxes: tuple[int, int, int, int, int] = (0, 0, 0, 0, 0)
    """Its run pool's sandboxes: size, live, idle, started, retired (`SandboxStats`)."""

    def environment(self, domain: str) -> str | None:
        return dict(self.environments).get(domain)

    @classmethod
    def of(
        cls,
        domains: tuple[str, ...],
        stats: DispatchStats,
        loops: int = 0,
        environments: dict[str, str] | None = None,
        runs: tuple[int, SandboxStats] | None = None,
    ) -> WorkerReport:
        """The report of a worker: its pool's `stats`, its chunk `loops`, and with `runs` its
        run loops and run pool's stats."""
        run_loops, run_stats = runs if runs is not None else (0, SandboxStats(0, 0, 0, 0, 0))
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
            run_loops,
            (run_stats.size, run_stats.live, run_stats.idle, run_stats.started, run_stats.retired),
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
                      "sandbox_replacements", "loops", "run_loops")}  # fmt: skip
            environments = tuple(sorted((str(d), str(e)) for d, e in
                                        value.get("environments", ())))  # fmt: skip
            size, live, idle, started, retired = (
                int(n) for n in value.get("run_sandboxes", (0,) * 5)
            )
            return cls(tuple(str(d) for d in value["domains"]), **counts,
                       environments=environments,
                       run_sandboxes=(size, live, idle, started, retired))  # fmt: skip
        except (ValueError, TypeError, KeyError, AttributeError):
            return None


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
