"""How items get to scorers: the dispatch protocol, its types, and the one factory that picks a
backend from the settings. The rest of the service imports nothing else from this package."""

from __future__ import annotations

from reward_specs import Registry
from service.dispatch import local
from service.dispatch.base import Dispatcher, DispatchStats
from service.settings import Settings

__all__ = ["DispatchStats", "Dispatcher", "make_dispatcher"]


def make_dispatcher(settings: Settings, registry: Registry) -> Dispatcher:
    """The backend `settings` asks for; today the embedded default (worker processes and a
    sandbox pool in this process): the only backend so far."""
    return local.LocalDispatcher(settings, registry)
