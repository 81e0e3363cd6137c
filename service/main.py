"""The app factory: builds a Proctor app from settings. No import-time singletons."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from fastapi import Depends, FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect
from starlette.routing import Match
from starlette.types import ASGIApp, Receive, Scope, Send

from reward_specs import Registry, SpecError
from service.asgi import HttpMiddleware, send_error
from service.auth import ApiKeyAuth, declare_security, load_keys
from service.compat import keys, nemo_gym, sandbox_fusion_routes
from service.dispatch import Dispatcher, DispatchRefused, local
from service.errors import error_body, invalid_json
from service.examples import EXAMPLE_ITEMS
from service.jobs import FinishedLimits, Jobs, JobStore, Runner
from service.limits import make_limits
from service.limits_http import BodyBudget, serve_guarded
from service.loading import LoadedSpecs, load_registry
from service.logs import RequestIdMiddleware, client_gone
from service.metrics import Metrics, StatusCounter, plain_paths
from service.queue import make_queue_mode
from service.routes import health, openrlhf, puzzles, run, score
from service.routes.docs import mount_docs
from service.runs import RunPool
from service.runtime import settle_heap
from service.sampling import Sampler
from service.schemas import ScoreRequest
from service.settings import Settings
from service.state import AppState

__all__ = ["create_app"]

log = logging.getLogger(__name__)


@dataclass(eq=False)
class BodyLimit(HttpMiddleware):
    """Refuse request bodies over `limit` bytes with a 413, before they are parsed.

    A declared `content-length` is checked up front; a streamed body is counted as it arrives, and
    once it passes the limit the 413 is sent and the app is told the client went away.
    """

    app: ASGIApp
    limit: int

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await self._refuse(send)
            return

        def admit(seen: int) -> bool:
            return seen <= self.limit

        await serve_guarded(self.app, scope, receive, send, admit, self._refuse)

    async def _refuse(self, send: Send) -> None:
        message = f"request body exceeds {self.limit} bytes"
        detail = [{"loc": ["body"], "msg": message, "type": "request_too_large"}]
        body = json.dumps(error_body(413, detail), separators=(",", ":")).encode()
        await send_error(send, 413, body)


def _allowed_methods(request: Request) -> str:
    """Every method some route takes at this path (Starlette names only the first route's)."""
    methods: set[str] = set()
    for route in request.app.routes:
        if isinstance(route, APIRoute) and route.matches(request.scope)[0] != Match.NONE:
            methods |= route.methods or set()
    return ", ".join(sorted(methods))


async def _http_error(request: Request, exc: Exception) -> Response:
    """FastAPI answers a body it cannot decode (not UTF-8) with a bare 400; the contract says a
    request that is not JSON is a 422 naming the body. A 405 names every allowed method."""
    if not isinstance(exc, StarletteHTTPException):
        raise exc
    headers = dict(exc.headers or {})
    if exc.status_code == 405:
        headers["Allow"] = _allowed_methods(request)
    if exc.status_code == 400:
        detail = [{"loc": ["body"], "msg": "the body is not UTF-8 JSON", "type": "json_invalid"}]
        return JSONResponse(error_body(422, detail), status_code=422)
    if exc.status_code in (204, 304):  # no body allowed
        return Response(status_code=exc.status_code, headers=headers)
    return JSONResponse(
        error_body(exc.status_code, exc.detail), status_code=exc.status_code, headers=headers
    )


async def _validation_error(request: Request, exc: Exception) -> Response:
    """422 naming each offending field. The offending input is not echoed back: it can be
    megabytes long, or a number JSON cannot carry (1e400 parses as infinity)."""
    errors = exc.errors() if isinstance(exc, RequestValidationError) else []
    errors = [_json_position_in_message(e) for e in errors]
    detail = [
        {
            "loc": list(e.get("loc", ())),
            "msg": str(e.get("msg", "")),
            "type": str(e.get("type", "")),
        }
        for e in errors[:50]
    ]
    return JSONResponse(error_body(422, detail), status_code=422)


def _json_position_in_message(error: Any) -> Any:
    """FastAPI's own decoding error (routes that read their body through it) in our words."""
    match error.get("type"), error.get("loc"):
        case "json_invalid", ("body", int(position)):
            return invalid_json(position, str(error.get("ctx", {}).get("error", "not JSON")))
    return error


async def _refused(request: Request, exc: Exception) -> Response:
    """A batch the dispatcher could not take at all (no live worker, the queue unreachable or
    full): 503 or 429 with `Retry-After`, and the reason."""
    if not isinstance(exc, DispatchRefused):
        raise exc
    headers = {"Retry-After": str(exc.retry_after_s)}
    return JSONResponse(
        error_body(exc.status_code, str(exc)), status_code=exc.status_code, headers=headers
    )


async def _internal_error(request: Request, exc: Exception) -> Response:
    """A bug of ours: the same shape as every error (Starlette logs the exception)."""
    return JSONResponse(error_body(500, "internal server error"), status_code=500)


def build_state(settings: Settings, dispatcher: Dispatcher | None = None) -> AppState:
    """Registry, specs and dispatcher for `settings` (the backend the settings pick, unless one
    is given); spec errors surface here, at start-up."""
    registry = load_registry(settings.registry)
    loaded = LoadedSpecs(registry, settings.spec_dirs)
    specs = loaded.under({})
    if settings.default_spec not in specs:
        raise SpecError(f"default spec {settings.default_spec!r} is not among {sorted(specs)}")
    # Before the dispatcher: a worker pool's fork-server preload, set when it is made, wins.
    sampler = Sampler(settings.sample_processes, settings.item_timeout_s, settings.worker_memory_mb)
    finished = FinishedLimits(
        settings.job_ttl_s, settings.max_finished_jobs, settings.max_finished_job_bytes
    )
    dispatcher, jobs = _backend(
        settings, registry, finished, lambda raw: score.job_runner_from(state, raw), dispatcher
    )
    runs = RunPool(settings)
    state = AppState(
        settings=settings,
        registry=registry,
        loaded=loaded,
        dispatcher=dispatcher,
        metrics=Metrics(
            dispatcher.stats,
            domains=[s.domain for s in registry],
            sampling=sampler.load,
            runs=runs.stats,
        ),
        sampler=sampler,
        jobs=jobs,
        runs=runs,
        limits=make_limits(settings),
    )
    return state


def _backend(
    settings: Settings,
    registry: Registry,
    finished: FinishedLimits,
    runner_for: Callable[[bytes], Runner],
    dispatcher: Dispatcher | None,
) -> tuple[Dispatcher, Jobs]:
    """The (dispatcher, job store) pair `settings` pick: with a `queue_url`, queue mode's
    (`service.queue`); without, the embedded default (worker processes and a sandbox pool in
    this process, jobs in its memory). A `dispatcher` given stands in for the one picked."""
    if settings.queue_url is not None:
        return make_queue_mode(settings, registry, runner_for, finished, dispatcher)
    jobs = JobStore(settings.max_jobs, finished, settings.max_running_job_bytes)
    return dispatcher or local.LocalDispatcher(settings, registry), jobs


READY_POLL_S = 0.1


async def _announce_ready(state: AppState) -> None:
    """Log one line once every component of /readyz is ready (uvicorn's "startup complete"
    comes while the workers still warm up)."""
    while not all(state.dispatcher.readiness().values()):
        await asyncio.sleep(READY_POLL_S)
    settings = state.settings
    if settings.queue_url is not None:
        log.info("ready: queue mode, workers live on the queue")
    else:
        workers = f"{settings.workers} worker" + ("s" if settings.workers != 1 else "")
        log.info("ready: %s, sandbox %s", workers, settings.sandbox.backend)


def create_app(
    settings: Settings | None = None,
    dispatcher: Dispatcher | None = None,
    *,
    owns_process: bool = False,
) -> FastAPI:
    """The app for `settings`; `dispatcher` replaces the backend the settings would pick (the
    seam a test, or an embedding program, uses). `owns_process` (`proctor serve`): once started,
    tune the process's collector and allocator for it (`service.runtime`); an app embedded in
    another program, or a test's, leaves the process as it found it."""
    settings = settings or Settings()
    state = build_state(settings, dispatcher)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await state.dispatcher.start()
        state.jobs.resume()
        if owns_process:
            settle_heap()
        announcer = asyncio.create_task(_announce_ready(state), name="proctor-ready")
        try:
            yield
        finally:
            announcer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await announcer
            await state.jobs.close()
            await state.limits.close()
            await state.dispatcher.stop()
            state.sampler.close()
            await asyncio.to_thread(state.runs.close)

    app = FastAPI(
        title="Proctor",
        version="1",
        summary="Verifier and reward service for RL on reasoning language models.",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        dependencies=[Depends(ApiKeyAuth(settings))],
    )
    app.state.proctor = state
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(DispatchRefused, _refused)
    app.add_exception_handler(ClientDisconnect, client_gone)
    app.add_exception_handler(Exception, _internal_error)
    app.include_router(score.router)
    app.include_router(health.router)
    app.include_router(puzzles.router)
    app.include_router(openrlhf.router)
    app.include_router(run.router)
    app.include_router(nemo_gym.router)
    app.include_router(sandbox_fusion_routes.router)
    mount_docs(app)
    app.add_middleware(BodyBudget, budget=settings.max_inflight_request_bytes)
    app.add_middleware(BodyLimit, limit=settings.max_request_bytes)
    app.add_middleware(keys.PathKeys, known=load_keys(settings))  # before any log reads it
    app.add_middleware(StatusCounter, metrics=state.metrics, plain_paths=plain_paths(app.routes))
    app.add_middleware(RequestIdMiddleware)  # outermost: every line of a request names it
    app.openapi = _openapi_with_server_facts(app, state)  # type: ignore[method-assign]
    return app


def _publish_run_bounds(components: dict[str, Any], settings: Settings) -> None:
    """A run's `limits` may ask for at most this server's bounds, and `files` holds at most
    `run.max_files` entries: said in the schema, where a client (or a fuzzer) reads them."""
    run = settings.run
    bounds = {"cpu_s": run.cpu_s, "wall_s": run.wall_s, "memory_mb": run.memory_mb}
    bounds["output_bytes"] = run.output_bytes
    limits = components.get("RunLimitsBody", {}).get("properties", {})
    for name, bound in bounds.items():
        for option in limits.get(name, {}).get("anyOf", []):
            if option.get("type") in ("number", "integer"):
                option["maximum"] = bound
    files = components.get("RunBody", {}).get("properties", {}).get("files", {})
    for option in files.get("anyOf", []):
        if option.get("type") == "object":
            option["maxProperties"] = run.max_files


def _openapi_with_server_facts(app: FastAPI, state: AppState) -> Callable[[], dict[str, Any]]:
    """The generated schema, plus the score request's and what only this server knows: its spec
    names, its item limit and the bounds of `POST /v1/run`."""

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
            # An item's unknown field makes that item `invalid`, not the request a 422.
            components["ScoreItem"].pop("additionalProperties", None)
            components["ScoreRequest"]["examples"] = [
                {"items": [{"id": f"{domain}-example", **item}]}
                for domain, item in EXAMPLE_ITEMS.items()
            ]
            request = components["ScoreRequest"]["properties"]
            for option in request["spec"]["anyOf"]:
                if option.get("type") == "string":
                    option["enum"] = sorted(state.specs)
            request["items"]["maxItems"] = state.settings.max_items_per_request
            _publish_run_bounds(components, state.settings)
            declare_security(schema, state.settings)
            app.openapi_schema = schema
        return app.openapi_schema

    return openapi
