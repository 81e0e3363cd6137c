"""How items get to scorers: the dispatch protocol and its types, and the embedded backend
(`local`: worker processes and a sandbox pool in this process).

Its modules are imported directly where they serve: `base` (the protocol, for the service and
queue mode), `fair` and `threads` (fair queues, for sampling, runs and queue mode's grants),
`outcomes` (queue mode's batches resolve items as the pool does), and `local` (made by the app
factory's state, `service.state`, and hosted by queue mode's worker, `service.queue.worker`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from reward_specs.lazy import lazy_import
from service.dispatch import processes
from service.dispatch.base import (
    Dispatcher,
    DispatchRefused,
    DispatchStats,
    Overloaded,
    Unavailable,
    Work,
)
from service.settings import Settings

# The embedded backend is imported when a service picks it (reward_specs.lazy): a pool's fork
# server and workers import this package, and need neither RQ nor the sandbox backends.
if TYPE_CHECKING:
    from service.dispatch import local
else:
    local = lazy_import("service.dispatch.local")

__all__ = [
    "DispatchRefused",
    "DispatchStats",
    "Dispatcher",
    "Overloaded",
    "Unavailable",
    "Work",
    "local",
    "prepare",
]


def prepare(settings: Settings) -> None:
    """Start now what the backend `settings` pick takes longest to get ready, before the app is
    even imported: the embedded pool's fork server, which imports and warms up the scorers on one
    core while the web stack loads on the other (`processes.start_fork_server`)."""
    if settings.queue_url is None:
        processes.start_fork_server(settings.registry, settings.spec_dirs)
