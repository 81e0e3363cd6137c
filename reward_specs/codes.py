"""The error codes the service puts in a result's, a job's or a run's `error.code`, named once.

Every server module writes these constants, never the strings; the client package keeps a copy
(`proctor_client.codes`, it never imports the server) and tests/test_schema_drift.py checks
that the two sets are equal. They live here, below the service, because the engine itself
emits some of them.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "CANCELLED",
    "DEADLINE_EXCEEDED",
    "DISPATCH_ERROR",
    "DOMAIN_NOT_IN_SPEC",
    "ENVIRONMENT_CHANGED",
    "JOB_FAILED",
    "JOB_LOST",
    "JUDGE_TIMEOUT",
    "JUDGE_UNAVAILABLE",
    "MALFORMED_ITEM",
    "POOL_CRASHED",
    "RESULT_TOO_LARGE",
    "SANDBOX_ERROR",
    "SANDBOX_UNAVAILABLE",
    "SCORER_ERROR",
    "SERVER_CODES",
    "SHUTTING_DOWN",
    "STATE_LOST",
    "UNKNOWN_DOMAIN",
    "UNKNOWN_SPEC",
    "UNSERIALISABLE_ITEM",
    "WORKERS_UNAVAILABLE",
]

# An item's `invalid` (the request's fault).
MALFORMED_ITEM: Final = "malformed_item"
UNKNOWN_DOMAIN: Final = "unknown_domain"
UNSERIALISABLE_ITEM: Final = "unserialisable_item"
UNKNOWN_SPEC: Final = "unknown_spec"
DOMAIN_NOT_IN_SPEC: Final = "domain_not_in_spec"

# An item's or a run's `infra_error` (ours: the item was not judged).
SCORER_ERROR: Final = "scorer_error"
DEADLINE_EXCEEDED: Final = "deadline_exceeded"
DISPATCH_ERROR: Final = "dispatch_error"
WORKERS_UNAVAILABLE: Final = "workers_unavailable"
POOL_CRASHED: Final = "pool_crashed"
SANDBOX_ERROR: Final = "sandbox_error"
SANDBOX_UNAVAILABLE: Final = "sandbox_unavailable"
SHUTTING_DOWN: Final = "shutting_down"
ENVIRONMENT_CHANGED: Final = "environment_changed"
JUDGE_UNAVAILABLE: Final = "judge_unavailable"
JUDGE_TIMEOUT: Final = "judge_timeout"

# A job's `error`.
CANCELLED: Final = "cancelled"
JOB_FAILED: Final = "job_failed"
JOB_LOST: Final = "job_lost"
STATE_LOST: Final = "state_lost"
RESULT_TOO_LARGE: Final = "result_too_large"

SERVER_CODES: Final = frozenset(
    {
        MALFORMED_ITEM,
        UNKNOWN_DOMAIN,
        UNSERIALISABLE_ITEM,
        UNKNOWN_SPEC,
        DOMAIN_NOT_IN_SPEC,
        SCORER_ERROR,
        DEADLINE_EXCEEDED,
        DISPATCH_ERROR,
        WORKERS_UNAVAILABLE,
        POOL_CRASHED,
        SANDBOX_ERROR,
        SANDBOX_UNAVAILABLE,
        SHUTTING_DOWN,
        ENVIRONMENT_CHANGED,
        JUDGE_UNAVAILABLE,
        JUDGE_TIMEOUT,
        CANCELLED,
        JOB_FAILED,
        JOB_LOST,
        STATE_LOST,
        RESULT_TOO_LARGE,
    }
)
"""Every code above: what the client's copy must equal."""
