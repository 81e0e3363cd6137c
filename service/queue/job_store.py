"""Jobs in Redis (queue mode): every API replica behind one Redis answers for every job, and a
job outlives the API process that took it.

A job's state is a Redis hash (`proctor:job:<id>`: status, total, completed, the result or the
error), kept `ttl_s` after it ends; every key of a job has a TTL, so none outlives its use. A
finished job joins `proctor:jobs:finished` (a sorted set by end time, its result's size beside it
in `proctor:jobs:finished-bytes`), which each end trims to the store's `FinishedLimits`, oldest
first: Redis holds at most that many finished jobs and bytes of results, whatever the replicas.
The replica that took the job runs it and holds its lease (`leases.JOB`, refreshed every
`timings.JOB_REFRESH_S`, lapsing after `timings.JOB_LEASE_TTL_S`); the request body is kept
beside it while it runs. A replica that finds a running job with no lease (its replica was
killed or stopped) takes the lease and runs the job again from the body: a job is never lost,
and its verdicts are the same, though its progress starts again from 0. A client's DELETE
reaches the running replica through a flag on the hash.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from reward_specs import codes
from service.core.tenancy import OPEN_TENANT, tenant
from service.dispatch.base import Unavailable
from service.queue import keys, leases, timings, transport
from service.schemas import ErrorInfo, JobState, JobStatus
from service.work.jobs import (
    FinishedLimits,
    Job,
    Runner,
    RunningBytes,
    TooManyJobs,
    encode_result,
    status_json,
)

__all__ = ["RedisJobStore"]

log = logging.getLogger(__name__)

_CANCELLED = ErrorInfo(code=codes.CANCELLED, message="the job was cancelled by a client")


_TRIM = """
local total = 0
for _, size in ipairs(redis.call('HVALS', KEYS[2])) do total = total + tonumber(size) end
local count = redis.call('ZCARD', KEYS[1])
while count > 0 do
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  local id, ended = oldest[1], tonumber(oldest[2])
  if count <= tonumber(ARGV[2]) and total <= tonumber(ARGV[3]) and ended >= tonumber(ARGV[1]) then
    break
  end
  total = total - tonumber(redis.call('HGET', KEYS[2], id) or '0')
  redis.call('DEL', ARGV[4] .. id)
  redis.call('ZREM', KEYS[1], id)
  redis.call('HDEL', KEYS[2], id)
  count = count - 1
end
return count
"""
"""Forget the oldest finished jobs while they pass a limit (KEYS: the finished set, the sizes;
ARGV: the earliest end kept, the count, the bytes, the prefix of a job's key)."""


@dataclass(frozen=True)
class _StoredJob:
    """A job as Redis holds it (not the running `Job` of the replica that runs it): its state,
    and its result as the encoded JSON Redis keeps."""

    id: str
    status: JobStatus
    result: bytes | None = None

    def view_json(self) -> bytes:
        return status_json(self.status, self.result)


class RedisJobStore:
    def __init__(
        self,
        url: str,
        runner_for: Callable[[bytes], Runner],
        max_jobs: int,
        finished: FinishedLimits,
        max_running_bytes: int,
        body_ttl_s: float = 86400.0,
    ) -> None:
        """`runner_for(body)` makes the job's runner from its request body (taking a job over
        needs nothing but what Redis kept). `max_jobs` counts across replicas; the running
        jobs' request bytes (`max_running_bytes`) are this process's."""
        self.client = transport.connect(url)
        self.runner_for = runner_for
        self.max_jobs = max_jobs
        self.limits = finished
        self.body_ttl_s = body_ttl_s
        self._trim = self.client.register_script(_TRIM)
        self._running = RunningBytes(max_running_bytes)
        self.owner = secrets.token_hex(8)
        self._local: dict[str, Job] = {}
        self._monitor: asyncio.Task[None] | None = None

    async def _redis(self, call: Callable[[], Any]) -> Any:
        try:
            return await asyncio.to_thread(call)
        except transport.REDIS_ERRORS as exc:
            raise Unavailable(f"the job store (Redis) is unreachable: {exc}", 5) from exc

    async def start(self, total: int, runner: Runner, body: bytes = b"") -> Job:
        if await self._redis(lambda: self.client.scard(keys.RUNNING_JOBS_KEY)) >= self.max_jobs:
            raise TooManyJobs(f"{self.max_jobs} jobs are already running; retry later", 5)
        self._running.check(len(body), 5)
        job = Job(id=secrets.token_hex(12), total=total, tenant=tenant(), body_bytes=len(body))

        def record() -> None:
            pipe = self.client.pipeline()
            pipe.hset(
                keys.job_key(job.id),
                mapping={"status": "queued", "total": total, "completed": 0, "tenant": job.tenant},
            )
            pipe.expire(keys.job_key(job.id), int(self.body_ttl_s))
            pipe.set(keys.job_body_key(job.id), body, ex=int(self.body_ttl_s))
            leases.JOB.acquire(pipe, job.id, self.owner)
            pipe.sadd(keys.RUNNING_JOBS_KEY, job.id)
            pipe.execute()

        await self._redis(record)
        self._run_here(job, runner)
        return job

    def _run_here(self, job: Job, runner: Runner) -> None:
        self._local[job.id] = job
        self._running.held += job.body_bytes
        job.task = asyncio.create_task(self._run(job, runner), name=f"job-{job.id}")

    async def _run(self, job: Job, runner: Runner) -> None:
        job.status = "running"
        beat = asyncio.create_task(self._beat(job))
        try:
            encoded = encode_result(await runner(job), self.limits)
            if isinstance(encoded, ErrorInfo):
                await self._finish(job.id, "failed", error=encoded)
            else:
                await self._finish(job.id, "done", result=encoded, completed=job.total)
        except asyncio.CancelledError:
            if job.error is _CANCELLED:  # by a client: recorded; else this replica stops
                await self._finish(job.id, "cancelled", error=job.error)
            else:  # the lease goes with it, and another replica takes the job over
                with contextlib.suppress(*transport.REDIS_ERRORS):
                    await asyncio.to_thread(leases.JOB.release, self.client, job.id)
            raise
        except Exception as exc:  # recorded on the job and logged: never lost
            log.exception("job %s failed", job.id)
            error = ErrorInfo(code=codes.JOB_FAILED, message=f"{type(exc).__name__}: {exc}")
            await self._finish(job.id, "failed", error=error)
        finally:
            beat.cancel()
            if self._local.pop(job.id, None) is not None:
                self._running.held -= job.body_bytes

    def _refresh(self, job: Job) -> Any:
        """Write the job's progress and renew its lease; the client's cancel flag, if set."""
        pipe = self.client.pipeline()
        pipe.hset(keys.job_key(job.id), mapping={"status": "running", "completed": job.completed})
        leases.JOB.acquire(pipe, job.id, self.owner)
        pipe.hget(keys.job_key(job.id), "cancel")
        return pipe.execute()[-1]

    async def _beat(self, job: Job) -> None:
        """Progress and the lease, every `timings.JOB_REFRESH_S`; a client's cancel flag stops the
        job."""
        while True:
            try:
                if await asyncio.to_thread(self._refresh, job) and job.task is not None:
                    job.status = "cancelled"
                    job.error = _CANCELLED
                    job.task.cancel()
                    return
            except transport.REDIS_ERRORS as exc:
                log.warning("job %s: cannot reach Redis (%s); it goes on", job.id, exc)
            await asyncio.sleep(timings.JOB_REFRESH_S)

    async def _finish(
        self,
        job_id: str,
        status: JobState,
        result: bytes | None = None,
        error: ErrorInfo | None = None,
        completed: int | None = None,
    ) -> None:
        """Record the job's end and add it to the finished jobs, trimmed to the limits."""
        fields: dict[bytes | bytearray | memoryview[int] | str | int | float, Any] = {
            "status": status
        }
        if result is not None:
            fields["result"] = result
        if completed is not None:
            fields["completed"] = completed
        if error is not None:
            fields["error"] = error.model_dump_json()
        limits = self.limits

        def write() -> None:
            now = time.time()
            pipe = self.client.pipeline()
            pipe.hset(keys.job_key(job_id), mapping=fields)
            pipe.expire(keys.job_key(job_id), max(1, int(limits.ttl_s)))
            pipe.delete(keys.job_body_key(job_id))
            leases.JOB.release(pipe, job_id)
            pipe.srem(keys.RUNNING_JOBS_KEY, job_id)
            pipe.zadd(keys.FINISHED_JOBS_KEY, {job_id: now})
            pipe.hset(keys.FINISHED_BYTES_KEY, job_id, len(result or b""))
            args: list[float | int | str] = [
                now - limits.ttl_s,
                limits.count,
                limits.bytes,
                keys.JOB_PREFIX,
            ]
            self._trim(
                keys=[keys.FINISHED_JOBS_KEY, keys.FINISHED_BYTES_KEY], args=args, client=pipe
            )
            pipe.execute()

        for attempt in range(30):  # a finished job's result must not be lost to a Redis blip
            try:
                await asyncio.to_thread(write)
                return
            except transport.REDIS_ERRORS as exc:
                log.warning("job %s: cannot record its end (%s); retrying", job_id, exc)
                await asyncio.sleep(min(5.0, 0.2 * 2**attempt))

    async def get(self, job_id: str) -> _StoredJob | None:
        fields = await self._redis(lambda: self.client.hgetall(keys.job_key(job_id)))
        if not fields:
            return None
        result = fields.pop(b"result", None)
        text = {k.decode(): v.decode() for k, v in fields.items()}
        if text.get("tenant", OPEN_TENANT) != tenant():
            return None  # another tenant's job is as unknown as a missing one
        if "status" not in text or "total" not in text:
            return _StoredJob(job_id, _lost(job_id, text))
        error = text.get("error")
        status = JobStatus(
            job_id=job_id,
            status=text["status"],
            total=int(text["total"]),
            completed=int(text.get("completed", 0)),
            error=ErrorInfo.model_validate_json(error) if error else None,
        )
        return _StoredJob(job_id, status, result)

    async def delete(self, job_id: str) -> _StoredJob | None:
        """Cancel a running job (wherever it runs; kept as `cancelled`) or forget a finished
        one; the job as it now stands, or None if there is no such job."""
        job = await self.get(job_id)
        if job is None:
            return None
        if job.status.status not in ("queued", "running"):
            await self._redis(lambda: self._forget(job_id))
            return job
        local = self._local.get(job_id)
        if local is not None and local.task is not None:
            local.status = "cancelled"
            local.error = _CANCELLED
            local.task.cancel()
            await asyncio.gather(local.task, return_exceptions=True)
        else:
            await self._redis(lambda: self.client.hset(keys.job_key(job_id), "cancel", 1))
            deadline = time.monotonic() + leases.JOB.ttl_s + 2 * timings.JOB_REFRESH_S
            while time.monotonic() < deadline:
                now = await self.get(job_id)
                if now is None or now.status.status == "cancelled":
                    break
                await asyncio.sleep(timings.JOB_REFRESH_S / 4)
        return await self.get(job_id) or job

    def _forget(self, job_id: str) -> None:
        pipe = self.client.pipeline()
        pipe.delete(keys.job_key(job_id))
        pipe.zrem(keys.FINISHED_JOBS_KEY, job_id)
        pipe.hdel(keys.FINISHED_BYTES_KEY, job_id)
        pipe.execute()

    async def _take_over_loop(self) -> None:
        while True:
            try:
                await self._take_over()
            except transport.REDIS_ERRORS as exc:
                log.warning("cannot look for jobs to take over (%s)", exc)
            except Exception:  # a bug of ours must not stop the loop
                log.exception("looking for jobs to take over failed; it goes on")
            await asyncio.sleep(timings.JOB_REFRESH_S)

    async def _take_over(self) -> None:
        running = await asyncio.to_thread(self.client.smembers, keys.RUNNING_JOBS_KEY)
        for raw_id in running:
            job_id = raw_id.decode() if isinstance(raw_id, bytes) else str(raw_id)
            if job_id in self._local:
                continue
            won = await asyncio.to_thread(leases.JOB.take_over, self.client, job_id, self.owner)
            if not won:
                continue  # alive elsewhere, or another replica just took it
            body = await asyncio.to_thread(self.client.get, keys.job_body_key(job_id))
            total = await asyncio.to_thread(self.client.hget, keys.job_key(job_id), "total")
            if body is None or total is None:
                error = ErrorInfo(code=codes.JOB_LOST, message="the job's request body expired")
                await self._finish(job_id, "failed", error=error)
                continue
            if not self._running.admits(len(body)):  # this replica is full: leave it to another
                await asyncio.to_thread(leases.JOB.release, self.client, job_id)
                continue
            log.warning("job %s lost its replica; running it again here", job_id)
            try:
                runner = self.runner_for(body if isinstance(body, bytes) else body.encode())
            except Exception as exc:  # noqa: BLE001 - e.g. its spec is not this replica's
                error = ErrorInfo(code=codes.JOB_FAILED, message=f"{type(exc).__name__}: {exc}")
                await self._finish(job_id, "failed", error=error)
                continue
            job = Job(id=job_id, total=int(total), body_bytes=len(body))
            self._run_here(job, runner)

    def resume(self) -> None:
        """Look for orphaned jobs from now on (at start-up: jobs of a replica that died)."""
        if self._monitor is None:
            self._monitor = asyncio.create_task(self._take_over_loop(), name="job-takeover")

    async def close(self) -> None:
        """Stop; the jobs running here are left to another replica (their leases released)."""
        tasks = [j.task for j in self._local.values() if j.task is not None]
        if self._monitor is not None:
            tasks.append(self._monitor)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self.client.close()


def _lost(job_id: str, text: dict[str, str]) -> JobStatus:
    """A job whose record in Redis is only partly there (Redis restarted and lost it, or
    evicted keys): failed, with reason `state_lost`, rather than a guess."""
    message = "this job's state was lost by the job store (Redis restarted); submit it again"
    return JobStatus(
        job_id=job_id,
        status="failed",
        total=int(text.get("total", 0)),
        completed=int(text.get("completed", 0)),
        error=ErrorInfo(code=codes.STATE_LOST, message=message),
    )
