"""Running untrusted, model-written code: the backends behind `sandboxes.api.SandboxBackend`.

`open_backend(settings)` starts the configured backend (`local`, `docker` or `unsafe`); its
`run(RunRequest)` is blocking and thread-safe. See sandboxes/README.md for what each isolates.
"""

from __future__ import annotations

from sandboxes import api
from sandboxes.api import *  # noqa: F403  (the contract: the names api.__all__ lists)
from sandboxes.settings import SandboxSettings

__all__ = [*api.__all__, "SandboxSettings", "open_backend"]


def open_backend(settings: SandboxSettings) -> api.SandboxBackend:
    """Start the backend `settings.backend` names, with its pool warm.

    Raises SandboxUnavailable when it cannot run here (no bubblewrap or namespaces, no Docker
    engine, no image). Call `close()` when done: it stops every supervisor and container.
    """
    if settings.backend == "local":
        from sandboxes.local import LocalBackend

        return LocalBackend(settings)
    if settings.backend == "unsafe":
        from sandboxes.local import UnsafeBackend

        return UnsafeBackend(settings)
    from sandboxes.docker_backend import DockerBackend

    return DockerBackend(settings)
