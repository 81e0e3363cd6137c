"""POST /v1/score and the jobs API built on the same scoring path."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, HTTPException, Request, Response

from reward_specs import Spec
from service.core.fastjson import json_response
from service.http.deps import StateDep, resolve_spec
from service.http.key_limits import KeyLease, Lease
from service.schemas import (
    JobAccepted,
    JobStatus,
    ScoreResponse,
    ScoreResult,
    SpecSummary,
)
from service.state import AppState
from service.work.ingest import ScoreBody, decode_score_request, read_score_request
from service.work.jobs import Job, JobHandle, JobTooLarge, Runner, TooManyJobs
from service.work.scoring import score_batch

router = APIRouter(tags=["scoring"])

_JOB_SLICE = 1024
"""Items a job scores under one request deadline (its progress moves per item regardless)."""


async def score_body(
    state: AppState,
    spec: Spec,
    body: ScoreBody,
    endpoint: str,
    on_progress: Callable[[int], None] | None = None,
) -> ScoreResponse:
    """Score `body`, counted in the metrics as a request of `endpoint`."""
    started = time.perf_counter()
    response = await score_batch(state.scoring, spec, body, on_progress)
    state.metrics.requests.labels(endpoint=endpoint).observe(time.perf_counter() - started)
    domains = [i.domain for i in body.items]
    state.metrics.observe(domains, response.results)
    state.metrics.observe_judge(spec, domains, response.results)
    return response


_SCORE_REQUEST_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ScoreRequest"}}},
    }
}
"""The body's schema for the OpenAPI document: the routes read the body themselves
(`service.work.ingest`), so FastAPI does not see it; `service.http.openapi` adds `ScoreRequest`
to the components."""

_REFUSALS: dict[int | str, dict[str, Any]] = {
    413: {"description": "The request body exceeds `max_request_bytes` (see /v1/limits)."},
    422: {"description": "A malformed request: `detail[].loc` names the offending field."},
    429: {
        "description": "The API key has `max_inflight_requests_per_key` requests or "
        "`max_inflight_items_per_key` items in flight, the service holds "
        "`max_inflight_request_bytes` of request bodies, or (queue mode) `max_queue_depth` items "
        "wait already; retry after `Retry-After` seconds. Nothing was scored."
    },
    503: {
        "description": "Queue mode: no live worker for a domain of the batch, or the queue "
        "unreachable; retry after `Retry-After` seconds. Nothing was scored."
    },
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
async def score(request: Request, state: StateDep, lease: KeyLease) -> Response:
    body = await read_score_request(request)
    spec = resolve_spec(state, body)
    await lease.take_items(len(body.items))
    return json_response(await score_body(state, spec, body, "score"))


def job_runner(state: AppState, body: ScoreBody, spec: Spec, lease: Lease | None = None) -> Runner:
    """What a job of `body` runs: its items scored in parts, each under one request deadline.
    `lease` holds the job's items against its key's limit until it ends (a job taken over from
    another replica has none: its own lapsed with that replica)."""

    async def run(job: Job) -> ScoreResponse:
        try:
            results: list[ScoreResult] = []
            for start in range(0, len(body.items), _JOB_SLICE):
                part = body.part(start, start + _JOB_SLICE)
                scored = await score_body(state, spec, part, "job", job.advance)
                results.extend(scored.results)
            return ScoreResponse(spec=SpecSummary(**spec.summary()), results=results)
        finally:
            if lease is not None:
                await lease.release()

    return run


def job_runner_from(state: AppState, raw: bytes) -> Runner:
    """The runner of a job from its request body alone (a replica taking over a job)."""
    body = decode_score_request(raw)
    return job_runner(state, body, resolve_spec(state, body))


@router.post(
    "/v1/jobs",
    response_model=JobAccepted,
    status_code=202,
    summary="Start a scoring job",
    responses={
        **_REFUSALS,
        413: {
            "description": "The body exceeds `max_request_bytes`, or a job's request exceeds "
            "`max_running_job_bytes`: split it."
        },
        429: {
            "description": "`max_jobs` jobs are running, or their requests hold "
            "`max_running_job_bytes`, or a per-key or byte limit is reached (as for "
            "/v1/score); retry after `Retry-After` seconds."
        },
    },
    openapi_extra=_SCORE_REQUEST_BODY,
)
async def create_job(request: Request, state: StateDep, _: KeyLease) -> JobAccepted:
    raw = await request.body()
    body = decode_score_request(raw)
    spec = resolve_spec(state, body)
    items = await state.limits.lease(items=len(body.items))  # held while the job runs
    try:
        job = await state.jobs.start(len(body.items), job_runner(state, body, spec, items), raw)
    except BaseException as exc:
        await items.release()
        if isinstance(exc, JobTooLarge):
            raise HTTPException(status_code=413, detail=str(exc)) from exc
        if isinstance(exc, TooManyJobs):
            headers = {"Retry-After": str(exc.retry_after_s)}
            raise HTTPException(status_code=429, detail=str(exc), headers=headers) from exc
        raise
    return JobAccepted(job_id=job.id)


@router.get(
    "/v1/jobs/{job_id}",
    response_model=JobStatus,
    summary="A job's progress and results",
    responses={404: {"description": "No such job, or it expired."}},
)
async def get_job(job_id: str, state: StateDep) -> Response:
    return _job_response(job_id, await state.jobs.get(job_id))


@router.delete(
    "/v1/jobs/{job_id}",
    response_model=JobStatus,
    summary="Cancel a running job, or forget a finished one",
    description="A running job stops and is kept as `cancelled` for the job TTL; a finished "
    "one is forgotten (GET then answers 404). The body is the job as it now stands.",
    responses={404: {"description": "No such job, or it expired."}},
)
async def delete_job(job_id: str, state: StateDep) -> Response:
    return _job_response(job_id, await state.jobs.delete(job_id))


def _job_response(job_id: str, job: JobHandle | None) -> Response:
    """The job as it stands, or a 404 when the store has no such job."""
    if job is None:
        raise HTTPException(status_code=404, detail=f"no job {job_id!r} (unknown or expired)")
    return Response(job.view_json(), media_type="application/json")
