"""The app factory: builds a Proctor app from settings. No import-time singletons."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from contextlib import asynccontextmanager
from typing import Any, cast

from fastapi import Depends, FastAPI, Request, Response
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Receive, Scope, Send

from reward_specs import BUILTIN_SPEC_DIR, SpecError, load_specs
from service.auth import ApiKeyAuth
from service.dispatch.local import LocalDispatcher
from service.dispatch.worker import load_registry
from service.jobs import JobStore
from service.metrics import Metrics
from service.routes import health, openrlhf, puzzles, score
from service.runtime import settle_heap
from service.schemas import ScoreRequest
from service.settings import Settings
from service.state import AppState

__all__ = ["create_app"]

log = logging.getLogger(__name__)


class BodyLimit:
    """Refuse request bodies over `limit` bytes with a 413, before they are parsed.

    A declared `content-length` is checked up front; a streamed body is counted as it arrives, and
    once it passes the limit the 413 is sent and the app is told the client went away.
    """

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await self._refuse(send)
            return
        seen = 0
        started = refused = False

        async def counting_receive() -> MutableMapping[str, Any]:
            nonlocal seen, refused
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit and not refused:
                    refused = True
                    if not started:
                        await self._refuse(send)
                    return {"type": "http.disconnect"}
            return message

        async def guarded_send(message: MutableMapping[str, Any]) -> None:
            nonlocal started
            if refused:
                return  # the 413 has been sent; whatever the app says next goes nowhere
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        await self.app(scope, counting_receive, guarded_send)

    async def _refuse(self, send: Callable[[MutableMapping[str, Any]], Awaitable[None]]) -> None:
        body = (
            b'{"detail":[{"loc":["body"],"msg":"request body exceeds %d bytes",'
            b'"type":"request_too_large"}]}' % self.limit
        )
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


async def _unreadable_body_is_422(request: Request, exc: Exception) -> Response:
    """FastAPI answers a body it cannot decode (not UTF-8) with a bare 400; the contract says a
    request that is not JSON is a 422 naming the body."""
    if isinstance(exc, StarletteHTTPException) and exc.status_code == 400:
        return JSONResponse(
            {
                "detail": [
                    {"loc": ["body"], "msg": "the body is not UTF-8 JSON", "type": "json_invalid"}
                ]
            },
            status_code=422,
        )
    return await http_exception_handler(request, cast(StarletteHTTPException, exc))


async def _validation_error(request: Request, exc: Exception) -> Response:
    """422 naming each offending field. The offending input is not echoed back: it can be
    megabytes long, or a number JSON cannot carry (1e400 parses as infinity)."""
    errors = exc.errors() if isinstance(exc, RequestValidationError) else []
    detail = [
        {
            "loc": list(e.get("loc", ())),
            "msg": str(e.get("msg", "")),
            "type": str(e.get("type", "")),
        }
        for e in errors[:50]
    ]
    return JSONResponse({"detail": detail}, status_code=422)


def build_state(settings: Settings) -> AppState:
    """Registry, specs and dispatcher for `settings`; spec errors surface here, at start-up."""
    registry = load_registry(settings.registry)
    specs = load_specs(registry, (BUILTIN_SPEC_DIR, *settings.spec_dirs))
    if settings.default_spec not in specs:
        raise SpecError(f"default spec {settings.default_spec!r} is not among {sorted(specs)}")
    dispatcher = LocalDispatcher(settings, registry)
    return AppState(
        settings=settings,
        registry=registry,
        specs=specs,
        dispatcher=dispatcher,
        metrics=Metrics(dispatcher.pool.stats),
        jobs=JobStore(settings.max_jobs, settings.job_ttl_s),
    )


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()
    state = build_state(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await state.dispatcher.start()
        settle_heap()
        try:
            yield
        finally:
            await state.jobs.close()
            await state.dispatcher.stop()

    app = FastAPI(
        title="Proctor",
        version="1",
        summary="Verifier and reward service for RL on reasoning language models.",
        lifespan=lifespan,
        dependencies=[Depends(ApiKeyAuth(settings))],
    )
    app.state.proctor = state
    app.add_exception_handler(StarletteHTTPException, _unreadable_body_is_422)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.include_router(score.router)
    app.include_router(health.router)
    app.include_router(puzzles.router)
    app.include_router(openrlhf.router)
    app.add_middleware(BodyLimit, limit=settings.max_request_bytes)
    app.openapi = _openapi_with_server_facts(app, state)  # type: ignore[method-assign]
    return app


def _openapi_with_server_facts(app: FastAPI, state: AppState) -> Callable[[], dict[str, Any]]:
    """The generated schema, plus the score request's and what only this server knows: its spec
    names and item limit."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(
                title=app.title, version=app.version, summary=app.summary, routes=app.routes
            )
            # The score routes read their bodies themselves (service.ingest): their schema
            # joins the components here, where their operations point.
            components = schema.setdefault("components", {}).setdefault("schemas", {})
            body = ScoreRequest.model_json_schema(ref_template="#/components/schemas/{model}")
            components.update(body.pop("$defs", {}))
            components["ScoreRequest"] = body
            request = components["ScoreRequest"]["properties"]
            for option in request["spec"]["anyOf"]:
                if option.get("type") == "string":
                    option["enum"] = sorted(state.specs)
            request["items"]["maxItems"] = state.settings.max_items_per_request
            app.openapi_schema = schema
        return app.openapi_schema

    return openapi
