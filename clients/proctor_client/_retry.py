"""When to send a request again, and after how long: exponential backoff with full jitter, or
what the server's `Retry-After` asks for."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from email.utils import parsedate_to_datetime

import httpx

from proctor_client import _defaults

__all__ = ["RETRIED_ERRORS", "Backoff", "retry_after_s"]

RETRIED_ERRORS: tuple[type[Exception], ...] = (
    httpx.NetworkError,
    httpx.ConnectTimeout,
    httpx.RemoteProtocolError,
)
"""Transport failures worth another try: the connection could not be made, or broke. Scoring is
a pure function of the request, so sending it again is safe. A read timeout is not retried: the
server is still working on the chunk, and a second copy would only double its load."""


def retry_after_s(response: httpx.Response) -> float | None:
    """The seconds a `Retry-After` header asks for (a number or an HTTP date), or None."""
    value = response.headers.get("retry-after")
    if value is None:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass  # not a number of seconds: an HTTP date, or garbage
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


@dataclass(frozen=True)
class Backoff:
    """Waits between attempts. Without `Retry-After`, attempt n waits uniformly in
    [0, min(max_s, base_s * 2**n)] ("full jitter"), so that many trainer ranks refused at once do
    not come back at once. With it, the server's wait plus up to 10% of jitter."""

    base_s: float = _defaults.BACKOFF_BASE_S
    max_s: float = _defaults.BACKOFF_MAX_S

    def delay_s(self, attempt: int, retry_after: float | None = None) -> float:
        if retry_after is not None:
            return retry_after * (1.0 + random.uniform(0.0, 0.1))
        return random.uniform(0.0, min(self.max_s, self.base_s * 2.0**attempt))
