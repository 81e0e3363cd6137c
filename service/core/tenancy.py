"""Who a request is for: the tenant, named by a digest of its API key (never the key itself).

The auth dependency sets it for the request's task; work the request starts (a dispatcher's
batch, a job's task) reads it with `tenant()`, so the schedulers can share workers fairly among
tenants and the job stores can keep each job to its tenant. An open service (no keys) has one
tenant, `""`.
"""

from __future__ import annotations

import contextvars
import hashlib

__all__ = ["OPEN_TENANT", "set_tenant", "tenant", "tenant_of_key"]

OPEN_TENANT = ""
"""The tenant of every request when no API key is configured."""

_TENANT: contextvars.ContextVar[str] = contextvars.ContextVar("proctor_tenant", default=OPEN_TENANT)


def tenant_of_key(key: str) -> str:
    """A tenant's name: 16 hex digits of the key's SHA-256 (safe to log, to keep in Redis)."""
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def tenant() -> str:
    """The tenant of the request being served in this context."""
    return _TENANT.get()


def set_tenant(name: str) -> None:
    """Name the tenant for this context (the request's task, from the auth dependency)."""
    _TENANT.set(name)
