"""/docs and /redoc served with their assets from the installed `fastapi-offline` package, so the
interactive API documentation works on a cluster with no internet (FastAPI's own pages load
Swagger UI and ReDoc from a CDN)."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

__all__ = ["ASSETS_PATH", "mount_docs"]

ASSETS_PATH = "/docs-assets"
"""Where the pages' scripts, styles and icon are served."""


def _assets_dir() -> Path:
    return Path(str(files("fastapi_offline") / "static"))


def mount_docs(app: FastAPI) -> None:
    """Add /docs and /redoc to `app` (created with `docs_url=None, redoc_url=None`). Like the
    schema they show (FastAPI's /openapi.json), they are plain routes, outside the app's
    dependencies such as its API keys."""
    page: dict[str, Any] = {
        "openapi_url": app.openapi_url or "/openapi.json",
        "title": f"{app.title} API",
    }
    favicon = f"{ASSETS_PATH}/favicon.png"

    async def swagger_ui(request: Request) -> HTMLResponse:
        return get_swagger_ui_html(
            **page,
            swagger_js_url=f"{ASSETS_PATH}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS_PATH}/swagger-ui.css",
            swagger_favicon_url=favicon,
        )

    async def redoc(request: Request) -> HTMLResponse:
        return get_redoc_html(
            **page,
            redoc_js_url=f"{ASSETS_PATH}/redoc.standalone.js",
            redoc_favicon_url=favicon,
            with_google_fonts=False,
        )

    app.add_route("/docs", swagger_ui, include_in_schema=False)
    app.add_route("/redoc", redoc, include_in_schema=False)
    app.mount(ASSETS_PATH, StaticFiles(directory=_assets_dir()), name="docs-assets")
