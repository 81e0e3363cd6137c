"""Long evaluations as jobs: POST /v1/jobs returns at once, GET /v1/jobs/{id} reports progress.

`JobStore` keeps jobs in this process's memory (the embedded default): they survive neither a
restart nor a second replica; in queue mode they live in Redis (`service.queue.job_store`). At most
`max_jobs` run at once (a new one beyond that is refused, with a hint of when to retry). A
finished job's results are kept as their encoded JSON (`FinishedLimits`: for `ttl_s`, at most
`count` jobs and `bytes` of results, the oldest forgotten first; a running job is never
forgotten), so the memory they hold is bounded by the settings. Progress counts items as they get
their outcomes. DELETE cancels a running job (it is then kept as `cancelled`) or forgets a
finished one.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

from reward_specs import codes
from service.core.fastjson import dump_json
from service.core.tenancy import OPEN_TENANT, tenant
from service.schemas import ErrorInfo, JobState, JobStatus, ScoreResponse

__all__ = [
    "FinishedLimits",
    "Job",
    "JobHandle",
    "JobStore",
    "JobTooLarge",
    "Jobs",
    "RunningBytes",
    "TooManyJobs",
    "encode_result",
    "status_json",
]

log = logging.getLogger(__name__)


class TooManyJobs(RuntimeError):
    def __init__(self, message: str, retry_after_s: int) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


@dataclass(frozen=True)
class FinishedLimits:
    """How much of finished jobs a store keeps: each for `ttl_s`, at most `count` of them and
    `bytes` of encoded results in all (the settings `job_ttl_s`, `max_finished_jobs`,
    `max_finished_job_bytes`). A result larger than `bytes` alone is not kept: its job fails
    with `result_too_large` instead of pushing every other job out."""

    ttl_s: float = 3600.0
    count: int = 1024
    bytes: int = 256 * 1024 * 1024


def encode_result(result: ScoreResponse, limits: FinishedLimits) -> bytes | ErrorInfo:
    """A job's result as the JSON a GET sends (kept so: a fraction of the memory of the
    objects), or the error its job fails with if it is too large to keep."""
    encoded = dump_json(result)
    if len(encoded) > limits.bytes:
        message = (
            f"the job's result is {len(encoded)} bytes, more than max_finished_job_bytes "
            f"({limits.bytes}); score it in smaller jobs"
        )
        return ErrorInfo(code=codes.RESULT_TOO_LARGE, message=message)
    return encoded


def status_json(status: JobStatus, result: bytes | None) -> bytes:
    """`status` (whose `result` is None) as JSON, with the encoded `result` put in its place
    as it is, never decoded."""
    encoded = dump_json(status)
    if result is None:
        return encoded
    # job_id, status, total and completed come first and cannot hold this text
    return encoded.replace(b'"result":null', b'"result":' + result, 1)


@dataclass
class Job:
    id: str
    total: int
    tenant: str = OPEN_TENANT
    """Whose job it is (`service.core.tenancy`): only that tenant may see or cancel it."""
    status: JobState = "queued"
    completed: int = 0
    result: bytes | None = None
    """The result as encoded JSON (`encode_result`)."""
    error: ErrorInfo | None = None
    body_bytes: int = 0
    """Bytes of the job's request, counted against the running jobs' budget."""
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
        """The job's state without its result (`view_json` has it)."""
        return JobStatus(
            job_id=self.id,
            status=self.status,
            total=self.total,
            completed=self.completed,
            error=self.error,
        )

    def view_json(self) -> bytes:
        return status_json(self.view(), self.result)


Runner = Callable[[Job], Awaitable[ScoreResponse]]


class JobHandle(Protocol):
    @property
    def id(self) -> str: ...

    def view_json(self) -> bytes:
        """The job as GET /v1/jobs/{id} answers it (`JobStatus` as JSON)."""


class Jobs(Protocol):
    """Where jobs live: this process (`JobStore`) or Redis (`service.queue.job_store`)."""

    async def start(self, total: int, runner: Runner, body: bytes = b"") -> JobHandle: ...

    async def get(self, job_id: str) -> JobHandle | None: ...

    async def delete(self, job_id: str) -> JobHandle | None: ...

    def resume(self) -> None:
        """From now on, run jobs that other processes left (where the store can have any)."""

    async def close(self) -> None: ...


class JobTooLarge(ValueError):
    """A job's request is larger than all the running jobs may hold (413: split it)."""


class RunningBytes:
    """The bytes of the requests of the jobs running in this process, held to `limit` (their
    decoded items live as long as the job): a job that would pass it waits for others to end
    (refused, with a retry hint); one larger than `limit` alone is refused outright."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0

    def admits(self, n: int) -> bool:
        return self.held + n <= self.limit

    def check(self, n: int, retry_after_s: int) -> None:
        """Raise unless a job of `n` request bytes may start now."""
        if n > self.limit:
            raise JobTooLarge(
                f"the job's request is {n} bytes, more than max_running_job_bytes "
                f"({self.limit}); split it into smaller jobs"
            )
        if not self.admits(n):
            raise TooManyJobs(
                f"the running jobs' requests hold {self.held} of max_running_job_bytes "
                f"({self.limit}); retry later",
                retry_after_s,
            )


class JobStore:
    def __init__(
        self,
        max_jobs: int = 8,
        finished: FinishedLimits = FinishedLimits(),
        max_running_bytes: int = 64 * 1024 * 1024,
    ) -> None:
        self.max_jobs = max_jobs
        self.limits = finished
        self._jobs: dict[str, Job] = {}
        self._finished: OrderedDict[str, Job] = OrderedDict()
        """Finished jobs, oldest first."""
        self._finished_bytes = 0
        self._running = RunningBytes(max_running_bytes)

    def _expire(self) -> None:
        now = time.monotonic()
        for job in list(self._finished.values()):
            age = now - (job.finished_at or now)
            over = len(self._finished) > self.limits.count
            if not over and self._finished_bytes <= self.limits.bytes and age <= self.limits.ttl_s:
                break  # the rest are younger
            self._forget(job)

    def _forget(self, job: Job) -> None:
        self._jobs.pop(job.id, None)
        if self._finished.pop(job.id, None) is not None:
            self._finished_bytes -= len(job.result or b"")

    def running(self) -> int:
        return sum(job.running for job in self._jobs.values())

    async def start(self, total: int, runner: Runner, body: bytes = b"") -> Job:
        """Start a job of `total` items from its request `body` (whose size counts against
        the running jobs' bytes; a store that can hand a job to another replica keeps it)."""
        self._expire()
        if self.running() >= self.max_jobs:
            raise TooManyJobs(
                f"{self.max_jobs} jobs are already running; retry later", self._retry_after_s()
            )
        self._running.check(len(body), self._retry_after_s())
        job = Job(id=secrets.token_hex(12), total=total, tenant=tenant(), body_bytes=len(body))
        self._running.held += job.body_bytes
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
            encoded = encode_result(await runner(job), self.limits)
            if isinstance(encoded, ErrorInfo):
                job.status, job.error = "failed", encoded
            else:
                job.status, job.result = "done", encoded
        except asyncio.CancelledError:
            if job.error is None:  # not cancelled by a client (`delete`): the service stops
                job.status = "failed"
                job.error = ErrorInfo(
                    code=codes.CANCELLED, message="the service stopped during this job"
                )
            raise
        except Exception as exc:  # recorded on the job and logged: never lost
            log.exception("job %s failed", job.id)
            job.status = "failed"
            job.error = ErrorInfo(code=codes.JOB_FAILED, message=f"{type(exc).__name__}: {exc}")
        finally:
            self._finish(job)

    def _finish(self, job: Job) -> None:
        """The job ends: its request's bytes are released and it joins the finished jobs,
        the oldest of which go if they now pass a limit."""
        job.finished_at = time.monotonic()
        self._running.held -= job.body_bytes
        if job.id in self._jobs:  # not forgotten meanwhile
            self._finished[job.id] = job
            self._finished_bytes += len(job.result or b"")
        self._expire()

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
            self._forget(job)
            return job
        job.status = "cancelled"
        job.error = ErrorInfo(code=codes.CANCELLED, message="the job was cancelled by a client")
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
