"""What the app holds while it runs, built by the app factory and reached through dependencies."""

from __future__ import annotations

from dataclasses import dataclass, field

from reward_specs import Registry, Spec
from service.dispatch.base import Dispatcher
from service.jobs import Jobs, JobStore
from service.limits import KeyLimits
from service.loading import LoadedSpecs
from service.metrics import Metrics
from service.runs import RunPool
from service.sampling import Sampler
from service.settings import Settings

__all__ = ["AppState"]


@dataclass
class AppState:
    settings: Settings
    registry: Registry
    loaded: LoadedSpecs
    dispatcher: Dispatcher
    metrics: Metrics
    limits: KeyLimits
    """Per-key requests and items in flight (`service.limits`)."""
    sampler: Sampler
    runs: RunPool
    """`POST /v1/run`'s pool (`service.runs`)."""
    jobs: Jobs = field(default_factory=JobStore)

    @property
    def specs(self) -> dict[str, Spec]:
        """The specs by name, their hashes under the environments the dispatcher scores in
        (`Dispatcher.environments`: the code sandbox's digest)."""
        return self.loaded.under(self.dispatcher.environments())
