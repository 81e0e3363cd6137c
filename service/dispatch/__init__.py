"""How items get to scorers: the dispatch protocol, its types, and the one factory that picks a
backend from the settings. The rest of the service imports nothing else from this package."""

from __future__ import annotations

from typing import TYPE_CHECKING

from reward_specs import Registry
from reward_specs.lazy import lazy_import
from service.dispatch import processes
from service.dispatch.base import (
    Dispatcher,
    DispatchRefused,
    DispatchStats,
    Overloaded,
    Unavailable,
)
from service.settings import Settings

# The backends are imported when a service picks one (reward_specs.lazy): a pool's fork server
# and workers import this package, and need neither RQ nor the sandbox backends.
if TYPE_CHECKING:
    from service.dispatch import local, queue
else:
    local = lazy_import("service.dispatch.local")
    queue = lazy_import("service.dispatch.queue")

__all__ = [
    "DispatchRefused",
    "DispatchStats",
    "Dispatcher",
    "Overloaded",
    "Unavailable",
    "make_dispatcher",
    "prepare",
]


def make_dispatcher(settings: Settings, registry: Registry) -> Dispatcher:
    """The backend `settings` asks for: with a `queue_url`, RQ queues served by `proctor worker`s
    (service.dispatch.queue); without, the embedded default (worker processes and a sandbox pool
    in this process)."""
    if settings.queue_url is not None:
        return queue.QueueDispatcher(settings, registry)
    return local.LocalDispatcher(settings, registry)


def prepare(settings: Settings) -> None:
    """Start now what the backend `settings` pick takes longest to get ready, before the app is
    even imported: the embedded pool's fork server, which imports and warms up the scorers on one
    core while the web stack loads on the other (`processes.start_fork_server`)."""
    if settings.queue_url is None:
        processes.start_fork_server(settings.registry, settings.spec_dirs)
