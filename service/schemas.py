"""Request and response bodies of the wire contract (docs/api.md), as separate classes."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from reward_specs import Status

__all__ = [
    "ErrorBody",
    "ErrorInfo",
    "FinishReason",
    "JobAccepted",
    "JobState",
    "JobStatus",
    "LimitsInfo",
    "RunLimitsInfo",
    "ScoreItem",
    "ScoreRequest",
    "ScoreResponse",
    "ScoreResult",
    "SpecInfo",
    "SpecSummary",
    "SpecsResponse",
]


FinishReason = Literal["stop", "length"]
"""Why generation stopped: at an end-of-sequence token, or at the length limit."""

JobState = Literal["queued", "running", "done", "failed", "cancelled"]


def _whole_number(value: Any) -> Any:
    """JSON Schema's `integer` admits 812.0; strict validation alone would not."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


class ScoreItem(BaseModel):
    """One response to judge. A field not listed here makes this item `invalid` (naming the
    field) while the rest of the batch is scored; `meta` is the place for a trainer's own data."""

    # Strict: the service accepts exactly what its published schema says (no "5" for 5).
    model_config = ConfigDict(extra="forbid", strict=True)

    id: str | None = Field(None, max_length=512, description="Echoed back in the result.")
    domain: str = Field(
        ...,
        min_length=1,
        max_length=64,
        description="One of the server's domains (math, stem, code, puzzle, ifeval, ...); "
        "an unknown one makes this item `invalid`.",
    )
    response: str = Field(..., description="The model's full response text.")
    reference: dict[str, Any] | None = Field(
        None,
        description="Domain-specific gold data. Give this or `reference_index`; an item with "
        "neither (or both) is `invalid`.",
    )
    reference_index: Annotated[int, Field(ge=0), BeforeValidator(_whole_number)] | None = Field(
        None,
        description="Position in the request's `references` table of this item's reference, so "
        "that the 16 samples of a GRPO group can share one entry instead of carrying 16 copies.",
    )
    finish_reason: FinishReason | None = Field(
        None, description="`length` when generation hit the token limit."
    )
    # The bound comes before the validator so that it reaches the published schema.
    response_tokens: Annotated[int, Field(ge=0), BeforeValidator(_whole_number)] | None = None
    max_response_tokens: Annotated[int, Field(gt=0), BeforeValidator(_whole_number)] | None = None
    meta: dict[str, Any] | None = Field(
        None,
        description="Free-form (a prompt id, a sample index): echoed back untouched on this "
        "item's result, never read. Bounded like a reference (depth, `max_meta_bytes`).",
    )


class ScoreRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    spec: str | None = Field(None, description="Reward spec name; the server's default if absent.")
    items: list[ScoreItem]
    references: list[dict[str, Any]] | None = Field(
        None, description="References that items point into with `reference_index`."
    )


class ErrorInfo(BaseModel):
    code: str
    message: str


class ErrorBody(BaseModel):
    """The body of every error response, on every route: `detail` as each route gives it (a
    422's list of `{loc, msg, type}`, a string, a puzzle route's `{code, message}`), and `error`,
    the same `{code, message}` everywhere."""

    detail: Any
    error: ErrorInfo


class SpecSummary(BaseModel):
    name: str
    version: str
    hash: str


class ScoreResult(BaseModel):
    id: str | None = None
    status: Status
    reward: float | None = None
    score: float | None = None
    success: bool | None = None
    parsed: bool | None = None
    penalties: dict[str, float] = Field(default_factory=dict)
    details: dict[str, Any] = Field(default_factory=dict)
    error: ErrorInfo | None = None
    elapsed_ms: float = 0.0
    meta: dict[str, Any] | None = None


class ScoreResponse(BaseModel):
    spec: SpecSummary
    results: list[ScoreResult]


class SpecInfo(SpecSummary):
    description: str
    default: bool
    parameters: dict[str, Any]
    domain_hashes: dict[str, str]
    """Per domain, the hash of what can change its rewards (the code domain's includes the
    sandbox environment's digest)."""


class SpecsResponse(BaseModel):
    default: str
    environments: dict[str, str]
    """Domain -> the content digest of the environment it is scored in (the code sandbox's),
    once known; these enter the hashes."""
    specs: list[SpecInfo]


class InFlight(BaseModel):
    requests: int
    items: int


class RunLimitsInfo(BaseModel):
    """`POST /v1/run`'s bounds (`Settings.run`): a request may ask for less, never more."""

    cpu_s: float
    wall_s: float
    build_cpu_s: float
    memory_mb: int
    output_bytes: int
    max_files: int
    max_file_bytes: int


class LimitsInfo(BaseModel):
    max_items_per_request: int
    max_response_bytes: int
    max_request_bytes: int
    request_deadline_s: float
    item_timeout_s: float
    max_jobs: int
    max_running_job_bytes: int
    max_finished_job_bytes: int
    max_inflight_requests_per_key: int
    max_inflight_items_per_key: int
    max_inflight_request_bytes: int
    max_header_bytes: int
    in_flight: InFlight
    """What the caller's API key has in flight now (requests, and items of requests and jobs)."""
    run: RunLimitsInfo


class JobAccepted(BaseModel):
    job_id: str


class JobStatus(BaseModel):
    job_id: str
    status: JobState
    total: int
    completed: int
    result: ScoreResponse | None = None
    error: ErrorInfo | None = None
