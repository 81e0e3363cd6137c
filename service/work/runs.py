"""`POST /v1/run`'s work: one program, run in a pool of sandboxes that never run scoring.

A run's output goes back to the policy, so nothing of a scoring request may reach it: not a
sandbox where responses run (their code, test inputs), nor the checkers' pool (references'
answers and test programs). So runs get a third pool (`run_sandbox_settings`: its own docker
label, `fork_python` off, so every program, Python's included, is exec'd afresh), opened by the
first run, on either backend. Each run is
one unit of work for its tenant in a `FairThreads` queue of its own (as scoring's sandbox
threads are), one thread per sandbox of the pool, so one key's flood of runs does not queue
another key's run behind it.

Programs are built and run as code items are (`reward_specs.code.languages`), Python as
`python3 main.py` (its directory on `sys.path`, so `files` can be imported).

`Runs` is what the routes call: `RunPool` here (the embedded default), or queue mode's
`service.queue.run_queue.QueueRuns`, which sends each run to a worker's `RunSandbox`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Literal, Protocol, TypeVar

from reward_specs import codes
from reward_specs.code.extract import Language
from reward_specs.code.languages import LANGUAGES
from reward_specs.code.reference import CodeConfig
from reward_specs.code.results import tail
from sandboxes import (
    Execution,
    ExecutionResult,
    Limits,
    RunRequest,
    RunResult,
    SandboxError,
    SandboxSettings,
    SandboxStats,
    SandboxUnavailable,
    open_backend,
)
from sandboxes.checkers import LazyBackend
from service.core.tenancy import tenant
from service.dispatch.threads import FairThreads
from service.settings import Settings

__all__ = [
    "LOST_TWICE",
    "RunBounds",
    "RunOutcome",
    "RunPool",
    "RunPoolStats",
    "RunSandbox",
    "RunStatus",
    "Runs",
    "lost_twice",
    "outcome_of",
    "run_request",
    "run_sandbox_settings",
    "source_file",
    "tally",
]

RunStatus = Literal[
    "ok", "error", "timeout", "memory", "output_limit", "compile_error", "infra_error"
]

_STATUS: dict[str, RunStatus] = {
    "ok": "ok",
    "runtime_error": "error",
    "timeout": "timeout",
    "memory": "memory",
    "output_limit": "output_limit",
}
"""A sandbox execution's status as a run's ("skipped" never comes from a one-execution run
whose build succeeded)."""

T = TypeVar("T")
_Answer = TypeVar("_Answer")

_COULD_NOT_START = b"sandbox: could not start the program"
"""What the supervisor appends when exec itself failed (a compiler missing on this host)."""

_CPP_FLAGS = CodeConfig().cpp_flags
"""The specs' default C++ flags."""


@dataclass(frozen=True, slots=True)
class RunBounds:
    """The limits of one run: the server's (`RunSettings`), or less where the request asks."""

    cpu_s: float
    wall_s: float
    memory_mb: int
    output_bytes: int


@dataclass(frozen=True, slots=True)
class RunOutcome:
    status: RunStatus
    stdout: str = ""
    stderr: str = ""
    exit_code: int | None = None
    cpu_s: float = 0.0
    wall_s: float = 0.0
    error_code: str | None = None
    """With `infra_error`: why (`sandbox_unavailable`, `sandbox_error`, `deadline_exceeded`)."""
    error_message: str | None = None


def run_sandbox_settings(sandbox: SandboxSettings, pool_size: int) -> SandboxSettings:
    """The responses' sandbox settings for the run pool: its own docker label (closing one
    backend removes the containers of its label) and every Python program exec'd afresh."""
    label = f"{sandbox.docker_label[:60]}-run"
    return sandbox.model_copy(
        update={"docker_label": label, "fork_python": False, "pool_size": pool_size}
    )


def source_file(language: Language, source: bytes) -> str:
    """The name the program's source is written under (Java's is its public class's)."""
    if language == "python":
        return "main.py"
    return LANGUAGES[language].plan(source, 0, _CPP_FLAGS).source_file


def run_request(
    language: Language,
    source: bytes,
    stdin: bytes,
    files: Mapping[str, bytes],
    bounds: RunBounds,
    settings: Settings,
) -> RunRequest:
    """The sandbox request of one run: `files` beside the source, one build (compiled
    languages), one execution. The compiler has the server's memory, whatever the run asks."""
    memory = bounds.memory_mb << 20
    limits = Limits(
        cpu_budget_s=bounds.cpu_s,
        wall_cap_s=bounds.wall_s,
        build_cpu_s=settings.run.build_cpu_s,
        memory_bytes=memory,
        output_bytes=bounds.output_bytes,
        max_processes=settings.run.max_processes,
        build_memory_bytes=settings.run.memory_mb << 20,
    )
    if language == "python":
        return RunRequest(
            files={**files, "main.py": source},
            executions=[Execution(("python3", "main.py"), stdin)],
            limits=limits,
        )
    plan = LANGUAGES[language].plan(source, memory, _CPP_FLAGS)
    limits = replace(
        limits, address_space_bytes=plan.address_space_bytes, stack_bytes=plan.stack_bytes
    )
    return RunRequest(
        files={**files, plan.source_file: source},
        build=None if plan.build is None else Execution(plan.build),
        executions=[Execution(plan.run, stdin)],
        limits=limits,
    )


def _text(data: bytes) -> str:
    return data.decode("utf-8", "replace")


def _could_not_start(ex: ExecutionResult) -> bool:
    return ex.exit_code == 127 and _COULD_NOT_START in ex.stderr


def outcome_of(result: RunResult) -> RunOutcome:
    """A run's outcome from the sandbox's result: a failed build is `compile_error` with the
    compiler's output; a program or compiler the sandbox could not start is ours."""
    for ex in (result.build, *result.executions):
        if ex is not None and _could_not_start(ex):
            message = f"the sandbox could not start the program: {tail(ex.stderr, 300)}"
            return RunOutcome("infra_error", error_code=codes.SANDBOX_ERROR, error_message=message)
    build = result.build
    if build is not None and build.status != "ok":
        return RunOutcome(
            "compile_error",
            _text(build.stdout),
            _text(build.stderr),
            build.exit_code,
            round(build.cpu_s, 4),
            round(build.wall_s, 4),
        )
    if len(result.executions) != 1 or result.executions[0].status == "skipped":
        message = f"the sandbox returned {len(result.executions)} results for 1 execution"
        return RunOutcome("infra_error", error_code=codes.SANDBOX_ERROR, error_message=message)
    (ex,) = result.executions
    return RunOutcome(
        _STATUS[ex.status],
        _text(ex.stdout),
        _text(ex.stderr),
        ex.exit_code,
        round(ex.cpu_s, 4),
        round(ex.wall_s, 4),
    )


LOST_TWICE = (
    b"proctor: this program was running when its worker was lost, twice; it is not run again"
)
"""The stderr of a run lost with its worker twice (queue mode), which is not run a third time."""


def lost_twice() -> RunResult:
    """The answer of a run lost with its worker twice: a failed run (as an item that kills two
    workers is judged 0), never an error of ours a client would retry into more workers."""
    return RunResult([ExecutionResult("runtime_error", stderr=LOST_TWICE)])


class RunSandbox:
    """The sandboxes runs execute in (`run_sandbox_settings`), opened by the first run: the
    API host's in the embedded default, each worker's in queue mode."""

    def __init__(self, settings: Settings) -> None:
        own = run_sandbox_settings(settings.sandbox, settings.run.pool_size)
        self._backend = LazyBackend(own.backend, lambda: open_backend(own))

    def run(self, request: RunRequest) -> RunResult | RunOutcome:
        """The sandbox's result (blocking), or the `infra_error` outcome of its failure."""
        try:
            return self._backend.run(request)
        except SandboxUnavailable as exc:  # no run pool on this host
            code = codes.SANDBOX_UNAVAILABLE
            return RunOutcome("infra_error", error_code=code, error_message=str(exc))
        except SandboxError as exc:
            return RunOutcome("infra_error", error_code=codes.SANDBOX_ERROR, error_message=str(exc))

    def ready(self) -> bool:
        """Not yet opened (the first run opens it), or its sandboxes are up."""
        return self._backend.ready()

    def stats(self) -> SandboxStats:
        return self._backend.stats()

    def close(self) -> None:
        self._backend.close()


def tally(answered: dict[str, int], outcome: _Answer) -> _Answer:
    """Count a run answered in `answered` (`RunPoolStats.answered`): by its status, or
    `finished` for a result read by another route's `read` (the sandbox answered; the route's
    body says how it ended)."""
    status = outcome.status if isinstance(outcome, RunOutcome) else "finished"
    answered[status] = answered.get(status, 0) + 1
    return outcome


class Runs(Protocol):
    """What `POST /v1/run` and the compatibility routes run programs with."""

    async def run(self, request: RunRequest) -> RunOutcome:
        """Run `request` in the caller's tenant's fair turn: its outcome, or `infra_error`."""

    async def execute(
        self,
        request: RunRequest,
        read: Callable[[RunResult], T],
        start_within_s: float | None = None,
    ) -> T | RunOutcome:
        """`run`, with the sandbox's result read by `read`; with `start_within_s`, a run that
        no sandbox took within that time never starts (`deadline_exceeded`)."""

    def ready(self) -> bool: ...

    def stats(self) -> RunPoolStats: ...

    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class RunPoolStats:
    """The run pool at a scrape (`/metrics`): its sandboxes (all 0 before the first run opens
    them), the runs waiting for one, and the runs answered by status."""

    sandboxes: SandboxStats
    pending: int
    answered: Mapping[str, int]


class _Run:
    """One run's turn in the fair queue (compared by identity)."""

    __slots__ = ()


class RunPool:
    """The run pool of a service: sandboxes opened by the first run, threads taking runs
    round-robin across tenants."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._sandbox = RunSandbox(settings)
        self._threads: FairThreads | None = None
        self._answered: dict[str, int] = {}

    def _sandbox_run(self, request: RunRequest, read: Callable[[RunResult], T]) -> T | RunOutcome:
        result = self._sandbox.run(request)
        return result if isinstance(result, RunOutcome) else read(result)

    async def run(self, request: RunRequest) -> RunOutcome:
        """Run `request` in the caller's tenant's fair turn; past the request deadline it is
        `infra_error` (`deadline_exceeded`), and a run not yet started never starts."""
        return await self.execute(request, outcome_of)

    async def execute(
        self,
        request: RunRequest,
        read: Callable[[RunResult], T],
        start_within_s: float | None = None,
    ) -> T | RunOutcome:
        """`run`, with the sandbox's result read by `read` (on the pool's thread), or the
        `infra_error` outcome. With `start_within_s`, a run no sandbox took within that time
        never starts: `infra_error` (`deadline_exceeded`) at once."""
        if self._threads is None:
            self._threads = FairThreads(self.settings.run.pool_size, "proctor-run")
        turn = _Run()
        started = time.monotonic()
        future = self._threads.submit(tenant(), turn, lambda: self._sandbox_run(request, read))
        waiting = asyncio.wrap_future(future)
        try:
            if start_within_s is not None:
                await asyncio.wait({waiting}, timeout=start_within_s)
                if future.cancel():  # still queued: no sandbox was free in time
                    message = f"no sandbox of the run pool was free within {start_within_s:g} s"
                    return self._count(
                        RunOutcome(
                            "infra_error", error_code=codes.DEADLINE_EXCEEDED, error_message=message
                        )
                    )
            left = self.settings.request_deadline_s - (time.monotonic() - started)
            outcome = await asyncio.wait_for(waiting, timeout=max(left, 0.0))
        except TimeoutError:
            waited = time.monotonic() - started
            message = f"no sandbox of the run pool answered within {waited:.0f} s"
            outcome = RunOutcome(
                "infra_error", error_code=codes.DEADLINE_EXCEEDED, error_message=message
            )
        finally:
            self._threads.forget(turn)
        return self._count(outcome)

    def _count(self, outcome: _Answer) -> _Answer:
        return tally(self._answered, outcome)

    def pending(self) -> int:
        """Runs waiting for a sandbox of the pool."""
        return 0 if self._threads is None else self._threads.pending()

    def ready(self) -> bool:
        """For `/readyz`: not yet opened (the first run opens it), or its sandboxes are up."""
        return self._sandbox.ready()

    def stats(self) -> RunPoolStats:
        return RunPoolStats(self._sandbox.stats(), self.pending(), dict(self._answered))

    def close(self) -> None:
        """Stop the threads and the sandboxes (blocking)."""
        if self._threads is not None:
            self._threads.shutdown()
        self._sandbox.close()
