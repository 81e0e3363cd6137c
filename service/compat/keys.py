"""The key in the URL of the compatibility routes: `/compat/sandbox-fusion/k/{KEY}/...`.

verl and the `sandbox-fusion` client post to a URL they are given and send no header, so a
server with API keys takes the key as a path segment there. `PathKeys` is the app's outermost
middleware: it compares that segment with every configured key in constant time and, before
anything else sees the request, rewrites it in the scope (`path`, `raw_path`) to `REDACTED`,
leaving its verdict in the scope for the keyed routes' dependency, `require_path_key`.
Routing, the access log (uvicorn reads the same scope), disconnect lines, tracebacks and the
metrics' route labels all see `k/REDACTED`, never the key. A key that matches names the tenant
as `Authorization: Bearer` with it would (`service.tenancy`); a wrong key, or any key on a
server that has none, is a 401 on every route under the prefix, `v1/ping` included, so a
misconfigured URL fails at its first call rather than as scores of -1 (a path that is no route
is a 404, a method no route takes a 405, as anywhere else).
"""

from __future__ import annotations

import hashlib
import hmac
import urllib.parse
from dataclasses import dataclass, field

from fastapi import HTTPException, Request
from starlette.types import ASGIApp, Receive, Scope, Send

from service.asgi import HttpMiddleware
from service.auth import PATH_KEY
from service.tenancy import set_tenant, tenant_of_key

__all__ = ["KEYED_PREFIXES", "REDACTED", "PathKeys", "require_path_key"]

REDACTED = "REDACTED"
KEYED_PREFIXES = ("/compat/sandbox-fusion/k/",)
"""Path prefixes whose next segment is an API key."""
WRONG_KEY = "unknown API key in the URL (/compat/sandbox-fusion/k/KEY/)"
NO_KEYS = "this server has no API keys: use /compat/sandbox-fusion/ without a key segment"


@dataclass(eq=False)
class PathKeys(HttpMiddleware):
    """Check and redact the key segment of `KEYED_PREFIXES` paths (see the module docstring)."""

    app: ASGIApp
    keys: tuple[str, ...]
    _digests: tuple[bytes, ...] = field(init=False)

    def __post_init__(self) -> None:
        self._digests = tuple(hashlib.sha256(k.encode()).digest() for k in self.keys)

    def _matches(self, key: str) -> bool:
        """Whether `key` is one of the keys: every digest compared, in constant time."""
        digest = hashlib.sha256(key.encode("utf-8", "surrogateescape")).digest()
        found = False
        for known in self._digests:
            found |= hmac.compare_digest(digest, known)
        return found

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope["path"]
        prefix = next((p for p in KEYED_PREFIXES if path.startswith(p)), None)
        if prefix is None:
            await self.app(scope, receive, send)
            return
        raw: bytes = scope.get("raw_path") or path.encode("utf-8", "surrogateescape")
        if not raw.startswith(prefix.encode()):  # the prefix spelt with escapes (`%6B`)
            raw = urllib.parse.quote(path, safe="/", errors="surrogateescape").encode()
        segment, slash, rest = raw[len(prefix) :].partition(b"/")
        # Read from the raw path: a `%2F` in the key is part of the key, not a slash.
        key = urllib.parse.unquote_to_bytes(segment).decode("utf-8", "surrogateescape")
        # Redacted in place: uvicorn's access line reads this very dict when the response starts.
        scope["raw_path"] = prefix.encode() + REDACTED.encode() + slash + rest
        scope["path"] = (
            prefix + REDACTED + slash.decode() + urllib.parse.unquote(rest.decode("latin-1"))
        )
        if not self._digests:
            scope[PATH_KEY] = NO_KEYS
        elif not self._matches(key):
            scope[PATH_KEY] = WRONG_KEY
        else:
            scope[PATH_KEY] = None
            set_tenant(tenant_of_key(key))
        await self.app(scope, receive, send)


def require_path_key(request: Request) -> None:
    """The keyed routes' dependency: a 401 unless `PathKeys` found the key in the path good.
    It runs once routing has matched the route (a wrong method is a 405 first)."""
    verdict = request.scope.get(PATH_KEY, WRONG_KEY)
    if verdict is not None:
        raise HTTPException(
            status_code=401,
            detail=verdict,
            headers={"WWW-Authenticate": 'Bearer error="invalid_token"'},
        )
