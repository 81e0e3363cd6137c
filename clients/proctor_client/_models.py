"""Typed items and results, mirroring the wire contract (docs/api.md in the repository)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "ErrorInfo",
    "FinishReason",
    "JobState",
    "JobStatus",
    "RunResult",
    "RunStatus",
    "ScoreItem",
    "ScoreResponse",
    "ScoreResult",
    "SpecSummary",
    "Status",
]

# Copies of the service's literals (`reward_specs.Status`, `service.schemas`): this package never
# imports the service. tests/test_public_api.py checks that the copies agree.
Status = Literal["ok", "infra_error", "invalid"]
JobState = Literal["queued", "running", "done", "failed", "cancelled"]
FinishReason = Literal["stop", "length"]
RunStatus = Literal[
    "ok", "error", "timeout", "memory", "output_limit", "compile_error", "infra_error"
]


class ScoreItem(BaseModel):
    """One response to judge. Unknown fields are refused here, before anything is sent, so that a
    misspelt `refrence` fails at once instead of coming back `invalid`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str | None = None
    domain: str
    response: str
    reference: dict[str, Any] | None = None
    finish_reason: FinishReason | None = None
    response_tokens: int | None = Field(None, ge=0)
    max_response_tokens: int | None = Field(None, gt=0)
    meta: dict[str, Any] | None = None
    """Echoed back untouched on the result (by servers that know `meta`; sent only when set)."""


class ErrorInfo(BaseModel):
    code: str
    message: str


class ScoreResult(BaseModel):
    """One item's outcome. Only `ok` carries numbers; `infra_error` means the item was not judged
    (the service or the client gave up), never that the answer was wrong."""

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


class SpecSummary(BaseModel):
    name: str
    version: str
    hash: str


class ScoreResponse(BaseModel):
    spec: SpecSummary
    results: list[ScoreResult]


class JobStatus(BaseModel):
    job_id: str
    status: JobState
    total: int
    completed: int
    result: ScoreResponse | None = None
    error: ErrorInfo | None = None


class RunResult(BaseModel):
    """One program's run (`POST /v1/run`): `ok` exited 0, `error` exited otherwise (or was
    killed), `timeout`, `memory` and `output_limit` hit a bound, `compile_error` did not build
    (the compiler's output in `stderr`), and `infra_error` was not run by us (`error` says
    why), never the program's fault."""

    status: RunStatus
    stdout: str = ""
    stderr: str = ""
    exit_code: int | None = None
    cpu_s: float = 0.0
    wall_s: float = 0.0
    error: ErrorInfo | None = None
