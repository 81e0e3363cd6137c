"""POST /v1/run: run one program in the sandbox and return its output, for tool calls during a
rollout (docs/api.md, "POST /v1/run"). The work is `service.work.runs`'s."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field, field_validator

from reward_specs.code.extract import Language
from service.http.deps import StateDep, field_error
from service.http.key_limits import KeyLease
from service.schemas import ErrorInfo
from service.settings import Settings
from service.work.runs import RunBounds, RunStatus, run_request, source_file

__all__ = ["RunBody", "RunLimitsBody", "RunResponse", "path_problem", "router"]

router = APIRouter(tags=["run"])


class RunLimitsBody(BaseModel):
    """Tighter bounds than the server's (`GET /v1/limits`, `run`); looser ones are a 422."""

    model_config = ConfigDict(extra="forbid", strict=True)  # no `true` for a number

    cpu_s: float | None = Field(None, gt=0)
    wall_s: float | None = Field(None, gt=0)
    memory_mb: int | None = Field(None, ge=16)
    output_bytes: int | None = Field(None, ge=1)


class RunBody(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)  # no `true` for a number

    language: Language
    source: str
    stdin: str = ""
    files: dict[str, str] | None = None
    """Relative path -> text, written beside the source before it is built and run."""
    limits: RunLimitsBody | None = None

    @field_validator("files")
    @classmethod
    def _relative_paths(cls, files: dict[str, str] | None) -> dict[str, str] | None:
        for path in files or {}:
            problem = path_problem(path)
            if problem is not None:
                raise ValueError(f"{path!r}: {problem}")
        return files


def path_problem(path: str) -> str | None:
    """What is wrong with `path` as a file of a run (None: nothing): the work directory's
    rule for `files`, here and on the compatibility routes."""
    if path.startswith("/") or "\x00" in path or len(path) > 255:
        return "a path must be relative, without NUL, at most 255 characters"
    if any(part in ("", ".", "..") for part in path.split("/")):
        return "no empty, '.' or '..' components"
    return None


class RunResponse(BaseModel):
    status: RunStatus
    stdout: str
    stderr: str
    exit_code: int | None
    cpu_s: float
    wall_s: float
    error: ErrorInfo | None = None


def _bounds(body: RunBody, settings: Settings) -> RunBounds:
    """The server's bounds, or the request's where it asks for less."""
    run = settings.run
    server: dict[str, Any] = {
        "cpu_s": run.cpu_s,
        "wall_s": run.wall_s,
        "memory_mb": run.memory_mb,
        "output_bytes": run.output_bytes,
    }
    asked = body.limits.model_dump(exclude_none=True) if body.limits is not None else {}
    for name, value in asked.items():
        if value > server[name]:
            field_error(
                ["body", "limits", name],
                f"{value} is above this server's {server[name]} (GET /v1/limits)",
                "limit_too_high",
            )
    return RunBounds(**{**server, **asked})


def _encoded(body: RunBody, settings: Settings) -> tuple[bytes, bytes, dict[str, bytes]]:
    """The source, stdin and files as bytes, each within `run.max_file_bytes`."""
    limit = settings.run.max_file_bytes
    files = body.files or {}
    if len(files) > settings.run.max_files:
        message = f"{len(files)} files; this server takes at most {settings.run.max_files}"
        field_error(["body", "files"], message, "too_many_files")
    texts: list[tuple[list[str | int], str]] = [(["body", "source"], body.source)]
    texts.append((["body", "stdin"], body.stdin))
    texts += [(["body", "files", path], text) for path, text in files.items()]
    encoded = []
    for loc, text in texts:
        data = text.encode("utf-8", "surrogateescape")
        if len(data) > limit:
            field_error(loc, f"{len(data)} bytes; at most {limit}", "too_large")
        encoded.append(data)
    source, stdin, *contents = encoded
    named = source_file(body.language, source)
    if named in files:
        field_error(["body", "files", named], "is the source file's own name", "name_taken")
    return source, stdin, dict(zip(files, contents, strict=True))


@router.post(
    "/v1/run",
    response_model=RunResponse,
    summary="Run a program in the sandbox",
    description="One program (built first for compiled languages), run once with `stdin`, "
    "bounded like a code item; its status, output and times. A malformed request is a 422 "
    "naming the field; a failure of ours is `infra_error`.",
    responses={422: {"description": "A malformed request: `detail[].loc` names the field."}},
)
async def run(body: RunBody, state: StateDep, _: KeyLease) -> RunResponse:
    settings = state.settings
    bounds = _bounds(body, settings)
    source, stdin, files = _encoded(body, settings)
    request = run_request(body.language, source, stdin, files, bounds, settings)
    outcome = await state.runs.run(request)
    response = RunResponse.model_validate(outcome, from_attributes=True)
    if outcome.error_code is None:
        return response
    error = ErrorInfo(code=outcome.error_code, message=outcome.error_message or "")
    return response.model_copy(update={"error": error})
