"""How items get to scorers: the dispatch protocol, its types, and the one factory that picks a
backend from the settings. The rest of the service imports nothing else from this package."""

from __future__ import annotations

from reward_specs import Registry
from service.dispatch import local, queue
from service.dispatch.base import (
    Dispatcher,
    DispatchRefused,
    DispatchStats,
    Overloaded,
    Unavailable,
)
from service.settings import Settings

__all__ = [
    "DispatchRefused",
    "DispatchStats",
    "Dispatcher",
    "Overloaded",
    "Unavailable",
    "make_dispatcher",
]


def make_dispatcher(settings: Settings, registry: Registry) -> Dispatcher:
    """The backend `settings` asks for: with a `queue_url`, RQ queues served by `proctor worker`s
    (service.dispatch.queue); without, the embedded default (worker processes and a sandbox pool
    in this process)."""
    if settings.queue_url is not None:
        return queue.QueueDispatcher(settings, registry)
    return local.LocalDispatcher(settings, registry)
