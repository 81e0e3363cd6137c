"""API keys in the URL path, for the compatibility prefixes: `/compat/<name>/k/{KEY}/<route>`.

Clients of other frameworks post to a URL they are given and send no header, so a keyed server
takes the key in the path instead. The key is taken out at the edge: `PathKeys`, an ASGI
middleware, rewrites the request's `path` and `raw_path` to `.../k/REDACTED/...` in place, in
the scope uvicorn itself holds, before any route, log line or metric sees it. So the access log,
the disconnect line, a traceback's request and the route-template metric label all read
`k/REDACTED`, and the routes are registered at that literal path (`keyed`), which is also what
the OpenAPI document shows.

`PathKeys` checks the key there too (`check_path_key`, in constant time), before a body is read
or a route matched: a wrong key, or any key on a server with none, is a 401 on every path of the
prefix. A known key's tenant is kept in the scope; `service.http.auth.ApiKeyAuth` takes it from
`path_tenant` (the same tenant, and per-key limits, as that key in a header). Only the compat
prefixes have a key segment, so a key in any other URL authenticates nothing; without one a
compat prefix takes `Authorization: Bearer` as every route does. `redact_path_keys` is what the
log filters apply to every line besides.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Receive, Scope, Send

from service.core.tenancy import tenant_of_key
from service.http.asgi import HttpMiddleware, send_error
from service.http.errors import error_body

__all__ = [
    "COMPAT_ROOT",
    "REDACTED",
    "SCOPE_KEY",
    "PathKeys",
    "check_path_key",
    "keyed",
    "path_tenant",
    "prefixes",
    "redact_path_keys",
]

COMPAT_ROOT = "/compat"
"""Every compatibility prefix is `/compat/<name>`; only there does a `k/{KEY}` segment count."""
REDACTED = "REDACTED"
"""What stands for the key in the path once `PathKeys` has taken it out."""
SCOPE_KEY = "proctor.path_key_tenant"
"""The ASGI scope entry where `PathKeys` keeps the tenant of the key it took out of the path."""

_KEYED_PATH = re.compile(r"^(/compat/[^/]+)/k/([^/]*)(?=/|$)")
_KEY_IN_TEXT = re.compile(r"(/compat/[^/\s?#\"']+/k/)[^/\s?#\"']+")


def keyed(prefix: str) -> str:
    """The keyed form of a compat `prefix`, as its routes are registered."""
    return f"{prefix}/k/{REDACTED}"


def prefixes(prefix: str) -> tuple[str, str]:
    """A compat prefix's two forms: open (or `Authorization: Bearer`) and keyed in the path."""
    if not prefix.startswith(COMPAT_ROOT + "/") or prefix.count("/") != 2:
        raise ValueError(f"a compat prefix is {COMPAT_ROOT}/<name>, not {prefix!r}")
    return prefix, keyed(prefix)


def redact_path_keys(text: str) -> str:
    """`text` with the key of every compat URL in it (`/compat/<name>/k/KEY`) replaced."""
    if "/k/" not in text:
        return text
    return _KEY_IN_TEXT.sub(rf"\g<1>{REDACTED}", text)


@dataclass(eq=False)
class PathKeys(HttpMiddleware):
    """Takes the key out of a compat URL's path, in the request's own scope (see the module
    docstring), and checks it there, before the body is read or a route is matched: a wrong key
    is a 401 whatever the body or the route. A known key's tenant is kept under `SCOPE_KEY`.
    `known` are the server's keys (none: every key in a path is refused)."""

    app: ASGIApp
    known: Iterable[str] = ()

    def __post_init__(self) -> None:
        self._digests = frozenset(_digest(key) for key in self.known)

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope.get("path", "")
        match = _KEYED_PATH.match(path) if path.startswith(COMPAT_ROOT + "/") else None
        if match is not None:
            redacted = f"{match[1]}/k/{REDACTED}{path[match.end() :]}"
            # In place: uvicorn writes its access line from this very dict (`raw_path`).
            scope["path"] = redacted
            scope["raw_path"] = urllib.parse.quote(redacted).encode("ascii")
            try:
                scope[SCOPE_KEY] = check_path_key(match[2], self._digests)
            except HTTPException as refused:
                body = json.dumps(error_body(401, refused.detail), separators=(",", ":"))
                said = refused.headers or {}
                headers = [(k.lower().encode(), v.encode()) for k, v in said.items()]
                await send_error(send, 401, body.encode(), headers)
                return
        await self.app(scope, receive, send)


def path_tenant(scope: Scope) -> str | None:
    """The tenant of the key the request's path carried (`PathKeys` checked it), or None when
    its URL has no key segment."""
    tenant = scope.get(SCOPE_KEY)
    return tenant if isinstance(tenant, str) else None


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()


def check_path_key(key: str, digests: Iterable[bytes]) -> str:
    """The tenant of `key` when it is one of the server's keys (given as SHA-256 digests), else
    the 401. Every digest is compared, in constant time: nothing about a key leaks from how long
    the answer takes."""
    presented = _digest(key)
    known = False
    count = 0
    for digest in digests:
        known |= hmac.compare_digest(presented, digest)
        count += 1
    if count == 0:
        raise HTTPException(
            status_code=401,
            detail="this server has no API keys: drop `k/KEY` from the URL",
            headers={"WWW-Authenticate": "Bearer"},
        )
    if not known or not key:
        raise HTTPException(
            status_code=401,
            detail="unknown API key in the URL",
            headers={"WWW-Authenticate": 'Bearer error="invalid_token"'},
        )
    return tenant_of_key(key)
