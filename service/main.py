"""The app factory: builds a Proctor app from settings. No import-time singletons.

Start reading here: the app is its state (`build_state`, `service.state`: registry, specs,
dispatcher, jobs, limits; `proctor score` builds the state without the app), its routers
(`service.http.routes`), its error handlers and its middlewares (`service.http`)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from fastapi import Depends, FastAPI

from service.core.runtime import settle_heap
from service.dispatch import Dispatcher
from service.http.auth import ApiKeyAuth, load_keys
from service.http.compat import nemo_gym, path_keys, sandbox_fusion_routes
from service.http.handlers import add_error_handlers
from service.http.metrics import StatusCounter, plain_paths
from service.http.openapi import server_openapi
from service.http.request_ids import RequestIdMiddleware
from service.http.request_limits import BodyBudget, BodyLimit
from service.http.routes import docs, health, openrlhf, puzzles, run, score
from service.settings import Settings
from service.state import AppState, build_state

__all__ = ["build_state", "create_app"]

log = logging.getLogger(__name__)


def create_app(
    settings: Settings | None = None,
    dispatcher: Dispatcher | None = None,
    *,
    owns_process: bool = False,
) -> FastAPI:
    """The app for `settings`; `dispatcher` replaces the backend the settings would pick (the
    seam a test, or an embedding program, uses). `owns_process` (`proctor serve`): once started,
    tune the process's collector and allocator for it (`service.core.runtime`); an app embedded
    in another program, or a test's, leaves the process as it found it."""
    settings = settings or Settings()
    state = build_state(settings, dispatcher, score.job_runner_from)
    app = FastAPI(
        title="Proctor",
        version="1",
        summary="Verifier and reward service for RL on reasoning language models.",
        lifespan=_lifespan(state, owns_process),
        docs_url=None,
        redoc_url=None,
        dependencies=[Depends(ApiKeyAuth(settings))],
    )
    app.state.proctor = state
    add_error_handlers(app)
    for router in (score, health, puzzles, openrlhf, run, nemo_gym, sandbox_fusion_routes):
        app.include_router(router.router)
    docs.mount_docs(app)
    app.add_middleware(BodyBudget, budget=settings.max_inflight_request_bytes)
    app.add_middleware(BodyLimit, limit=settings.max_request_bytes)
    app.add_middleware(path_keys.PathKeys, known=load_keys(settings))  # before any log reads it
    app.add_middleware(StatusCounter, metrics=state.metrics, plain_paths=plain_paths(app.routes))
    app.add_middleware(RequestIdMiddleware)  # outermost: every line of a request names it
    app.openapi = server_openapi(app, state)  # type: ignore[method-assign]
    return app


def _lifespan(
    state: AppState, owns_process: bool
) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """Start the dispatcher and resume jobs; on the way out, stop everything the state holds."""

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
            await asyncio.to_thread(state.runs.close)  # before the dispatcher: its Redis client
            await state.dispatcher.stop()
            state.sampler.close()

    return lifespan


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
