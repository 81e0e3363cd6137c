"""API-key authentication: every route needs `Authorization: Bearer KEY` once keys are configured,
except the probes (`/healthz`, `/readyz`) and, by a setting, `/metrics`.

Keys come from `Settings.api_keys` and `Settings.api_keys_file`; only their SHA-256 digests are
kept, and a presented key is looked up by digest, so the comparison leaks nothing about a key.
`check_exposure` is what `proctor serve` runs before it binds: a service reachable from other
machines without a key is refused unless the operator says `--insecure-no-auth`.
"""

from __future__ import annotations

import hashlib
import ipaddress
import logging
from typing import Any

from fastapi import HTTPException, Request

from service.core.logs import RedactQuerySecrets
from service.core.tenancy import set_tenant, tenant_of_key
from service.http.compat.path_keys import path_tenant
from service.settings import Settings

__all__ = [
    "ApiKeyAuth",
    "ExposureError",
    "check_exposure",
    "declare_security",
    "load_keys",
    "redact_access_log",
]

log = logging.getLogger(__name__)

OPEN_PATHS = frozenset({"/healthz", "/readyz"})
"""Routes that never need a key: orchestrators' probes carry none."""
QUERY_KEY_PATHS = frozenset({"/v1/openrlhf"})
"""Routes whose callers cannot send a header (OpenRLHF posts to a bare URL): the key may come as
the `api_key` query parameter instead, as URL-decoded (`api%5Fkey` is `api_key`), and only
there: on any other route a key in the URL authenticates nothing. Every log line has such a
value redacted, whatever its spelling (`service.core.logs.redact_query_secrets`)."""


def redact_access_log() -> None:
    """Keep keys sent in URLs (`QUERY_KEY_PATHS`), however spelt, out of uvicorn's access log
    (`configure_logging` redacts every line its handler writes as well)."""
    logging.getLogger("uvicorn.access").addFilter(RedactQuerySecrets())


def _open_paths(settings: Settings) -> frozenset[str]:
    return OPEN_PATHS if settings.metrics_require_key else OPEN_PATHS | {"/metrics"}


def declare_security(schema: dict[str, Any], settings: Settings) -> None:
    """Say in the OpenAPI `schema` how a key is sent: a bearer scheme (what gives /docs its
    Authorize button), the query key of `QUERY_KEY_PATHS`, and, once keys are configured, which
    operations need one (all but the open paths)."""
    components = schema.setdefault("components", {})
    components["securitySchemes"] = {
        "bearer": {"type": "http", "scheme": "bearer", "description": "an API key"},
        "query_key": {"type": "apiKey", "in": "query", "name": "api_key"},
    }
    if not load_keys(settings):
        return
    schema["security"] = [{"bearer": []}]
    for path, operations in schema.get("paths", {}).items():
        for operation in operations.values():
            if path in _open_paths(settings):
                operation["security"] = []
            elif path in QUERY_KEY_PATHS:
                operation["security"] = [{"bearer": []}, {"query_key": []}]


class ExposureError(ValueError):
    """`proctor serve` would listen beyond loopback with no key."""


def load_keys(settings: Settings) -> tuple[str, ...]:
    """The keys of `settings.api_keys` and of `settings.api_keys_file`."""
    keys = list(settings.api_keys)
    if settings.api_keys_file is not None:
        try:
            text = settings.api_keys_file.read_text(encoding="utf-8")
        except OSError as exc:
            raise ValueError(f"cannot read api_keys_file {settings.api_keys_file}: {exc}") from exc
        for number, line in enumerate(text.splitlines(), 1):
            key = line.split("#", 1)[0].strip()
            if key and len(key) < 16:
                raise ValueError(
                    f"{settings.api_keys_file}:{number}: an API key must be at least 16 characters"
                )
            if key:
                keys.append(key)
    return tuple(keys)


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode()).digest()


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


def check_exposure(settings: Settings) -> None:
    """Refuse a non-loopback `host` with no key, unless `insecure_no_auth`."""
    if _is_loopback(settings.host) or load_keys(settings) or settings.insecure_no_auth:
        return
    raise ExposureError(
        f"refusing to serve on {settings.host} with no API key: anyone who can reach it could "
        "use it. Set PROCTOR_API_KEYS (or api_keys_file), bind 127.0.0.1, or pass "
        "--insecure-no-auth if something in front of it authenticates."
    )


class ApiKeyAuth:
    """The app-wide dependency; open when no key is configured."""

    def __init__(self, settings: Settings) -> None:
        self._digests = frozenset(_digest(k) for k in load_keys(settings))
        self._open = _open_paths(settings)
        if not self._digests:
            level = logging.WARNING if settings.insecure_no_auth else logging.INFO
            log.log(level, "no API key configured: every route of this service is open")

    async def __call__(self, request: Request) -> None:
        if (tenant := path_tenant(request.scope)) is not None:  # a compat URL's known `k/KEY`
            set_tenant(tenant)
            return
        if not self._digests or request.url.path in self._open:
            return
        scheme, _, key = request.headers.get("authorization", "").partition(" ")
        if request.url.path in QUERY_KEY_PATHS and "api_key" in request.query_params:
            scheme, key = "bearer", request.query_params["api_key"]
        if scheme.lower() != "bearer" or not key.strip():
            raise HTTPException(
                status_code=401,
                detail="this service needs an API key: send 'Authorization: Bearer KEY'",
                headers={"WWW-Authenticate": "Bearer"},
            )
        if _digest(key.strip()) not in self._digests:
            raise HTTPException(
                status_code=401,
                detail="unknown API key",
                headers={"WWW-Authenticate": 'Bearer error="invalid_token"'},
            )
        set_tenant(
            tenant_of_key(key.strip())
        )  # whose work this request's is (service.core.tenancy)
