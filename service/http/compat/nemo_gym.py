"""A NeMo-Gym resource server (`/compat/nemo-gym/`) on /v1/score's scoring path.

NeMo-Gym's agents and Prime Intellect's verifiers (its NeMo-Gym taskset) reach a verifier as a
*resource server* (`nemo_gym/base_resources_server.py`, `SimpleResourcesServer`):
`POST seed_session` with the dataset row, `POST verify` with the row plus `response` (an OpenAI
Responses object), answered with the request echoed back plus `reward`, `POST aggregate_metrics`
with `{verify_responses}`, and `GET reverify_mode`. Rows carry the item's `domain` and
`reference`, and optionally `spec`, as top-level fields beside NeMo-Gym's own.

What is judged is the text of the `output_text` parts of the last `message` item of the response
(reasoning items never; a refusal is an empty answer). `status: "incomplete"` for
`max_output_tokens` is `finish_reason: length`, `usage.output_tokens` the response's length and
`responses_create_params.max_output_tokens` its limit, so a spec's termination and overlong
penalties apply. An item Proctor could not judge is a 503 with `Retry-After` and an unusable one
a 422 with the item's error: never a 200 with a reward it did not judge. The routes exist at
`/compat/nemo-gym/` and, with the key in the path, `/compat/nemo-gym/k/{KEY}/`
(`service.http.compat.path_keys`).
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal

from fastapi import APIRouter, Body, HTTPException
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field

from service.http.compat.path_keys import prefixes
from service.http.deps import StateDep, field_error, spec_named
from service.http.key_limits import KeyLease
from service.http.routes.score import score_body
from service.schemas import FinishReason, ScoreItem, ScoreResult
from service.work.ingest import ScoreBody

__all__ = ["PREFIX", "ROUTES", "answer_text", "finish_reason", "router", "summarize"]

PREFIX = "/compat/nemo-gym"

RETRY_AFTER_S = 1
"""What a client told an item was not judged waits before it retries."""

TASK_INDEX = "_ng_task_index"
"""NeMo-Gym's key of a verify response's task (`nemo_gym/global_config.py`)."""
ROLLOUT_INDEX = "_ng_rollout_index"


class _Open(BaseModel):
    """A NeMo-Gym object: the fields Proctor reads are checked, the rest kept as sent."""

    model_config = ConfigDict(extra="allow", strict=True)


class ResponseUsage(_Open):
    output_tokens: int | None = Field(None, ge=0)


class IncompleteDetails(_Open):
    reason: str | None = None


class ResponsesObject(_Open):
    """The OpenAI Responses object the policy produced (NeMo-Gym's `NeMoGymResponse`)."""

    output: list[dict[str, Any]] = Field(
        ..., description="Output items; the last `message` item's `output_text` is judged."
    )
    status: str | None = Field(
        None, description="`incomplete` with reason `max_output_tokens` is a response cut short."
    )
    incomplete_details: IncompleteDetails | None = None
    usage: ResponseUsage | None = None


class ResponsesCreateParams(_Open):
    max_output_tokens: int | None = Field(
        None, gt=0, description="The response's token limit, for overlong penalties."
    )


class VerifyRequest(_Open):
    """A NeMo-Gym verify request: the dataset row, with Proctor's item fields, plus `response`."""

    responses_create_params: ResponsesCreateParams
    response: ResponsesObject
    domain: str = Field(..., min_length=1, max_length=64, description="The item's domain.")
    reference: dict[str, Any] = Field(..., description="The domain's gold data (docs/api.md).")
    spec: str | None = Field(None, description="A reward spec; the server's default if absent.")


class AggregateRequest(BaseModel):
    model_config = ConfigDict(strict=True)

    verify_responses: list[dict[str, Any]]


class AggregateMetrics(BaseModel):
    """NeMo-Gym's `AggregateMetrics` (flat keys, for W&B or MLflow)."""

    group_level_metrics: list[dict[str, Any]]
    agent_metrics: dict[str, Any]
    key_metrics: dict[str, Any]


def answer_text(output: list[dict[str, Any]]) -> str:
    """The judged answer: the `output_text` parts of the last `message` item, joined."""
    last = max((i for i, item in enumerate(output) if item.get("type") == "message"), default=None)
    if last is None:
        return ""
    content = output[last].get("content")
    loc: list[str | int] = ["body", "response", "output", last, "content"]
    if isinstance(content, str):  # an input-style message: its content is the text
        return content
    if not isinstance(content, list):
        field_error(loc, "a message's content is a list of parts", "invalid_output")
    parts = []
    for index, part in enumerate(content):
        if isinstance(part, dict) and part.get("type") == "output_text":
            text = part.get("text")
            if not isinstance(text, str):
                field_error(
                    [*loc, index, "text"], "an output_text's text is a string", "invalid_output"
                )
            parts.append(text)
    return "".join(parts)


def finish_reason(response: ResponsesObject) -> FinishReason | None:
    """`length` for a response cut at `max_output_tokens`, `stop` for a completed one, None
    when the response does not say (no termination penalty either way)."""
    if response.status == "completed":
        return "stop"
    reason = response.incomplete_details.reason if response.incomplete_details else None
    if response.status == "incomplete" and reason == "max_output_tokens":
        return "length"
    return None


def _metrics(result: ScoreResult) -> dict[str, float | bool]:
    """The result's numeric fields, top-level beside `reward`, as NeMo-Gym's metrics are."""
    metrics: dict[str, float | bool] = {
        "score": _judged(result.score),
        "success": bool(result.success),
        "parsed": bool(result.parsed),
        "penalty": sum(result.penalties.values()),
    }
    metrics.update({f"penalty_{name}": value for name, value in result.penalties.items()})
    return metrics


def _judged(value: float | None) -> float:
    if value is None:
        raise RuntimeError("an ok result without a reward or score breaks the contract")
    return value


def _refuse_unjudged(result: ScoreResult) -> None:
    reason = result.error.message if result.error else result.status
    if result.status == "infra_error":
        raise HTTPException(
            status_code=503,
            detail={"code": "not_judged", "message": f"the item was not judged: {reason}"},
            headers={"Retry-After": str(RETRY_AFTER_S)},
        )
    if result.status == "invalid":
        code = result.error.code if result.error else "invalid_item"
        field_error(["body"], reason, code)


def _encoded(answer: Mapping[str, Any]) -> str:
    """`answer` as JSON text, or the 422 of a request JSON cannot give back: NaN and Infinity
    (Python's reader admits them) or a row nested too deeply to write."""
    try:
        return json.dumps(answer, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except ValueError:
        field_error(["body"], "the request holds NaN or Infinity, which JSON cannot carry", "json")
    except RecursionError:
        field_error(["body"], "the request is nested too deeply to echo", "json_too_deep")


def _echo(body: VerifyRequest) -> dict[str, Any]:
    """The request as sent, checked before scoring that it can be echoed back."""
    try:
        echoed = body.model_dump(exclude_unset=True)
    except RecursionError:
        field_error(["body"], "the request is nested too deeply to echo", "json_too_deep")
    _encoded(echoed)
    return echoed


async def seed_session(body: dict[str, Any] = Body(...)) -> dict[str, Any]:  # noqa: B008
    """Nothing is kept between calls: a row's session is empty."""
    return {}


async def reverify_mode() -> Literal["stateless"]:
    """Verifying a response again gives the same verdict: nothing depends on a session."""
    return "stateless"


async def verify(body: VerifyRequest, state: StateDep, lease: KeyLease) -> Response:
    spec = spec_named(state, body.spec, ["body", "spec"])
    echoed = _echo(body)
    item = ScoreItem(
        domain=body.domain,
        response=answer_text(body.response.output),
        reference=body.reference,
        finish_reason=finish_reason(body.response),
        response_tokens=body.response.usage.output_tokens if body.response.usage else None,
        max_response_tokens=body.responses_create_params.max_output_tokens,
    )
    await lease.take_items(1)
    # Strict JSON is not promised: FastAPI's reader admits NaN, which the bounds then refuse.
    scored = await score_body(state, spec, ScoreBody(items=[item], strict=False), "nemo_gym")
    result = scored.results[0]
    _refuse_unjudged(result)
    proctor = {
        "status": result.status,
        "spec": scored.spec.model_dump(),
        "penalties": result.penalties,
        "details": result.details,
    }
    answer = echoed | {"reward": _judged(result.reward), **_metrics(result), "proctor": proctor}
    return Response(_encoded(answer), media_type="application/json")


def _numbers(response: Mapping[str, Any]) -> dict[str, float]:
    """A verify response's numeric top-level fields (bools as 0/1), as NeMo-Gym profiles them."""
    return {
        key: float(value)
        for key, value in response.items()
        if isinstance(value, bool | int | float) and key not in (TASK_INDEX, ROLLOUT_INDEX)
    }


def _means(rows: Iterable[Mapping[str, float]]) -> dict[str, float]:
    totals: dict[str, float] = defaultdict(float)
    counts: Counter[str] = Counter()
    for row in rows:
        for key, value in row.items():
            totals[key] += value
            counts[key] += 1
    return {f"mean/{key}": totals[key] / counts[key] for key in sorted(totals)}


def summarize(verify_responses: list[dict[str, Any]]) -> AggregateMetrics:
    """Mean reward, count, counts by status and the mean of each numeric metric, over all
    responses and per task (`_ng_task_index`)."""
    numbers = []
    for index, response in enumerate(verify_responses):
        row = _numbers(response)
        if "reward" not in row:
            field_error(
                ["body", "verify_responses", index, "reward"],
                "a verify response has a numeric reward",
                "missing_reward",
            )
        numbers.append(row)
    statuses = Counter(_status(r) for r in verify_responses)
    agent = {"count": len(numbers), **_means(numbers)}
    agent.update({f"count/status/{s}": n for s, n in sorted(statuses.items())})
    tasks: dict[int, list[dict[str, float]]] = defaultdict(list)
    for response, row in zip(verify_responses, numbers, strict=True):
        tasks[_task(response)].append(row)
    groups = [
        {TASK_INDEX: task, "count": len(rows), **_means(rows)}
        for task, rows in sorted(tasks.items())
    ]
    key = {k: v for k, v in agent.items() if k.startswith("mean/")}
    return AggregateMetrics(group_level_metrics=groups, agent_metrics=agent, key_metrics=key)


def _status(response: Mapping[str, Any]) -> str:
    proctor = response.get("proctor")
    status = proctor.get("status") if isinstance(proctor, dict) else None
    return status if isinstance(status, str) else "unknown"


def _task(response: Mapping[str, Any]) -> int:
    task = response.get(TASK_INDEX, 0)
    return task if isinstance(task, int) and not isinstance(task, bool) else 0


async def aggregate_metrics(body: AggregateRequest) -> AggregateMetrics:
    return summarize(body.verify_responses)


_REFUSALS: dict[int | str, dict[str, Any]] = {
    401: {"description": "No key, or a wrong one (in the path or the header)."},
    422: {"description": "A malformed request, or an item Proctor cannot judge (its error)."},
    429: {"description": "A per-key or byte limit, as for /v1/score; retry."},
    503: {"description": "The item could not be judged now; retry after `Retry-After`."},
}


def _routes() -> Iterable[tuple[str, Callable[..., Any], str, dict[str, Any]]]:
    yield "seed_session", seed_session, "POST", {"summary": "Start a rollout's session ({})"}
    yield "reverify_mode", reverify_mode, "GET", {"summary": "Whether verify may run again"}
    yield (
        "verify",
        verify,
        "POST",
        {
            "summary": "Reward a rollout (NeMo-Gym's verify)",
            "description": "The request echoed back, plus `reward`, the result's numbers "
            "(`score`, `success`, `parsed`, `penalty`, `penalty_<name>`) and `proctor` "
            "(status, spec, penalties, details).",
        },
    )
    yield (
        "aggregate_metrics",
        aggregate_metrics,
        "POST",
        {"summary": "Metrics over verify responses", "response_model": AggregateMetrics},
    )


ROUTES = tuple(name for name, *_ in _routes())
"""The resource server's routes, under each of its prefixes."""


def _keyed_extra(name: str, extra: Mapping[str, Any]) -> dict[str, Any]:
    """What the keyed form of a route says of itself: `REDACTED` is where the key goes."""
    said = extra.get("description", extra["summary"] + ".")
    return {
        "name": f"nemo_gym_{name}_keyed",
        "description": f"{said} `REDACTED` in the path stands for an API key of this server.",
    }


router = APIRouter(tags=["compat: nemo-gym"])
for _prefix in prefixes(PREFIX):
    for _name, _endpoint, _method, _extra in _routes():
        router.add_api_route(
            f"{_prefix}/{_name}",
            _endpoint,
            methods=[_method],
            responses=_REFUSALS,
            **(_extra | _keyed_extra(_name, _extra) if _prefix != PREFIX else _extra),
        )
