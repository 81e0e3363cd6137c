"""A second backend for programs that see what responses must not: the code domain's checkers.

A sandbox that has run a checker holds remnants of the reference's answers in its supervisor's
memory, which a forked program could read; a sandbox that has run a response may hold what that
response left. So checkers get their own pool, never lent to a response: `open_checker_backend`
returns it, opened on its first run (most workloads have no checker), with a small pool and,
for docker, a label of its own (closing one backend removes the containers of its label).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from sandboxes import open_backend
from sandboxes.api import RunRequest, RunResult, SandboxBackend, SandboxStats
from sandboxes.settings import SandboxSettings

__all__ = ["CHECKER_POOL_SIZE", "LazyBackend", "checker_settings", "open_checker_backend"]

CHECKER_POOL_SIZE = 2
"""Warm checker sandboxes, at most (never more than the responses' pool)."""


def checker_settings(settings: SandboxSettings) -> SandboxSettings:
    """The responses' settings for a checker pool: smaller, and (docker) its own label."""
    label = f"{settings.docker_label[:55]}-checkers"
    return settings.model_copy(
        update={"pool_size": min(CHECKER_POOL_SIZE, settings.pool_size), "docker_label": label}
    )


class LazyBackend:
    """A backend opened by its first `run` (a failure to open is raised there, each time)."""

    def __init__(self, name: str, opener: Callable[[], SandboxBackend]) -> None:
        self.name = name
        self._opener = opener
        self._backend: SandboxBackend | None = None
        self._lock = threading.Lock()
        self._closed = False

    def _opened(self) -> SandboxBackend:
        with self._lock:
            if self._closed:
                raise RuntimeError("the checker backend is closed")
            if self._backend is None:
                self._backend = self._opener()
            return self._backend

    def run(self, request: RunRequest) -> RunResult:
        return self._opened().run(request)

    def ready(self) -> bool:
        backend = self._backend
        return backend.ready() if backend is not None else not self._closed

    def stats(self) -> SandboxStats:
        backend = self._backend
        return backend.stats() if backend is not None else SandboxStats(0, 0, 0, 0, 0)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            backend, self._backend = self._backend, None
        if backend is not None:
            backend.close()


def open_checker_backend(settings: SandboxSettings) -> LazyBackend:
    """The checker pool for a service whose responses run under `settings`."""
    own = checker_settings(settings)
    return LazyBackend(settings.backend, lambda: open_backend(own))
