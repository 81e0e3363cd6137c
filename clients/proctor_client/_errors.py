"""The one exception the SDK raises for what cannot be turned into per-item results."""

from __future__ import annotations

from typing import Any

__all__ = ["ProctorError"]


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
        self.detail = detail if detail is not None else message
