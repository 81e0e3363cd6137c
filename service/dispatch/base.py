"""The dispatch interface: how the routes get items scored, whatever runs them.

The local backend (a worker-process pool plus a thread pool, in this process) is the embedded
default; a queue backend for workers on other machines implements the same protocol, so routes,
health checks, metrics and scorers never change with the deployment. This protocol and its types
are all the rest of the service sees of a backend.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from reward_specs import Item, Outcome, Registry, Spec

__all__ = [
    "DispatchRefused",
    "DispatchStats",
    "Dispatcher",
    "MappedOnDone",
    "Overloaded",
    "Unavailable",
    "Work",
    "sandboxed_domains",
]


@dataclass(frozen=True, slots=True)
class DispatchStats:
    """A backend-neutral snapshot for /metrics (counters count since start)."""

    backend: str
    workers: int = 0
    """Worker processes alive."""
    ready_workers: int = 0
    """Of those, the ones ready to score."""
    pending: int = 0
    """Work waiting for a worker (chunks)."""
    restarts: int = 0
    """Workers replaced."""
    timeouts: int = 0
    """Items killed by the hard per-item timeout."""
    poison_items: int = 0
    """Items judged 0 for killing workers twice."""
    environment_changes: int = 0
    """Times a sandboxed domain's environment was found changed (each is counted once: its
    items are then `infra_error` until a restart)."""
    broken: str | None = None
    """Why workers cannot be started at all, if they cannot."""
    extras: Mapping[str, float] = field(default_factory=dict)
    """What only this backend knows (name -> value), exported with the name as a label."""


class DispatchRefused(Exception):
    """The backend cannot take a batch at all; the request as a whole is refused (the app
    answers `status_code` with `Retry-After`), and nothing of it was scored."""

    status_code = 503

    def __init__(self, message: str, retry_after_s: int = 1) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class Overloaded(DispatchRefused):
    """Too much work is waiting already: 429."""

    status_code = 429


class Unavailable(DispatchRefused):
    """What the backend needs is down (no live worker, the queue unreachable): 503."""

    status_code = 503


class Dispatcher(Protocol):
    async def start(self) -> None:
        """Bring workers up; return once the dispatcher accepts work (workers may still warm up)."""

    async def stop(self) -> None:
        """Stop workers; pending items resolve as `infra_error`, never silently vanish."""

    def readiness(self) -> dict[str, bool]:
        """Component name -> ready, for /readyz."""

    def environments(self) -> dict[str, str]:
        """Domain -> the content digest of the environment its items are scored in (the code
        sandbox's, `reward_specs.code.environment`), for the domains that have one, once known;
        it enters those domains' spec hashes."""

    def stats(self) -> DispatchStats:
        """The snapshot /metrics exports (any thread, cheap)."""

    async def run(self, work: Work) -> list[Outcome]:
        """Exactly one outcome per item of `work`, in order, by its deadline, whatever part of
        the dispatcher has died, each reported to `work.done` as it is had. Raises
        `DispatchRefused` (only) when the batch cannot be taken or its results cannot be had
        at all."""


def sandboxed_domains(registry: Registry) -> list[str]:
    """The domains whose items run in the sandbox (scorers with `executor="thread"`): their
    environment is the sandbox's, and its digest is part of their hash."""
    return [s.domain for s in registry if s.executor == "thread"]


@dataclass(frozen=True, slots=True)
class Work:
    """A batch to score, as a caller hands it to `Dispatcher.run`: made once by the caller
    (a request, a job, a queue worker's chunk, `proctor score`), split by the backends."""

    spec: Spec
    items: Sequence[Item]
    deadline: float
    """A `time.monotonic()` instant: every item has its outcome by then."""
    on_done: Callable[[int], None] | None = None
    """Called, from any thread, with each item's position as it gets its outcome (a job's
    progress)."""

    def done(self, position: int) -> None:
        """Report that the item at `position` has its outcome."""
        if self.on_done is not None:
            self.on_done(position)

    def part(self, positions: Sequence[int]) -> Work:
        """The items at `positions`, as a batch of their own whose `on_done` reports each by
        its position in this one."""
        on_done = None if self.on_done is None else MappedOnDone(self.on_done, positions)
        return Work(self.spec, [self.items[p] for p in positions], self.deadline, on_done)


@dataclass(frozen=True, slots=True)
class MappedOnDone:
    """An `on_done` that reports `mapping[index]` for `index`: a sub-batch's position as the
    whole batch's, or a unique item's as the count of the request's items it stands for."""

    on_done: Callable[[int], None]
    mapping: Sequence[int]

    def __call__(self, index: int) -> None:
        self.on_done(self.mapping[index])
