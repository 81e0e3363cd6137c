"""Routes that speak other projects' protocols, so that their clients reach Proctor unchanged:
SandboxFusion's (`service.compat.routes`, docs/api.md "SandboxFusion compatibility").

`install(app, keys)` adds the routes and the middleware that checks and redacts the API key in
their URLs (`service.compat.keys`); it is the only thing the app factory calls.
"""

from __future__ import annotations

from fastapi import FastAPI

from service.compat.keys import PathKeys
from service.compat.routes import router

__all__ = ["install"]


def install(app: FastAPI, keys: tuple[str, ...]) -> None:
    """Add the compat routes to `app`, and `PathKeys` as its outermost middleware: call it after
    every other `add_middleware`, so that no other layer sees a key in a path."""
    app.include_router(router)
    app.add_middleware(PathKeys, keys=keys)
