"""`ProctorClient`: the blocking face of `AsyncProctorClient`, run on a private event loop in a
background thread, so that it works the same from plain scripts and from code that already runs
an event loop (a notebook, a trainer's async reward loop)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from types import TracebackType

import httpx

from proctor_client import _defaults
from proctor_client._async_client import AsyncJobs, AsyncProctorClient
from proctor_client._batch import ItemLike
from proctor_client._loops import LoopThread
from proctor_client._models import JobStatus, RunResult, ScoreResult

__all__ = ["Jobs", "ProctorClient"]


class _ThreadedTransport(httpx.AsyncBaseTransport):
    """A blocking transport (e.g. `httpx.WSGITransport`) used from the async core: each request
    runs in a worker thread and its body is read there."""

    def __init__(self, transport: httpx.BaseTransport) -> None:
        self._transport = transport

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        def send() -> httpx.Response:
            request.read()
            response = self._transport.handle_request(request)
            try:
                content = response.read()
            finally:
                response.close()
            return httpx.Response(response.status_code, headers=response.headers, content=content)

        return await asyncio.to_thread(send)

    async def aclose(self) -> None:
        await asyncio.to_thread(self._transport.close)


class ProctorClient:
    """A blocking client of one Proctor server; see `AsyncProctorClient` for what each argument
    and method does. `transport` may be blocking (`httpx.BaseTransport`) or async."""

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
        transport: httpx.BaseTransport | httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if transport is not None and not isinstance(transport, httpx.AsyncBaseTransport):
            transport = _ThreadedTransport(transport)
        self._loop = LoopThread("proctor-client")

        async def build() -> AsyncProctorClient:
            return AsyncProctorClient(
                base_url,
                api_key=api_key,
                timeout_s=timeout_s,
                chunk_size=chunk_size,
                max_concurrency=max_concurrency,
                max_retries=max_retries,
                max_request_bytes=max_request_bytes,
                transport=transport,
            )

        self._client = self._loop.run(build())
        self.jobs = Jobs(self._loop, self._client.jobs)

    def score(
        self,
        items: Sequence[ItemLike],
        spec: str | None = None,
        deadline_s: float | None = None,
    ) -> list[ScoreResult]:
        """One result per item, in order (`AsyncProctorClient.score`)."""
        return self._loop.run(self._client.score(items, spec=spec, deadline_s=deadline_s))

    def run(
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
        """Run one program in the server's sandbox (`AsyncProctorClient.run`)."""
        call = self._client.run(
            language,
            source,
            stdin,
            files,
            cpu_s=cpu_s,
            wall_s=wall_s,
            memory_mb=memory_mb,
            output_bytes=output_bytes,
        )
        return self._loop.run(call)

    @property
    def reached(self) -> bool:
        """Whether any request of this client has had an HTTP answer from the server."""
        return self._client.reached

    def close(self) -> None:
        self._loop.run(self._client.aclose())
        self._loop.stop()

    def __enter__(self) -> ProctorClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class Jobs:
    """`AsyncJobs`, blocking."""

    def __init__(self, loop: LoopThread, jobs: AsyncJobs) -> None:
        self._loop = loop
        self._jobs = jobs

    def submit(self, items: Sequence[ItemLike], spec: str | None = None) -> str:
        return self._loop.run(self._jobs.submit(items, spec=spec))

    def get(self, job_id: str) -> JobStatus:
        return self._loop.run(self._jobs.get(job_id))

    def wait(
        self, job_id: str, poll_s: float = 1.0, timeout_s: float | None = None
    ) -> list[ScoreResult]:
        return self._loop.run(self._jobs.wait(job_id, poll_s=poll_s, timeout_s=timeout_s))
