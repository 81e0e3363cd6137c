"""SandboxFusion's wire format and its mapping onto `/v1/run`'s sandboxes (docs/api.md,
"SandboxFusion compatibility").

SandboxFusion (bytedance/SandboxFusion, `sandbox/server/sandbox_api.py`) answers every outcome
with HTTP 200 and a `status`: `Success`, `Failed` (a time limit, or a non-zero return code), or
`SandboxError` (its own failure). Here `SandboxError` with HTTP 200 is only the request's own
fault (a language not offered, a bad path, a file too large), named in `message`; a failure of
ours is not a verdict at all but a 504 (`Unavailable`), which verl retries.

A request is planned (`plan_run_code`, `plan_jupyter`: bounds clamped to the server's, files
decoded and checked with `/v1/run`'s rules) into one `RunRequest` for the run pool, and the
sandbox's result read back (`read_run_code`, `read_jupyter`) on the pool's thread. `submit`'s
test cases are `sandbox_fusion_submit`'s.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from reward_specs.code.extract import Language
from sandboxes import Execution, ExecutionResult, RunRequest, RunResult
from service.http.compat.programs import MARKER, fetch_argv, jupyter_argv, read_cells, read_fetched
from service.http.routes.run import path_problem
from service.settings import RunSettings, Settings
from service.work.runs import RunBounds, RunOutcome, outcome_of, run_request, source_file

__all__ = [
    "COMPILED",
    "LANGUAGES",
    "CellRunResult",
    "CommandRunResult",
    "Plan",
    "Refused",
    "RunCodeRequest",
    "RunCodeResponse",
    "RunJupyterRequest",
    "RunJupyterResponse",
    "language_of",
    "plan_jupyter",
    "plan_run_code",
    "refusal",
]

LANGUAGES: dict[str, Language] = {
    "python": "python",
    "cpp": "cpp",
    "java": "java",
    "nodejs": "javascript",
    "go": "go",
    "rust": "rust",
}
"""SandboxFusion's language names this server runs, and ours for each."""
COMPILED = frozenset({"cpp", "java", "go", "rust"})
"""The languages SandboxFusion answers with a `compile_result` (JavaScript's syntax check, a
build step of ours, is reported as its run, as SandboxFusion's `node` would report it)."""
MIN_MEMORY_MB = 16
FETCH_HEADER_BYTES = 512
"""What the fetcher's output spends on each file besides its bytes (a JSON header line)."""


class RunCodeRequest(BaseModel):
    """SandboxFusion's `RunCodeRequest`; unknown fields are ignored, as SandboxFusion does, and
    a value of the wrong type is a 422 (no `false` for a number)."""

    model_config = ConfigDict(extra="ignore", strict=True, allow_inf_nan=False)

    code: str
    language: str
    compile_timeout: float = 10
    run_timeout: float = 10
    memory_limit_MB: int = -1
    stdin: str | None = None
    files: dict[str, str | None] = Field(default_factory=dict)
    """Path -> base64 content; a null content is skipped, as SandboxFusion skips it."""
    fetch_files: list[str] = Field(default_factory=list)


class RunJupyterRequest(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True, allow_inf_nan=False)

    cells: list[str]
    cell_timeout: float = 0
    """Accepted and not enforced, as SandboxFusion enforces only the driver's timeout."""
    total_timeout: float = 45
    memory_limit_MB: int = -1
    kernel: Literal["python3"] = "python3"
    files: dict[str, str | None] = Field(default_factory=dict)
    fetch_files: list[str] = Field(default_factory=list)


CommandStatus = Literal["Finished", "Error", "TimeLimitExceeded"]
SandboxStatus = Literal["Success", "Failed", "SandboxError"]


class CommandRunResult(BaseModel):
    status: CommandStatus
    execution_time: float | None = None
    return_code: int | None = None
    """Never null for `Finished` (a death by a signal is 128 + the signal); null for a time
    limit, as SandboxFusion's."""
    stdout: str = ""
    stderr: str = ""
    cpu_time: float | None = None


class RunCodeResponse(BaseModel):
    status: SandboxStatus
    message: str = ""
    compile_result: CommandRunResult | None = None
    run_result: CommandRunResult | None = None
    executor_pod_name: str | None = None
    files: dict[str, str] = Field(default_factory=dict)


class CellRunResult(BaseModel):
    stdout: str
    stderr: str
    display: list[dict[str, Any]]
    error: list[dict[str, Any]]


class RunJupyterResponse(BaseModel):
    status: SandboxStatus
    message: str = ""
    driver: CommandRunResult | None = None
    cells: list[CellRunResult] = Field(default_factory=list)
    executor_pod_name: str | None = None
    files: dict[str, str] = Field(default_factory=dict)


class Refused(ValueError):
    """The request's own fault: HTTP 200 with `status: SandboxError` and this message."""


def refusal(message: str) -> RunCodeResponse:
    return RunCodeResponse(status="SandboxError", message=message)


@dataclass(frozen=True, slots=True)
class Plan:
    """One compat request as a run of the pool."""

    request: RunRequest
    clamps: tuple[str, ...]
    """What was clamped to the server's bounds, for `X-Proctor-Clamped`."""
    fetch: tuple[str, ...]
    output_bytes: int


class _Clamps:
    """The request's bounds, each the server's where it asks for more (or for none)."""

    def __init__(self) -> None:
        self.named: list[str] = []

    def seconds(self, field: str, asked: float, bound: float, name: str) -> float:
        if asked > 0 and math.isfinite(asked) and asked <= bound:
            return asked
        self.named.append(f"{field} {name}={bound:g}")
        return bound

    def memory(self, asked: int, bound: int) -> int:
        if MIN_MEMORY_MB <= asked <= bound:
            return asked
        applied = MIN_MEMORY_MB if 0 < asked < MIN_MEMORY_MB else bound
        self.named.append(f"memory_limit_MB memory_mb={applied}")
        return applied


def _decoded_files(files: dict[str, str | None], settings: Settings) -> dict[str, bytes]:
    given = {path: content for path, content in files.items() if content is not None}
    run = settings.run
    if len(given) > run.max_files:
        raise Refused(f"{len(given)} files; this server takes at most {run.max_files}")
    decoded: dict[str, bytes] = {}
    for path, content in given.items():
        problem = path_problem(path)
        if problem is not None:
            raise Refused(f"files: {path!r}: {problem}")
        try:
            data = base64.b64decode(content, validate=True)
        except (binascii.Error, ValueError):
            raise Refused(f"files: {path!r}: not base64") from None
        if len(data) > run.max_file_bytes:
            raise Refused(f"files: {path!r}: {len(data)} bytes; at most {run.max_file_bytes}")
        decoded[path] = data
    return decoded


def _fetch_paths(paths: list[str], settings: Settings) -> tuple[str, ...]:
    if len(paths) > settings.run.max_files:
        raise Refused(f"fetch_files: {len(paths)} paths; at most {settings.run.max_files}")
    for path in paths:
        problem = path_problem(path)
        if problem is not None:
            raise Refused(f"fetch_files: {path!r}: {problem}")
    return tuple(dict.fromkeys(paths))


def _text_bytes(what: str, text: str, settings: Settings) -> bytes:
    data = text.encode("utf-8", "surrogateescape")
    if len(data) > settings.run.max_file_bytes:
        raise Refused(f"{what}: {len(data)} bytes; at most {settings.run.max_file_bytes}")
    return data


def _with_fetch(request: RunRequest, fetch: tuple[str, ...], output_bytes: int) -> RunRequest:
    if not fetch:
        return request
    budget = max(0, output_bytes - FETCH_HEADER_BYTES * len(fetch))
    executions = [*request.executions, Execution(fetch_argv(budget, list(fetch)))]
    return replace(request, executions=executions)


def language_of(name: str) -> Language:
    """Ours for SandboxFusion's language `name`, or `Refused` naming the ones offered."""
    language = LANGUAGES.get(name)
    if language is None:
        offered = ", ".join(sorted(LANGUAGES))
        raise Refused(f"language {name!r} is not offered here; this server runs {offered}")
    return language


def _bounds(
    clamps: _Clamps, field: str, timeout: float, memory_mb: int, run: RunSettings
) -> RunBounds:
    """`/v1/run`'s bounds for a SandboxFusion timeout (wall seconds, here CPU seconds as well)
    and memory limit: the request's, clamped to the server's."""
    return RunBounds(
        cpu_s=clamps.seconds(field, timeout, run.cpu_s, "cpu_s"),
        wall_s=clamps.seconds(field, timeout, run.wall_s, "wall_s"),
        memory_mb=clamps.memory(memory_mb, run.memory_mb),
        output_bytes=run.output_bytes,
    )


def plan_run_code(body: RunCodeRequest, settings: Settings) -> Plan:
    """The run of a `run_code` request, or `Refused` naming what is wrong with it."""
    language = language_of(body.language)
    run = settings.run
    clamps = _Clamps()
    bounds = _bounds(clamps, "run_timeout", body.run_timeout, body.memory_limit_MB, run)
    build_cpu = clamps.seconds(
        "compile_timeout", body.compile_timeout, run.build_cpu_s, "build_cpu_s"
    )
    source = _text_bytes("code", body.code, settings)
    stdin = _text_bytes("stdin", body.stdin or "", settings)
    files = _decoded_files(body.files, settings)
    named = source_file(language, source)
    if named in files:
        raise Refused(f"files: {named!r} is the source file's own name")
    fetch = _fetch_paths(body.fetch_files, settings)
    request = run_request(language, source, stdin, files, bounds, settings)
    request = replace(request, limits=replace(request.limits, build_cpu_s=build_cpu))
    request = _with_fetch(request, fetch, bounds.output_bytes)
    return Plan(request, tuple(clamps.named), fetch, bounds.output_bytes)


def plan_jupyter(body: RunJupyterRequest, settings: Settings) -> Plan:
    """The run of a `run_jupyter` request: the cells' driver in a fresh interpreter."""
    clamps = _Clamps()
    total, memory = body.total_timeout, body.memory_limit_MB
    bounds = _bounds(clamps, "total_timeout", total, memory, settings.run)
    cells = _text_bytes("cells", json.dumps(body.cells), settings)
    files = _decoded_files(body.files, settings)
    fetch = _fetch_paths(body.fetch_files, settings)
    request = run_request("python", b"", b"", files, bounds, settings)
    request = replace(request, files=files, executions=[Execution(jupyter_argv(), cells)])
    request = _with_fetch(request, fetch, bounds.output_bytes)
    return Plan(request, tuple(clamps.named), fetch, bounds.output_bytes)


def _text(data: bytes) -> str:
    return data.decode("utf-8", "replace")


def _command(ex: ExecutionResult, stdout: bytes | None = None) -> CommandRunResult:
    """An execution as SandboxFusion's `CommandRunResult`."""
    if ex.status == "timeout":
        status: CommandStatus = "TimeLimitExceeded"
        code = None
    else:  # a program that ran out of memory or output was killed: finished, by a signal
        status = "Finished"
        code = ex.exit_code if ex.exit_code is not None else 128 + (ex.signal or 9)
    return CommandRunResult(
        status=status,
        execution_time=round(ex.wall_s, 4),
        return_code=code,
        stdout=_text(ex.stdout if stdout is None else stdout),
        stderr=_text(ex.stderr),
        cpu_time=round(ex.cpu_s, 4),
    )


def _overall(*results: CommandRunResult | None) -> SandboxStatus:
    """SandboxFusion's `parse_run_status`: a time limit or a non-zero code fails the run."""
    done = [r for r in results if r is not None]
    if any(r.status == "TimeLimitExceeded" or r.return_code not in (0, None) for r in done):
        return "Failed"
    return "Success"


def _first(result: RunResult) -> ExecutionResult | RunOutcome:
    """The first execution, unless `/v1/run`'s reading of it and of the build makes it ours to
    answer (a program the sandbox could not start, a result missing): then that outcome."""
    outcome = outcome_of(replace(result, executions=result.executions[:1]))
    if outcome.status == "infra_error" or not result.executions:
        return outcome
    return result.executions[0]


def _files(result: RunResult, plan: Plan, used: int) -> tuple[dict[str, str], str | None]:
    """The fetched files as base64, or the message of a `SandboxError` (past the output limit).
    A fetch that did not run, or did not finish in what the program left of the run's time,
    fetches nothing."""
    if not plan.fetch:
        return {}, None
    fetcher = result.executions[-1]
    if fetcher.status != "ok":  # skipped, or out of what the program left of the budget
        return {}, None
    fetched = read_fetched(fetcher.stdout)
    if fetched is None:
        return {}, "fetch_files: the fetched files could not be read back"
    size = used + sum(len(data) for data in fetched.files.values())
    if fetched.over_budget or size > plan.output_bytes:
        message = (
            "fetch_files: the files and the program's output pass this server's output "
            f"limit of {plan.output_bytes} bytes (run.output_bytes)"
        )
        return {}, message
    return {p: base64.b64encode(d).decode() for p, d in fetched.files.items()}, None


def read_run_code(plan: Plan, language: str) -> Callable[[RunResult], RunCodeResponse | RunOutcome]:
    """The reader of a `run_code` plan's result (see `RunPool.execute`)."""

    def read(result: RunResult) -> RunCodeResponse | RunOutcome:
        first = _first(result)
        if isinstance(first, RunOutcome):
            return first
        build = result.build
        compile_result = None
        if build is not None and build.status != "ok" and language not in COMPILED:
            # JavaScript's syntax check failed: SandboxFusion's `node` run would have said so
            run_result = _command(build)
            return RunCodeResponse(status=_overall(run_result), run_result=run_result)
        if build is not None and language in COMPILED:
            compile_result = _command(build)
            if build.status != "ok":
                return RunCodeResponse(
                    status=_overall(compile_result), compile_result=compile_result
                )
        run_result = _command(first)
        files, message = _files(result, plan, len(first.stdout) + len(first.stderr))
        if message is not None:
            return RunCodeResponse(status="SandboxError", message=message)
        status = _overall(compile_result, run_result)
        return RunCodeResponse(
            status=status, compile_result=compile_result, run_result=run_result, files=files
        )

    return read


def read_jupyter(plan: Plan) -> Callable[[RunResult], RunJupyterResponse | RunOutcome]:
    """The reader of a `run_jupyter` plan's result: SandboxFusion answers `Failed` with no
    cells when its driver did not finish, and the cells otherwise."""

    def read(result: RunResult) -> RunJupyterResponse | RunOutcome:
        first = _first(result)
        if isinstance(first, RunOutcome):
            return first
        cells = read_cells(first.stdout) if first.status == "ok" else None
        marker_at = first.stdout.find(MARKER.encode())
        driver = _command(first, first.stdout[:marker_at] if marker_at >= 0 else None)
        if cells is None:
            return RunJupyterResponse(status="Failed", driver=driver)
        files, message = _files(result, plan, len(first.stderr))
        if message is not None:
            return RunJupyterResponse(status="SandboxError", message=message, driver=driver)
        return RunJupyterResponse(
            status="Success",
            driver=driver,
            cells=[CellRunResult.model_validate(c) for c in cells],
            files=files,
        )

    return read
