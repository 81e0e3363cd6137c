"""Every default of the SDK, in one place (the constructor arguments point here)."""

from __future__ import annotations

__all__ = [
    "BACKOFF_BASE_S",
    "BACKOFF_MAX_S",
    "CHUNK_SIZE",
    "DEFAULT_SPEC",
    "MAX_CONCURRENCY",
    "MAX_REQUEST_BYTES",
    "MAX_RETRIES",
    "RETRIED_STATUSES",
    "TIMEOUT_S",
]

TIMEOUT_S = 600.0
"""Seconds one HTTP request may take (a large code chunk can take minutes on a busy server)."""
CHUNK_SIZE = 4096
"""Items per `POST /v1/score`: a 256 x 16 GRPO step is one request. A server spreads one request
over all its workers itself, and every further request costs it time of its own, so smaller
chunks pay only where they spread a call over several servers (behind a load balancer: about
the call's size over the number of servers)."""
MAX_CONCURRENCY = 4
"""Chunks in flight at once."""
MAX_REQUEST_BYTES = 16 * 1024 * 1024
"""Most bytes of one `POST /v1/score` body: a chunk whose body is larger goes as halves (a
8K-token GRPO step of 4,096 responses is about 128 MiB). With `MAX_CONCURRENCY` this keeps one
client within a server's default request limits (`max_request_bytes` and the bytes it holds in
flight, 64 MiB each)."""
MAX_RETRIES = 5
"""Retries of one request after a connection error, 429, 502, 503 or 504."""
BACKOFF_BASE_S = 0.5
"""First backoff ceiling; it doubles per retry, and each wait is drawn uniformly below it."""
BACKOFF_MAX_S = 30.0
"""Largest backoff ceiling when the server gives no `Retry-After`."""
RETRIED_STATUSES = frozenset({429, 502, 503, 504})
"""Statuses that say "not now" (overload, a proxy without a healthy upstream); any other 4xx is
the request's own fault and is raised, never retried."""

DEFAULT_SPEC = "prorl-v1-careful-2"
"""The reward spec a trainer stage and the pass@k evaluator use when none is named: one name, so a
study judges a model with the reward it was trained on unless told otherwise. The server's default
(`default_spec`) is the same spec (tests/test_default_spec.py), so a client that names none is
judged alike by either. The only spec name written in clients/: every other module imports it."""
