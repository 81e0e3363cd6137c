"""Liveness, readiness, limits, specs and metrics."""

from __future__ import annotations

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from reward_specs.judge.domain import wanted_endpoints
from service.http.deps import StateDep
from service.schemas import InFlight, LimitsInfo, RunLimitsInfo, SpecInfo, SpecsResponse

router = APIRouter()


@router.get("/healthz", tags=["health"], summary="The process is up")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get(
    "/readyz",
    tags=["health"],
    summary="Workers and sandboxes are ready",
    responses={503: {"description": "A component is not ready; the body says which."}},
)
async def readyz(state: StateDep) -> JSONResponse:
    components = {**state.dispatcher.readiness(), "run_pool": state.runs.ready()}
    ready = all(components.values())
    body: dict[str, object] = {
        "status": "ready" if ready else "not_ready",
        "components": components,
    }
    # named, not counted: a judge spec whose endpoint is not configured here still loads
    unconfigured = sorted(wanted_endpoints(state.specs) - set(state.settings.judge_endpoints))
    if unconfigured:
        body["judge_endpoints_unconfigured"] = unconfigured
    return JSONResponse(body, status_code=200 if ready else 503)


@router.get("/v1/specs", response_model=SpecsResponse, tags=["specs"], summary="Known reward specs")
async def specs(state: StateDep) -> SpecsResponse:
    default = state.settings.default_spec
    specs = state.specs
    return SpecsResponse(
        default=default,
        environments=dict(next(iter(specs.values())).environments) if specs else {},
        specs=[
            SpecInfo(
                **spec.summary(),
                description=spec.description,
                default=name == default,
                parameters=spec.parameters(),
                domain_hashes=dict(spec.domain_hashes),
            )
            for name, spec in sorted(specs.items())
        ],
    )


@router.get("/v1/limits", response_model=LimitsInfo, tags=["specs"], summary="Request limits")
async def limits(state: StateDep) -> LimitsInfo:
    settings = state.settings
    return LimitsInfo.model_validate(
        {
            **settings.model_dump(include=set(LimitsInfo.model_fields)),  # the same names
            "in_flight": InFlight(**vars(await state.limits.usage())),
            "run": RunLimitsInfo(**settings.run.model_dump(exclude={"pool_size", "max_processes"})),
        }
    )


@router.get("/metrics", tags=["health"], summary="Prometheus metrics", response_class=Response)
async def metrics(state: StateDep) -> Response:
    return Response(generate_latest(state.metrics.registry), media_type=CONTENT_TYPE_LATEST)
