"""Long evaluations as jobs: POST /v1/jobs returns at once, GET /v1/jobs/{id} reports progress.

`JobStore` keeps jobs in this process's memory (the embedded default): they survive neither a
restart nor a second replica; in queue mode they live in Redis (`service.jobs_redis`). At most
`max_jobs` run at once (a new one beyond that is refused, with a hint of when to retry); a
finished job's results are kept for `ttl_s`, and at most `max_finished` of them (the oldest are
forgotten first). Progress counts items as they get their outcomes. DELETE cancels a running job
(it is then kept as `cancelled`) or forgets a finished one.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

from service.schemas import ErrorInfo, JobState, JobStatus, ScoreResponse
from service.tenancy import OPEN_TENANT, tenant

__all__ = ["Job", "JobHandle", "JobStore", "Jobs", "TooManyJobs"]

log = logging.getLogger(__name__)


class TooManyJobs(RuntimeError):
    def __init__(self, message: str, retry_after_s: int) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


@dataclass
class Job:
    id: str
    total: int
    tenant: str = OPEN_TENANT
    """Whose job it is (`service.tenancy`): only that tenant may see or cancel it."""
    status: JobState = "queued"
    completed: int = 0
    result: ScoreResponse | None = None
    error: ErrorInfo | None = None
    started_at: float = field(default_factory=time.monotonic)
    finished_at: float | None = None
    task: asyncio.Task[None] | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def running(self) -> bool:
        return self.finished_at is None

    def advance(self, n: int) -> None:
        """`n` more items have their outcome (called from any thread)."""
        with self._lock:
            self.completed = min(self.total, self.completed + n)

    def view(self) -> JobStatus:
        return JobStatus(
            job_id=self.id,
            status=self.status,
            total=self.total,
            completed=self.completed,
            result=self.result,
            error=self.error,
        )


Runner = Callable[[Job], Awaitable[ScoreResponse]]


class JobHandle(Protocol):
    @property
    def id(self) -> str: ...

    def view(self) -> JobStatus: ...


class Jobs(Protocol):
    """Where jobs live: this process (`JobStore`) or Redis (`service.jobs_redis`)."""

    async def start(self, total: int, runner: Runner, body: bytes = b"") -> JobHandle: ...

    async def get(self, job_id: str) -> JobHandle | None: ...

    async def delete(self, job_id: str) -> JobHandle | None: ...

    def resume(self) -> None:
        """From now on, run jobs that other processes left (where the store can have any)."""

    async def close(self) -> None: ...


class JobStore:
    def __init__(self, max_jobs: int = 64, ttl_s: float = 3600.0, max_finished: int = 1024) -> None:
        self.max_jobs = max_jobs
        self.ttl_s = ttl_s
        self.max_finished = max_finished
        self._jobs: dict[str, Job] = {}

    def _expire(self) -> None:
        now = time.monotonic()
        finished = [j for j in self._jobs.values() if j.finished_at is not None]
        finished.sort(key=lambda j: j.finished_at or 0.0)
        excess = len(finished) - self.max_finished
        for n, job in enumerate(finished):
            if n < excess or now - (job.finished_at or now) > self.ttl_s:
                del self._jobs[job.id]

    def running(self) -> int:
        return sum(job.running for job in self._jobs.values())

    async def start(self, total: int, runner: Runner, body: bytes = b"") -> Job:
        """Start a job of `total` items; `body` (its request) is what a store that can hand a
        job to another replica keeps (`RedisJobStore`), unused here."""
        self._expire()
        if self.running() >= self.max_jobs:
            raise TooManyJobs(
                f"{self.max_jobs} jobs are already running; retry later", self._retry_after_s()
            )
        job = Job(id=secrets.token_hex(12), total=total, tenant=tenant())
        self._jobs[job.id] = job
        job.task = asyncio.create_task(self._run(job, runner), name=f"job-{job.id}")
        return job

    def _retry_after_s(self) -> int:
        """A hint for a refused client: about how long the oldest running job has run so far
        (jobs of one evaluation tend to be alike), between 1 s and a minute."""
        now = time.monotonic()
        ages = [now - j.started_at for j in self._jobs.values() if j.running]
        return int(min(60.0, max(1.0, max(ages, default=1.0))))

    async def _run(self, job: Job, runner: Runner) -> None:
        job.status = "running"
        try:
            job.result = await runner(job)
            job.status = "done"
        except asyncio.CancelledError:
            if job.error is None:  # not cancelled by a client (`delete`): the service stops
                job.status = "failed"
                job.error = ErrorInfo(
                    code="cancelled", message="the service stopped during this job"
                )
            raise
        except Exception as exc:  # recorded on the job and logged: never lost
            log.exception("job %s failed", job.id)
            job.status = "failed"
            job.error = ErrorInfo(code="job_failed", message=f"{type(exc).__name__}: {exc}")
        finally:
            job.finished_at = time.monotonic()

    async def get(self, job_id: str) -> Job | None:
        return self._get(job_id)

    def _get(self, job_id: str) -> Job | None:
        """The job, if it is the calling tenant's (another's is as unknown as a missing one)."""
        self._expire()
        job = self._jobs.get(job_id)
        return job if job is not None and job.tenant == tenant() else None

    async def delete(self, job_id: str) -> Job | None:
        """Cancel a running job (kept, as `cancelled`, for `ttl_s`) or forget a finished one;
        the job as it now stands, or None if there is no such job."""
        job = self._get(job_id)
        if job is None:
            return None
        if not job.running:
            del self._jobs[job_id]
            return job
        job.status = "cancelled"
        job.error = ErrorInfo(code="cancelled", message="the job was cancelled by a client")
        if job.task is not None:
            job.task.cancel()
            await asyncio.gather(job.task, return_exceptions=True)
        return job

    def resume(self) -> None:
        pass  # jobs in this process's memory die with it: none are ever left

    async def close(self) -> None:
        tasks = [j.task for j in self._jobs.values() if j.task is not None and not j.task.done()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
