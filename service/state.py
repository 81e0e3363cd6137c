"""What the app holds while it runs, and how it is built from settings: the registry and spec
files, the dispatcher the settings pick (worker processes here, or queue mode's), the job store,
the per-key limits, the sampler and the run pool. Routes reach it through `service.http.deps`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from reward_specs import Registry, Spec, SpecError
from service.core.loading import LoadedSpecs, load_registry
from service.dispatch import Dispatcher, local
from service.http.key_limits import KeyLimits, make_limits
from service.http.metrics import Metrics
from service.queue import make_queue_mode
from service.settings import Settings
from service.work.jobs import FinishedLimits, Jobs, JobStore, Runner
from service.work.runs import RunPool, Runs
from service.work.sampling import Sampler
from service.work.scoring import Scoring

__all__ = ["AppState", "JobRunnerFrom", "build_state"]


@dataclass
class AppState:
    settings: Settings
    registry: Registry
    loaded: LoadedSpecs
    dispatcher: Dispatcher
    metrics: Metrics
    limits: KeyLimits
    """Per-key requests and items in flight (`service.http.key_limits`)."""
    sampler: Sampler
    runs: Runs
    """`POST /v1/run`'s pool (`service.work.runs`)."""
    scoring: Scoring
    """What scoring a batch needs (`service.work.scoring`): the dispatcher, registry and limits."""
    jobs: Jobs = field(default_factory=JobStore)

    @property
    def specs(self) -> dict[str, Spec]:
        """The specs by name, their hashes under the environments the dispatcher scores in
        (`Dispatcher.environments`: the code sandbox's digest)."""
        return self.loaded.under(self.dispatcher.environments())


JobRunnerFrom = Callable[[AppState, bytes], Runner]
"""What runs a job from its request body alone (a replica taking over a job in queue mode)."""


def build_state(
    settings: Settings,
    dispatcher: Dispatcher | None = None,
    job_runner_from: JobRunnerFrom | None = None,
) -> AppState:
    """Registry, specs and dispatcher for `settings` (the backend the settings pick, unless one
    is given); spec errors surface here, at start-up. `job_runner_from` is what queue mode's job
    store runs a job taken over from another replica with (the app's scoring path)."""
    registry = load_registry(settings.registry)
    loaded = LoadedSpecs(registry, settings.spec_dirs)
    specs = loaded.under({})
    if settings.default_spec not in specs:
        raise SpecError(f"default spec {settings.default_spec!r} is not among {sorted(specs)}")
    # Before the dispatcher: a worker pool's fork-server preload, set when it is made, wins.
    sampler = Sampler(settings.sample_processes, settings.item_timeout_s, settings.worker_memory_mb)
    finished = FinishedLimits(
        settings.job_ttl_s, settings.max_finished_jobs, settings.max_finished_job_bytes
    )

    def runner_for(raw: bytes) -> Runner:
        if job_runner_from is None:
            raise RuntimeError("this state was built without a job runner")
        return job_runner_from(state, raw)

    dispatcher, jobs = _backend(settings, registry, finished, runner_for, dispatcher)
    runs = _runs(settings, dispatcher)
    state = AppState(
        settings=settings,
        registry=registry,
        loaded=loaded,
        dispatcher=dispatcher,
        metrics=Metrics(
            dispatcher.stats,
            domains=[s.domain for s in registry],
            sampling=sampler.load,
            runs=runs.stats,
        ),
        sampler=sampler,
        jobs=jobs,
        runs=runs,
        scoring=Scoring.of(settings, dispatcher, registry),
        limits=make_limits(settings),
    )
    return state


def _runs(settings: Settings, dispatcher: Dispatcher) -> Runs:
    """Where runs go: in queue mode, to the workers (`service.queue.run_queue`); else (and for a
    dispatcher a test stands in with) to this host's own run pool."""
    if settings.queue_url is not None:
        from service.queue.dispatcher import QueueDispatcher  # rq, only once queue mode is picked
        from service.queue.run_queue import QueueRuns

        if isinstance(dispatcher, QueueDispatcher):
            return QueueRuns(settings, dispatcher.client, dispatcher.runs_view)
    return RunPool(settings)


def _backend(
    settings: Settings,
    registry: Registry,
    finished: FinishedLimits,
    runner_for: Callable[[bytes], Runner],
    dispatcher: Dispatcher | None,
) -> tuple[Dispatcher, Jobs]:
    """The (dispatcher, job store) pair `settings` pick: with a `queue_url`, queue mode's
    (`service.queue`); without, the embedded default (worker processes and a sandbox pool in
    this process, jobs in its memory). A `dispatcher` given stands in for the one picked."""
    if settings.queue_url is not None:
        return make_queue_mode(settings, registry, runner_for, finished, dispatcher)
    jobs = JobStore(settings.max_jobs, finished, settings.max_running_job_bytes)
    return dispatcher or local.LocalDispatcher(settings, registry), jobs
