"""`ProctorClient`: the blocking face of `AsyncProctorClient`, run on a private event loop in a
background thread, so that it works the same from plain scripts and from code that already runs
an event loop (a notebook, a trainer's async reward loop)."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine
from types import TracebackType
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar

import httpx

from proctor_client import _defaults
from proctor_client._async_client import AsyncJobs, AsyncProctorClient
from proctor_client._loops import LoopThread

__all__ = ["Jobs", "ProctorClient"]

_A = TypeVar("_A")
_P = ParamSpec("_P")
_R = TypeVar("_R")


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


class _Blocking(Generic[_A]):
    """A blocking face of the async object `_inner`, whose coroutines run on `_loop`."""

    def __init__(self, loop: LoopThread, inner: _A) -> None:
        self._loop = loop
        self._inner = inner

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Name each `_blocking` method after the face that holds it (in repr, help, pickling
        by name), not after the async method it was made from."""
        super().__init_subclass__(**kwargs)
        for name, value in vars(cls).items():
            if getattr(value, "__wrapped__", None) is not None:
                value.__module__ = cls.__module__
                value.__qualname__ = f"{cls.__qualname__}.{name}"


def _blocking(
    method: Callable[Concatenate[_A, _P], Coroutine[Any, Any, _R]],
) -> Callable[Concatenate[_Blocking[_A], _P], _R]:
    """`method` of the async class, as a method of its blocking face: the same parameters,
    types and docstring, its coroutine run to the end on the face's loop."""

    def call(self: _Blocking[_A], /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        return self._loop.run(method(self._inner, *args, **kwargs))

    functools.update_wrapper(call, method)
    return call


def _blocking_doc(inner: type, lead: str) -> str:
    """`lead` (its later lines indented as a class docstring's), then the async class's whole
    docstring: a blocking face does what its async class does, and `help()` says it on both."""
    return f"{lead}\n\n    {inner.__doc__ or ''}"


class ProctorClient(_Blocking[AsyncProctorClient]):
    __doc__ = _blocking_doc(
        AsyncProctorClient,
        "A blocking client of one Proctor server: `AsyncProctorClient`, run on a loop of its\n"
        "    own. `transport` may be blocking (`httpx.BaseTransport`) or async.",
    )

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
        loop = LoopThread("proctor-client")

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

        super().__init__(loop, loop.run(build()))
        self.jobs = Jobs(loop, self._inner.jobs)

    score = _blocking(AsyncProctorClient.score)
    run = _blocking(AsyncProctorClient.run)

    @property
    def reached(self) -> bool:
        """Whether any request of this client has had an HTTP answer from the server."""
        return self._inner.reached

    def close(self) -> None:
        """Close the connections, then the client's loop and its thread."""
        self._loop.run(self._inner.aclose())
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


class Jobs(_Blocking[AsyncJobs]):
    __doc__ = _blocking_doc(AsyncJobs, "`AsyncJobs`, blocking (a client's `jobs`).")

    submit = _blocking(AsyncJobs.submit)
    get = _blocking(AsyncJobs.get)
    wait = _blocking(AsyncJobs.wait)
