"""The exceptions the SDK raises for what cannot be turned into per-item results."""

from __future__ import annotations

from typing import Any

__all__ = ["ProctorError", "ProctorUnreachable", "ProctorValidationError"]


class ProctorError(Exception):
    """A request refused as a whole (401, 413, 422: an unknown spec, too many items), a failed
    job, or a reply that breaks the contract. Per-item failures never raise: they come back as
    `infra_error` or `invalid` results.

    `status_code` is the HTTP status when there was one; `detail` the server's `detail` field
    (FastAPI's list of `{loc, msg, type}` for a 422) or the reason in words.
    """

    def __init__(self, message: str, status_code: int | None = None, detail: Any = None) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.detail: Any = detail if detail is not None else message


class ProctorValidationError(ProctorError, ValueError):
    """Items refused by the client before anything was sent: a missing field, a wrong type, a
    value out of bounds. `detail` is pydantic's list of `{loc, msg, type}` errors, each `loc`
    starting with the item's position in the call."""


class ProctorUnreachable(ProctorError):
    """The client has never reached the server: every connection attempt of its first calls
    failed (a wrong URL, a server not started). Once the client has had one answer from the
    server, connection failures come back as `infra_error` results instead, so a server that is
    redeployed mid-run pauses a caller rather than crashing it."""
