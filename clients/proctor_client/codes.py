"""The error codes a result, a job or a run can carry in `error.code`, as constants.

`SERVER_CODES` copies the service's (`reward_specs.codes`; this package never imports the
server, and tests/test_schema_drift.py checks the copy is equal). The client adds its own three
for an item no server answered (`UNANSWERED_CODES`): a trainer pauses on those instead of
masking the item, since nothing was judged at all.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "CANCELLED",
    "CLIENT_RETRIES_EXHAUSTED",
    "CLIENT_TIMEOUT",
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
    "SERVER_ERROR",
    "SHUTTING_DOWN",
    "STATE_LOST",
    "UNANSWERED_CODES",
    "UNKNOWN_DOMAIN",
    "UNKNOWN_SPEC",
    "UNSERIALISABLE_ITEM",
    "WORKERS_UNAVAILABLE",
]

# The service's: an item's `invalid` (the request's fault).
MALFORMED_ITEM: Final = "malformed_item"
UNKNOWN_DOMAIN: Final = "unknown_domain"
UNSERIALISABLE_ITEM: Final = "unserialisable_item"
UNKNOWN_SPEC: Final = "unknown_spec"
DOMAIN_NOT_IN_SPEC: Final = "domain_not_in_spec"

# The service's: an item's or a run's `infra_error` (the item was not judged).
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

# The service's: a job's `error`.
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

# The client's own `infra_error` codes: no usable answer came back.
CLIENT_TIMEOUT: Final = "client_timeout"
"""No answer within `timeout_s`."""
SERVER_ERROR: Final = "server_error"
"""A 5xx that is not retried."""
CLIENT_RETRIES_EXHAUSTED: Final = "client_retries_exhausted"
"""Every retry failed (refused connections, retried statuses)."""

UNANSWERED_CODES: Final = frozenset({CLIENT_TIMEOUT, SERVER_ERROR, CLIENT_RETRIES_EXHAUSTED})
