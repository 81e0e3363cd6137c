"""Every timing of queue mode, in one place (as rq's `defaults.py`): leases, liveness, how long
a batch's keys and a job's state outlive their use."""

from __future__ import annotations

__all__ = [
    "ALIVE_REFRESH_S",
    "ALIVE_TTL_S",
    "JOB_LEASE_TTL_S",
    "JOB_REFRESH_S",
    "KEEP_S",
    "LEASE_CHECK_S",
    "LEASE_REFRESH_S",
    "LEASE_TTL_S",
    "RESULT_GRACE_S",
    "SOCKET_TIMEOUT_S",
]

LEASE_TTL_S = 3.0
"""A chunk whose worker has not refreshed its lease for this long is taken to be lost and is
re-enqueued (`service.queue.leases`)."""
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
JOB_LEASE_TTL_S = 5.0
"""A running job whose replica has not refreshed its lease for this long is taken over."""
JOB_REFRESH_S = 1.0
"""How often the running replica writes a job's progress and refreshes its lease, and how often
each replica looks for jobs to take over."""
