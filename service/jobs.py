"""Long evaluations as jobs: POST /v1/jobs returns at once, GET /v1/jobs/{id} reports progress.

Jobs live in this process's memory: they survive neither a restart nor a second replica, which the
docs say. A job is scored in slices so its progress moves; its results are kept for `job_ttl_s`
after it finishes, and at most `max_jobs` are kept at once.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal

from service.schemas import ErrorInfo, JobStatus, ScoreResponse

__all__ = ["Job", "JobStore", "TooManyJobs"]

log = logging.getLogger(__name__)

JobState = Literal["queued", "running", "done", "failed"]


class TooManyJobs(RuntimeError):
    pass


@dataclass
class Job:
    id: str
    total: int
    status: JobState = "queued"
    completed: int = 0
    result: ScoreResponse | None = None
    error: ErrorInfo | None = None
    finished_at: float | None = None
    task: asyncio.Task[None] | None = field(default=None, repr=False)

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


class JobStore:
    def __init__(self, max_jobs: int = 64, ttl_s: float = 3600.0) -> None:
        self.max_jobs = max_jobs
        self.ttl_s = ttl_s
        self._jobs: dict[str, Job] = {}

    def _expire(self) -> None:
        now = time.monotonic()
        for job_id, job in list(self._jobs.items()):
            if job.finished_at is not None and now - job.finished_at > self.ttl_s:
                del self._jobs[job_id]

    def start(self, total: int, runner: Runner) -> Job:
        self._expire()
        if len(self._jobs) >= self.max_jobs:
            raise TooManyJobs(f"{self.max_jobs} jobs are already kept; retry later")
        job = Job(id=secrets.token_hex(12), total=total)
        self._jobs[job.id] = job
        job.task = asyncio.create_task(self._run(job, runner), name=f"job-{job.id}")
        return job

    async def _run(self, job: Job, runner: Runner) -> None:
        job.status = "running"
        try:
            job.result = await runner(job)
            job.status = "done"
        except asyncio.CancelledError:
            job.status = "failed"
            job.error = ErrorInfo(code="cancelled", message="the service stopped during this job")
            raise
        except Exception as exc:  # recorded on the job and logged: never lost
            log.exception("job %s failed", job.id)
            job.status = "failed"
            job.error = ErrorInfo(code="job_failed", message=f"{type(exc).__name__}: {exc}")
        finally:
            job.finished_at = time.monotonic()

    def get(self, job_id: str) -> Job | None:
        self._expire()
        return self._jobs.get(job_id)

    async def close(self) -> None:
        tasks = [j.task for j in self._jobs.values() if j.task is not None and not j.task.done()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
