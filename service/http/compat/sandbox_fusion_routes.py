"""The SandboxFusion-compatible routes, at `/compat/sandbox-fusion/` and, for a server with
keys, `/compat/sandbox-fusion/k/{KEY}/` (the key checked and redacted by
`service.http.compat.path_keys`): `run_code`, `run_jupyter`, `submit` and `v1/ping`, on
`/v1/run`'s pool, bounds and fairness (docs/api.md, "SandboxFusion compatibility").

A request waits for a sandbox of the run pool up to `compat.queue_wait_s`; past that, on its
key's request limit, and on any failure of ours, the answer is a 504 with a SandboxFusion body
and `Retry-After`, since verl retries a 504 and scores anything else -1.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import APIRouter, HTTPException
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from service.http.compat.path_keys import prefixes
from service.http.compat.sandbox_fusion import (
    Plan,
    Refused,
    RunCodeRequest,
    RunCodeResponse,
    RunJupyterRequest,
    RunJupyterResponse,
    plan_jupyter,
    plan_run_code,
    read_jupyter,
    read_run_code,
)
from service.http.compat.sandbox_fusion_submit import (
    EvalResult,
    SubmitRefusal,
    SubmitRequest,
    eval_result,
    plan_submit,
)
from service.http.deps import StateDep, spec_named
from service.http.routes.score import score_body
from service.schemas import ScoreItem
from service.state import AppState
from service.work.ingest import ScoreBody
from service.work.runs import RunOutcome

__all__ = ["CLAMPED_HEADER", "PREFIX", "RETRY_AFTER_S", "ROUTES", "router"]

log = logging.getLogger(__name__)

PREFIX = "/compat/sandbox-fusion"
CLAMPED_HEADER = "X-Proctor-Clamped"
RETRY_AFTER_S = 1
"""What a 504 tells the client to wait (verl waits 1 s, then 2 s, whatever it is told)."""

router = APIRouter(tags=["compat: SandboxFusion"])


def _json(
    model: BaseModel, status: int = 200, headers: dict[str, str] | None = None
) -> JSONResponse:
    return JSONResponse(model.model_dump(mode="json"), status_code=status, headers=headers)


def _limit_message(exc: HTTPException) -> str:
    detail: dict[str, Any] = exc.detail if isinstance(exc.detail, dict) else {}
    return str(detail.get("message", "this API key has too many requests in flight"))


def _unavailable(
    message: str, model: type[RunCodeResponse | RunJupyterResponse | SubmitRefusal]
) -> JSONResponse:
    """A failure of ours, or no sandbox in time: 504, which verl and the SDK retry."""
    body = model.model_validate({"status": "SandboxError", "message": message})
    return _json(body, 504, {"Retry-After": str(RETRY_AFTER_S)})


async def _served(
    state: AppState,
    plan: Callable[[], Plan],
    execute: Callable[[Plan], Awaitable[BaseModel | RunOutcome]],
    model: type[RunCodeResponse] | type[RunJupyterResponse],
) -> JSONResponse:
    """Plan, take the key's request slot, run; the SandboxFusion answer of each outcome."""
    pod = state.settings.compat.executor_pod_name
    try:
        planned = plan()
    except Refused as exc:
        return _json(model(status="SandboxError", message=str(exc), executor_pod_name=pod))
    try:
        lease = await state.limits.lease(requests=1)
    except HTTPException as exc:  # the key's request limit: a 429 elsewhere, retried here
        return _unavailable(_limit_message(exc), model)
    try:
        answer = await execute(planned)
    finally:
        await lease.release()
    if isinstance(answer, RunOutcome):
        return _unavailable(f"{answer.error_code}: {answer.error_message}", model)
    answer = answer.model_copy(
        update={"executor_pod_name": state.settings.compat.executor_pod_name}
    )
    headers = {CLAMPED_HEADER: ", ".join(planned.clamps)} if planned.clamps else None
    return _json(answer, headers=headers)


async def run_code(body: RunCodeRequest, state: StateDep) -> JSONResponse:
    settings = state.settings

    async def execute(plan: Plan) -> RunCodeResponse | RunOutcome:
        read = read_run_code(plan, body.language)
        return await state.runs.execute(plan.request, read, settings.compat.queue_wait_s)

    return await _served(state, lambda: plan_run_code(body, settings), execute, RunCodeResponse)


async def run_jupyter(body: RunJupyterRequest, state: StateDep) -> JSONResponse:
    settings = state.settings

    async def execute(plan: Plan) -> RunJupyterResponse | RunOutcome:
        read = read_jupyter(plan)
        return await state.runs.execute(plan.request, read, settings.compat.queue_wait_s)

    return await _served(state, lambda: plan_jupyter(body, settings), execute, RunJupyterResponse)


async def submit(body: SubmitRequest, state: StateDep) -> JSONResponse:
    """One completion judged by `/v1/score`'s path: the server's default spec, its pools, its
    verdict cache and the key's item limit."""
    try:
        submission = plan_submit(body)
    except Refused as exc:
        return _json(SubmitRefusal(message=str(exc)))
    spec = spec_named(state, None, ["body", "config"])
    try:
        lease = await state.limits.lease(requests=1, items=1)
    except HTTPException as exc:  # the key's limits: a 429 elsewhere, retried here
        return _unavailable(_limit_message(exc), SubmitRefusal)
    try:
        item = ScoreItem(domain="code", response=body.completion, reference=submission.reference)
        scored = await score_body(state, spec, ScoreBody(items=[item]), "compat_submit")
    finally:
        await lease.release()
    (result,) = scored.results
    message = result.error.message if result.error is not None else result.status
    if result.status == "infra_error":
        return _unavailable(f"not judged: {message}", SubmitRefusal)
    if result.status != "ok":
        return _json(SubmitRefusal(message=f"invalid: {message}"))
    named = {"name": scored.spec.name, "version": scored.spec.version, "hash": scored.spec.hash}
    return _json(eval_result(body, submission, result, named))


async def ping() -> str:
    return "pong"


_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {"description": "A wrong key in the path, or none where the server has keys."},
    504: {
        "description": "No sandbox within `compat.queue_wait_s`, the key's request limit, or "
        "a failure of ours: a SandboxFusion body (`status: SandboxError`) and `Retry-After`."
    },
}

_ROUTES: list[tuple[str, str, Callable[..., Any], Any, dict[int | str, dict[str, Any]], str]] = [
    ("POST", "/run_code", run_code, RunCodeResponse, _RESPONSES,
     "SandboxFusion's run_code: one program with its request and answer; bounds clamped to "
     f"`/v1/run`'s, named in `{CLAMPED_HEADER}`."),
    ("POST", "/run_jupyter", run_jupyter, RunJupyterResponse, _RESPONSES,
     "SandboxFusion's run_jupyter: cells in order in one fresh interpreter; nothing kept "
     "between requests."),
    ("POST", "/submit", submit, EvalResult | SubmitRefusal,
     {**_RESPONSES, 200: {"description": "An `EvalResult`, or a `SandboxError`."}},
     "SandboxFusion's submit: a completion judged against `config.provided_data.test` stdio "
     "tests by the server's default spec; its registered datasets are not offered."),
    ("GET", "/v1/ping", ping, str, {401: _RESPONSES[401]}, "SandboxFusion's ping: `pong`."),
]  # fmt: skip
"""(method, path, endpoint, response model, responses, description) of each route, served at
`PREFIX` and at its keyed form, `PREFIX/k/REDACTED` (`service.http.compat.path_keys`)."""

ROUTES = tuple(path for _, path, *_ in _ROUTES)

for prefix in prefixes(PREFIX):
    for method, path, endpoint, model, responses, description in _ROUTES:
        router.add_api_route(
            prefix + path,
            endpoint,
            methods=[method],
            response_model=model,
            responses=responses,
            summary=description.partition(":")[0],
            description=description,
        )
