"""A second backend for requests that carry what responses must not see: the code domain's
checkers (the reference's answers) and `program` tests (the test program).

Such a request's data must never reach a response: not its sandbox, not its processes. So these
requests get a pool of their own, where no response runs and every untrusted program (a checker,
a `program` test's solution) is exec'd afresh by a trusted runner (a fork of the clean template,
as every step is; sandboxes/README.md):
`open_checker_backend` returns it, opened on its first run (most workloads need none), with the
responses' pool size and, for docker, a label of its own (closing one backend removes the
containers of its label). Give it the responses' backend's `same_environment(settings)`, so
that it runs what the responses' pool runs (docker: the same image, by id, whatever the tag
names by the time it opens).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from sandboxes import open_backend
from sandboxes.api import RunRequest, RunResult, SandboxBackend, SandboxStats
from sandboxes.settings import SandboxSettings

__all__ = ["LazyBackend", "checker_settings", "open_checker_backend"]


def checker_settings(settings: SandboxSettings) -> SandboxSettings:
    """The responses' settings for the checkers' pool, with (docker) its own label."""
    label = f"{settings.docker_label[:55]}-checkers"
    return settings.model_copy(update={"docker_label": label})


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

    def environment_changed(self) -> str | None:
        backend = self._backend
        return backend.environment_changed() if backend is not None else None

    def same_environment(self, settings: SandboxSettings) -> SandboxSettings:
        backend = self._backend
        return backend.same_environment(settings) if backend is not None else settings

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
