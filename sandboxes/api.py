"""The contract between code scorers and sandbox backends.

A `RunRequest` is one response's whole job: files written to a fresh private work directory, an
optional build step (e.g. `g++`), then executions run one after another (one per stdio test, say),
all sharing one CPU-time budget. Backends are blocking, thread-safe, and reusable across requests.

Who caused a failure decides how it is reported: anything the *program* does (crash, loop, exhaust
memory, flood output, kill its own supervisor) comes back as an `ExecutionResult` status; a failure
of the sandbox machinery itself raises `SandboxError` so the caller can report `infra_error`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol

if TYPE_CHECKING:
    from sandboxes.settings import SandboxSettings

__all__ = [
    "Execution",
    "ExecutionResult",
    "ExecutionStatus",
    "Limits",
    "RunRequest",
    "RunResult",
    "SandboxBackend",
    "SandboxError",
    "SandboxStats",
    "SandboxUnavailable",
]

ExecutionStatus = Literal[
    "ok",  # exited 0 within limits
    "runtime_error",  # non-zero exit or killed by a signal other than the ones below
    "timeout",  # the CPU budget (or the wall-clock backstop) ran out during this execution
    "memory",  # the memory limit was hit
    "output_limit",  # stdout+stderr exceeded the output limit
    "skipped",  # not started: the budget was already spent, or the build failed
]


@dataclass(frozen=True, slots=True)
class Limits:
    cpu_budget_s: float = 5.0
    """CPU seconds (user + sys, all processes of the run) shared by every execution of a request."""
    wall_cap_s: float = 10.0
    """Wall-clock backstop for the executions together, for programs that sleep or block."""
    build_cpu_s: float = 10.0
    """CPU seconds for the build step alone (not counted in the budget above)."""
    memory_bytes: int = 512 * 1024 * 1024
    output_bytes: int = 1024 * 1024
    """Per execution, stdout and stderr together; more is cut off and reported as output_limit."""
    max_processes: int = 64
    file_size_bytes: int = 64 * 1024 * 1024
    build_memory_bytes: int | None = None
    """Memory of the build step (None: `memory_bytes`), so that a problem's own tighter limit
    bounds the program and not its compiler."""
    address_space_bytes: int | None = None
    """RLIMIT_AS of each process; None: `memory_bytes`. For runtimes that reserve far more
    address space than they touch (the JVM, V8): their resident memory is still bounded by
    `memory_bytes`, through the supervisor's poll (and, under docker, the container's cgroup)."""
    stack_bytes: int | None = None
    """RLIMIT_STACK; None: `memory_bytes`, at most 256 MiB (deep recursion in C++ and Python).
    The C library and libuv also size each new thread's stack by it, so runtimes that start
    threads of their own (JVM, Node, Go) take the system's usual 8 MiB instead."""


@dataclass(frozen=True, slots=True)
class Execution:
    argv: Sequence[str]
    """Run inside the work directory, e.g. ("python3", "main.py") or ("./main",)."""
    stdin: bytes = b""


@dataclass(frozen=True, slots=True)
class RunRequest:
    files: Mapping[str, bytes]
    executions: Sequence[Execution]
    build: Execution | None = None
    limits: Limits = field(default_factory=Limits)
    shared_files: Mapping[str, bytes] = field(default_factory=dict)
    """Written to the work directory like `files`, for files that recur unchanged across many
    requests (trusted runners): a backend sends each to a sandbox once and keeps it there, in the
    supervisor's memory (never on disk, where a program could change it for the next run).
    Pass the same bytes object each time (a cached constant): that is how it is recognised.
    Trusted code only: a Python script among them that ends in an `if __name__ == "__main__":`
    block has what comes before it (its definitions) run by the supervisor itself, once (see
    `supervisor/shared.py`)."""


@dataclass(frozen=True, slots=True)
class ExecutionResult:
    status: ExecutionStatus
    exit_code: int | None = None
    signal: int | None = None
    stdout: bytes = b""
    stderr: bytes = b""
    cpu_s: float = 0.0
    wall_s: float = 0.0
    stopped: bool = False
    """The sandbox ended this execution (CPU budget, wall-clock backstop, output limit, the
    supervisor's memory poll, or the whole sandbox died); False when it ended by itself (exit,
    crash, a signal the supervisor did not send, the kernel's OOM killer included) or was
    skipped."""


@dataclass(frozen=True, slots=True)
class RunResult:
    executions: Sequence[ExecutionResult]
    build: ExecutionResult | None = None

    @property
    def cpu_s(self) -> float:
        return sum(e.cpu_s for e in self.executions)


class SandboxError(RuntimeError):
    """The sandbox machinery failed (not the program): the item was not judged."""


class SandboxUnavailable(SandboxError):
    """The configured backend cannot run here (no namespaces, no Docker engine, no image)."""


@dataclass(frozen=True)
class SandboxStats:
    """A backend's pool of warm sandboxes, for /metrics."""

    size: int
    """Sandboxes the pool keeps."""
    live: int
    """Sandboxes started and not yet retired (busy or idle)."""
    idle: int
    """Of those, the ones waiting for a request."""
    started: int
    """Sandboxes started since the backend opened (the first `size`, then each replacement)."""
    retired: int
    """Sandboxes retired: recycled after `recycle_after` runs, after an error, an out-of-memory
    kill or a leftover process."""


class SandboxBackend(Protocol):
    name: str

    def run(self, request: RunRequest) -> RunResult: ...

    def ready(self) -> bool: ...

    def stats(self) -> SandboxStats: ...

    def environment_changed(self) -> str | None:
        """Why a sandbox started now would not be the environment this backend opened with
        (docker: the image's tag names another image), or None. Known to the backend alone;
        what the host's /usr holds under `local` is for the caller to probe."""
        ...

    def same_environment(self, settings: SandboxSettings) -> SandboxSettings:
        """`settings` for another backend that must run in this one's environment (the code
        domain's checkers): docker's name the image this backend opened with, by its id."""
        ...

    def close(self) -> None: ...
