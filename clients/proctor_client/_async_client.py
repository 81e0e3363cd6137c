"""`AsyncProctorClient`: the SDK's one implementation of sending, retrying, chunking and
reassembling. `ProctorClient` runs it on a private event loop."""

from __future__ import annotations

import asyncio
import gc
import json
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar

import httpx
from pydantic import ValidationError

from proctor_client import _defaults, codes
from proctor_client._batch import ItemLike, as_wire_items, failed, request_body, slice_items
from proctor_client._errors import ProctorError, ProctorUnreachable
from proctor_client._models import ErrorInfo, JobStatus, RunResult, ScoreResponse, ScoreResult
from proctor_client._retry import RETRIED_ERRORS, Backoff, retry_after_s

__all__ = ["AsyncJobs", "AsyncProctorClient"]

_M = TypeVar("_M", ScoreResponse, JobStatus, RunResult)


class _Unanswered(Exception):
    """A request that got no usable answer (retries exhausted, a timeout, a 5xx): its items
    become `infra_error` results with this code, or a job call raises ProctorError."""

    def __init__(
        self, code: str, message: str, status_code: int | None = None, never_reached: bool = False
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status_code = status_code
        self.never_reached = never_reached
        """No HTTP answer at all, from a client that has never had one: raised as
        ProctorUnreachable rather than turned into `infra_error` results."""


def _raise_if_never_reached(exc: _Unanswered, url: httpx.URL) -> None:
    if exc.never_reached:
        raise ProctorUnreachable(
            f"cannot reach Proctor at {url}: {exc.message} (check the URL and that the "
            "server is running)"
        ) from exc


def _detail(response: httpx.Response) -> Any:
    try:
        body = response.json()
    except ValueError:
        return response.text[:2000]
    return body.get("detail", body) if isinstance(body, dict) else body


class AsyncProctorClient:
    """A client of one Proctor server.

    `score()` splits a call into chunks of `chunk_size` items (halved until a request body is at
    most `max_request_bytes`), sends up to `max_concurrency` of them at once and returns one
    result per item, in order. Connection errors, 429, 502, 503 and 504 are retried up to
    `max_retries` times with backoff (honouring `Retry-After`); any other
    4xx raises `ProctorError`. Items whose chunk got no answer come back `infra_error`, never as
    an exception that loses the others, once the client has had an answer from the server; until
    then, a call that cannot connect at all raises `ProctorUnreachable` (a wrong URL fails
    loudly instead of returning nothing but `infra_error`). Items that fail validation raise
    `ProctorValidationError` before anything is sent.
    """

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        timeout_s: float = _defaults.TIMEOUT_S,
        chunk_size: int = _defaults.CHUNK_SIZE,
        max_concurrency: int = _defaults.MAX_CONCURRENCY,
        max_retries: int = _defaults.MAX_RETRIES,
        max_request_bytes: int = _defaults.MAX_REQUEST_BYTES,
        transport: httpx.AsyncBaseTransport | None = None,
        backoff: Backoff | None = None,
    ) -> None:
        if chunk_size < 1 or max_concurrency < 1 or max_retries < 0 or timeout_s <= 0:
            raise ValueError(
                "chunk_size and max_concurrency must be at least 1, max_retries at least 0, "
                "timeout_s positive"
            )
        if max_request_bytes < 1024:
            raise ValueError("max_request_bytes must be at least 1024")
        headers = {"content-type": "application/json", "user-agent": "proctor-client"}
        if api_key:
            headers["authorization"] = f"Bearer {api_key}"
        self.chunk_size = chunk_size
        self.max_concurrency = max_concurrency
        self.max_retries = max_retries
        self.max_request_bytes = max_request_bytes
        self.backoff = backoff or Backoff()
        self.reached = False
        """Whether any request of this client has had an HTTP answer from the server."""
        self._http = httpx.AsyncClient(
            base_url=base_url,
            headers=headers,
            timeout=timeout_s,
            transport=transport,
            limits=httpx.Limits(max_connections=max_concurrency + 2),
        )
        self.jobs = AsyncJobs(self)

    async def __aenter__(self) -> AsyncProctorClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the client's connections."""
        await self._http.aclose()

    async def score(
        self,
        items: Sequence[ItemLike],
        spec: str | None = None,
        deadline_s: float | None = None,
    ) -> list[ScoreResult]:
        """One result per item, in order. Past `deadline_s` seconds, the items of chunks not yet
        answered are `infra_error` with code `client_deadline`; answered ones are kept."""
        validated = as_wire_items(items)
        results: list[ScoreResult | None] = [None] * len(validated)
        gate = asyncio.Semaphore(self.max_concurrency)

        async def run(start: int, chunk: list[dict[str, Any]]) -> tuple[int, list[ScoreResult]]:
            async with gate:
                return start, await self._score_chunk(chunk, spec)

        tasks = {
            asyncio.create_task(run(s.start, s.items))
            for s in slice_items(validated, self.chunk_size)
        }
        loop = asyncio.get_running_loop()
        ends_at = None if deadline_s is None else loop.time() + deadline_s
        pending = tasks
        try:
            while pending:
                wait_s = None if ends_at is None else max(0.0, ends_at - loop.time())
                done, pending = await asyncio.wait(
                    pending, timeout=wait_s, return_when=asyncio.FIRST_COMPLETED
                )
                if not done:
                    break  # the deadline
                for task in done:
                    start, chunk_results = task.result()
                    results[start : start + len(chunk_results)] = chunk_results
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        message = f"no answer within the call's deadline of {deadline_s} s"
        return [
            r if r is not None else failed([validated[i]], "client_deadline", message)[0]
            for i, r in enumerate(results)
        ]

    async def run(
        self,
        language: str,
        source: str,
        stdin: str = "",
        files: Mapping[str, str] | None = None,
        *,
        cpu_s: float | None = None,
        wall_s: float | None = None,
        memory_mb: int | None = None,
        output_bytes: int | None = None,
    ) -> RunResult:
        """Run `source` once in the server's sandbox with `stdin` (and `files`, relative path
        -> text, beside it), for a tool call during a rollout. The bounds are the server's
        (`GET /v1/limits`, `run`) unless given lower. A run that got no answer (retries
        exhausted, a timeout) is `infra_error`; a malformed one raises ProctorError (422)."""
        body: dict[str, Any] = {"language": language, "source": source, "stdin": stdin}
        if files is not None:
            body["files"] = dict(files)
        asked = {"cpu_s": cpu_s, "wall_s": wall_s, "memory_mb": memory_mb}
        asked["output_bytes"] = output_bytes
        limits = {name: value for name, value in asked.items() if value is not None}
        if limits:
            body["limits"] = limits
        try:
            response = await self._send("POST", "/v1/run", json.dumps(body).encode())
        except _Unanswered as exc:
            _raise_if_never_reached(exc, self._http.base_url)
            error = ErrorInfo(code=exc.code, message=exc.message)
            return RunResult(status="infra_error", error=error)
        return _parse(RunResult, response)

    async def _score_chunk(
        self, chunk: list[dict[str, Any]], spec: str | None
    ) -> list[ScoreResult]:
        body = request_body(chunk, spec)
        if len(body) > self.max_request_bytes and len(chunk) > 1:
            # Too large for one request: each half on its own (an item alone goes as it is).
            half = len(chunk) // 2
            first = await self._score_chunk(chunk[:half], spec)
            return first + await self._score_chunk(chunk[half:], spec)
        try:
            response = await self._send("POST", "/v1/score", body)
        except _Unanswered as exc:
            _raise_if_never_reached(exc, self._http.base_url)
            return failed(chunk, exc.code, exc.message)
        parsed = _parse(ScoreResponse, response)
        if len(parsed.results) != len(chunk):
            raise ProctorError(
                f"the server answered {len(parsed.results)} results for {len(chunk)} items"
            )
        return parsed.results

    async def _send(self, method: str, path: str, body: bytes | None = None) -> httpx.Response:
        """The first answer that is neither an error worth retrying nor a 4xx; a 4xx raises
        ProctorError, and a request that never got a usable answer raises _Unanswered."""
        attempt = 0
        while True:
            retry_after: float | None = None
            try:
                response = await self._http.request(method, path, content=body)
                self.reached = True
            except RETRIED_ERRORS as exc:
                cause = f"{type(exc).__name__}: {exc}"
                status: int | None = None
            except httpx.TimeoutException as exc:
                raise _Unanswered(
                    codes.CLIENT_TIMEOUT, f"no answer within timeout_s ({type(exc).__name__})"
                ) from exc
            else:
                status = response.status_code
                if status < 400:
                    return response
                if status not in _defaults.RETRIED_STATUSES:
                    if status < 500:
                        raise ProctorError(
                            f"{method} {path} was refused with {status}: {_detail(response)}",
                            status_code=status,
                            detail=_detail(response),
                        )
                    raise _Unanswered(
                        codes.SERVER_ERROR, f"{status}: {response.text[:500]}", status_code=status
                    )
                cause = f"{status}: {response.text[:500]}"
                retry_after = retry_after_s(response)
            if attempt >= self.max_retries:
                raise _Unanswered(
                    codes.CLIENT_RETRIES_EXHAUSTED,
                    f"no answer after {attempt + 1} attempts; last: {cause}",
                    status_code=status,
                    never_reached=not self.reached and status is None,
                )
            await asyncio.sleep(self.backoff.delay_s(attempt, retry_after))
            attempt += 1


def _parse(model: type[_M], response: httpx.Response) -> _M:
    """The reply validated straight from its bytes by pydantic's core, with the collector
    paused meanwhile: decoding a batch allocates thousands of objects, none of them garbage, and
    each collection they would set off walks the caller's whole heap (a trainer's is large)."""
    paused = gc.isenabled()
    gc.disable()
    try:
        return model.model_validate_json(response.content)
    except ValidationError as exc:
        raise ProctorError(
            f"the server's reply is not a {model.__name__}: {exc}",
            status_code=response.status_code,
        ) from exc
    finally:
        if paused:
            gc.enable()


class AsyncJobs:
    """The asynchronous endpoints: a job holds a whole evaluation on the server, which the
    caller polls; fit for batches that outlive one HTTP request."""

    def __init__(self, client: AsyncProctorClient) -> None:
        self._client = client

    async def submit(self, items: Sequence[ItemLike], spec: str | None = None) -> str:
        """Start a job for all `items` (one request); its id."""
        body = request_body(as_wire_items(items), spec)
        try:
            response = await self._client._send("POST", "/v1/jobs", body)
        except _Unanswered as exc:
            _raise_if_never_reached(exc, self._client._http.base_url)
            raise ProctorError(exc.message, status_code=exc.status_code) from exc
        job_id = response.json().get("job_id")
        if not isinstance(job_id, str):
            raise ProctorError(f"the server's reply has no job id: {response.text[:500]}")
        return job_id

    async def get(self, job_id: str) -> JobStatus:
        """The job's state and progress (and, once done, its results)."""
        try:
            response = await self._client._send("GET", f"/v1/jobs/{job_id}")
        except _Unanswered as exc:
            _raise_if_never_reached(exc, self._client._http.base_url)
            raise ProctorError(exc.message, status_code=exc.status_code) from exc
        return _parse(JobStatus, response)

    async def wait(
        self, job_id: str, poll_s: float = 1.0, timeout_s: float | None = None
    ) -> list[ScoreResult]:
        """The job's results once done. A failed or cancelled job raises ProctorError; a job not
        done within `timeout_s` raises TimeoutError (the job goes on: wait again)."""
        loop = asyncio.get_running_loop()
        ends_at = None if timeout_s is None else loop.time() + timeout_s
        while True:
            job = await self.get(job_id)
            if job.status == "done" and job.result is not None:
                return job.result.results
            if job.status in ("failed", "cancelled"):
                reason = job.error.message if job.error else "no reason given"
                raise ProctorError(f"job {job_id} {job.status}: {reason}", detail=job.error)
            if ends_at is not None and loop.time() + poll_s > ends_at:
                progress = f"{job.completed}/{job.total}"
                raise TimeoutError(f"job {job_id} is {job.status} ({progress}) after {timeout_s} s")
            await asyncio.sleep(poll_s)
