"""POST /v1/score and the jobs API built on the same scoring path."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from fastapi import APIRouter, HTTPException, Request, Response

from reward_specs import Spec
from service.deps import StateDep, resolve_spec
from service.fastjson import json_response
from service.ingest import RequestItem, read_score_request
from service.jobs import Job, TooManyJobs
from service.schemas import (
    JobAccepted,
    JobStatus,
    ScoreResponse,
    ScoreResult,
    SpecSummary,
)
from service.scoring import score_batch
from service.state import AppState

router = APIRouter(tags=["scoring"])

_JOB_SLICE = 1024
"""Items scored at a time in a job, so its progress moves."""


async def _score(
    state: AppState,
    spec: Spec,
    items: Sequence[RequestItem],
    references: list[dict[str, Any]] | None,
    endpoint: str,
) -> ScoreResponse:
    started = time.perf_counter()
    response = await score_batch(
        state.dispatcher,
        spec,
        items,
        max_response_bytes=state.settings.max_response_bytes,
        deadline_s=state.settings.request_deadline_s,
        references=references,
        registry=state.registry,
    )
    state.metrics.requests.labels(endpoint=endpoint).observe(time.perf_counter() - started)
    state.metrics.observe([i.domain for i in items], response.results)
    return response


_SCORE_REQUEST_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ScoreRequest"}}},
    }
}
"""The body's schema for the OpenAPI document: the routes read the body themselves
(`service.ingest`), so FastAPI does not see it; `service.main` adds `ScoreRequest` to the
components."""

_REFUSALS: dict[int | str, dict[str, Any]] = {
    413: {"description": "The request body exceeds `max_request_bytes` (see /v1/limits)."},
    422: {"description": "A malformed request: `detail[].loc` names the offending field."},
}


@router.post(
    "/v1/score",
    response_model=ScoreResponse,
    responses=_REFUSALS,
    summary="Score a batch of responses",
    description="One result per item, in the order of `items`. A malformed request is a 422 "
    "naming the field; an unusable item is an `invalid` result and the rest is scored.",
    openapi_extra=_SCORE_REQUEST_BODY,
)
async def score(request: Request, state: StateDep) -> Response:
    body = await read_score_request(request)
    spec = resolve_spec(state, body)
    return json_response(await _score(state, spec, body.items, body.references, "score"))


@router.post(
    "/v1/jobs",
    response_model=JobAccepted,
    status_code=202,
    summary="Start a scoring job",
    responses={**_REFUSALS, 429: {"description": "Too many jobs are kept; retry later."}},
    openapi_extra=_SCORE_REQUEST_BODY,
)
async def create_job(request: Request, state: StateDep) -> JobAccepted:
    body = await read_score_request(request)
    spec = resolve_spec(state, body)

    async def run(job: Job) -> ScoreResponse:
        results: list[ScoreResult] = []
        for start in range(0, len(body.items), _JOB_SLICE):
            part = await _score(
                state, spec, body.items[start : start + _JOB_SLICE], body.references, "job"
            )
            results.extend(part.results)
            job.completed += len(part.results)
        return ScoreResponse(spec=SpecSummary(**spec.summary()), results=results)

    try:
        job = state.jobs.start(len(body.items), run)
    except TooManyJobs as exc:
        raise HTTPException(status_code=429, detail=str(exc)) from exc
    return JobAccepted(job_id=job.id)


@router.get(
    "/v1/jobs/{job_id}",
    response_model=JobStatus,
    summary="A job's progress and results",
    responses={404: {"description": "No such job, or it expired."}},
)
async def get_job(job_id: str, state: StateDep) -> Response:
    job = state.jobs.get(job_id)
    if job is None:
        raise HTTPException(status_code=404, detail=f"no job {job_id!r} (unknown or expired)")
    return json_response(job.view())
