"""Queue mode: batches go through Redis, on RQ queues, to `proctor worker`s on any machine; jobs
live in Redis too, so that any API replica answers for any job.

`dispatcher` is the API side (the `Dispatcher`), `batch` one batch's life on it, `grants` the
fair share of the workers' loops, `run_queue` the runs (`POST /v1/run`, the compatibility
routes) sent to the workers, `worker` the `proctor worker` command, `job_store` the job store,
`keys`, `timings` and `transport` what all of them share (key names, timings, connecting).
`make_queue_mode` is the one way the service makes queue mode's parts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reward_specs import Registry
from service.settings import Settings
from service.work.jobs import FinishedLimits, Runner

if TYPE_CHECKING:
    from collections.abc import Callable

    from service.dispatch import Dispatcher
    from service.queue.job_store import RedisJobStore

__all__ = ["make_queue_mode"]


def make_queue_mode(
    settings: Settings,
    registry: Registry,
    runner_for: Callable[[bytes], Runner],
    finished: FinishedLimits,
    dispatcher: Dispatcher | None = None,
) -> tuple[Dispatcher, RedisJobStore]:
    """The (dispatcher, job store) pair of queue mode for `settings` (which name a `queue_url`):
    RQ queues served by `proctor worker`s, and jobs in the same Redis (`runner_for` re-makes a
    job's runner from its request body, for a replica that takes a job over). A `dispatcher`
    given (a test's) stands in for the queue's."""
    from service.queue.dispatcher import QueueDispatcher  # rq, only once queue mode is picked
    from service.queue.job_store import RedisJobStore

    if settings.queue_url is None:
        raise ValueError("queue mode needs settings.queue_url")
    jobs = RedisJobStore(
        settings.queue_url,
        runner_for,
        settings.max_jobs,
        finished,
        settings.max_running_job_bytes,
    )
    return dispatcher or QueueDispatcher(settings, registry), jobs
