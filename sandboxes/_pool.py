"""The one implementation of `SandboxBackend`: a pool of warm supervisors (their wire: `frames`).

Each backend subclasses `SupervisorPool` and only says how to start one sandbox (`_start`, which
returns a `Channel`): a bubblewrap jail, a plain process or a container. The pool keeps `size` of
them warm, lends one per request, and replaces it in the background after `recycle_after`
requests, after an error, an out-of-memory kill or a leftover process. Exactly one thread talks to
a given supervisor at a time, and only the supervisor reaps the run's processes: the service never
waits on a sandboxed child itself.
"""

from __future__ import annotations

import logging
import threading
import time
from abc import ABC, abstractmethod
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from sandboxes.api import (
    ExecutionResult,
    RunRequest,
    RunResult,
    SandboxError,
    SandboxStats,
    SandboxUnavailable,
)
from sandboxes.frames import (
    BlobCache,
    FrameBuffer,
    bootstrap_payload,
    decode_result,
    encode_request,
)
from sandboxes.settings import SandboxSettings

log = logging.getLogger("sandboxes")


class _Unsent(Exception):
    """The request could not be sent to a supervisor: nothing of it ran."""


class Channel(Protocol):
    """One started sandbox with its supervisor, as seen from the service."""

    def send(self, data: bytes) -> None: ...

    def recv(self, timeout: float) -> bytes:
        """Some bytes of the supervisor's stdout; b"" on end of stream; raises TimeoutError."""
        ...

    def died_of_oom(self) -> bool:
        """After the stream ended: was the sandbox killed for memory (container OOM)?"""
        ...

    def close(self) -> None:
        """Kill the sandbox and release everything it holds. Idempotent."""
        ...


class Supervisor:
    """A `Channel` plus the protocol state: one request at a time, by one thread at a time."""

    def __init__(self, channel: Channel, start_timeout: float) -> None:
        self.channel = channel
        self.runs = 0
        self.blobs = BlobCache()
        self._frames = FrameBuffer()
        try:
            if not getattr(channel, "bootstrapped", False):  # a channel may do it itself
                channel.send(bootstrap_payload())
            hello = self._read(time.monotonic() + start_timeout)
        except BaseException:
            channel.close()
            raise
        if hello is None or hello.get("kind") != "ready":
            channel.close()
            raise SandboxUnavailable(f"the sandbox supervisor did not start: {hello!r}")

    def _read(self, deadline: float) -> dict[str, Any] | None:
        while True:
            frame = self._frames.next()
            if frame is not None:
                return frame
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            data = self.channel.recv(left)
            if not data:
                return None
            self._frames.feed(data)

    def run(
        self, request: RunRequest, payload: bytes, margin: float, program_can_kill: bool
    ) -> tuple[RunResult, bool]:
        """Run one request (`payload`: it encoded with `encode_request(request, self.blobs)`);
        returns the result and whether this sandbox must be replaced."""
        self.runs += 1
        lim = request.limits
        budget = lim.wall_cap_s + (lim.build_cpu_s * 2 + 1 if request.build is not None else 0)
        deadline = time.monotonic() + budget + margin
        try:
            self.channel.send(payload)
        except OSError as exc:
            raise _Unsent(f"{type(exc).__name__}: {exc}") from exc
        build: ExecutionResult | None = None
        results: list[ExecutionResult] = []
        while True:
            try:
                frame = self._read(deadline)
            except TimeoutError:
                raise SandboxError(
                    f"sandbox did not answer within {budget + margin:.0f} s"
                ) from None
            if frame is None:
                return self._died(request, build, results, program_can_kill), True
            kind = frame.get("kind")
            if kind == "result":
                result = decode_result(frame.get("result"))
                if frame.get("index") == -1:
                    build = result
                else:
                    results.append(result)
            elif kind == "done":
                if len(results) != len(request.executions):
                    raise SandboxError("supervisor finished with results missing")
                recycle = bool(frame.get("recycle"))
                return RunResult(executions=tuple(results), build=build), recycle
            elif kind == "error":
                raise SandboxError(f"sandbox supervisor failed: {frame.get('message')}")
            else:
                raise SandboxError(f"supervisor sent an unknown frame kind {kind!r}")

    def _died(
        self,
        request: RunRequest,
        build: ExecutionResult | None,
        results: list[ExecutionResult],
        program_can_kill: bool,
    ) -> RunResult:
        """The supervisor's stream ended mid-request. Where the program could have killed it (it
        runs as the same user), that is the program's doing: the step in progress gets a verdict
        and the rest are skipped. Elsewhere it is our failure."""
        oom = self.channel.died_of_oom()
        if not (program_can_kill or oom):
            raise SandboxError("the sandbox supervisor died during a run")
        reason = (
            b"sandbox: out of memory (the sandbox was killed)"
            if oom
            else b"sandbox: the program killed its supervisor"
        )
        dead = ExecutionResult(
            status="memory" if oom else "runtime_error", stderr=reason, stopped=True
        )
        skipped = ExecutionResult(status="skipped")
        if request.build is not None and build is None:
            return RunResult(executions=tuple(skipped for _ in request.executions), build=dead)
        rest = len(request.executions) - len(results)
        tail = [dead] + [skipped] * (rest - 1) if rest > 0 else []
        return RunResult(executions=(*results, *tail), build=build)

    def close(self) -> None:
        self.channel.close()


class _Waiter:
    """A thread queued for a supervisor; served first come, first served."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.supervisor: Supervisor | None = None
        self.error: SandboxError | None = None


class SupervisorPool(ABC):
    """`size` warm supervisors; `run()` is thread-safe and blocks until one is free.

    Requests are served in arrival order: a supervisor coming back goes straight to the longest
    waiting thread (a plain queue lets a thread that just returned one take it again, starving
    others). Waiting has no time limit while supervisors are alive or starting,
    since a busy pool is not an error; it fails when none can be started or the pool closes."""

    name: str
    """The backend's name in `SandboxSettings.backend`, in logs and thread names."""

    _supervisor_extra: dict[str, Any] = {}  # noqa: RUF012 - never changed but by the tests
    """Test-only keys (`supervisor.config._TEST_ONLY_KEYS`) the configuration of every supervisor
    of a pool opened while the tests set this (tests/test_sandbox_remnants.py) gets; no setting
    reaches it. Each pool keeps what it found when it opened."""

    def __init__(self, settings: SandboxSettings, *, program_can_kill_supervisor: bool) -> None:
        """`settings` gives the size and the supervisors' lifetimes. A subclass sets up what its
        `_start` needs first: the first supervisor starts here, in the caller's thread, so that
        an unusable backend fails right here."""
        self._settings = settings
        self._supervisor_extra = dict(self._supervisor_extra)
        self._recycle_after = settings.recycle_after
        self._start_timeout = settings.start_timeout_s
        self._margin = settings.answer_margin_s
        self._program_can_kill = program_can_kill_supervisor
        self._idle: deque[Supervisor] = deque()
        self._waiters: deque[_Waiter] = deque()
        self._lock = threading.Lock()
        self._live: set[Supervisor] = set()
        self._pending = 0
        self._closed = False
        self._started = self._retired = 0
        self._last_error: BaseException | None = None
        size = self._size = settings.pool_size
        self._starter = ThreadPoolExecutor(
            max_workers=min(size, 4), thread_name_prefix=f"sandbox-{self.name}-start"
        )
        first = self._new_supervisor()
        self._give(first)
        for _ in range(size - 1):
            self._refill()

    @abstractmethod
    def _start(self) -> Channel:
        """Start one sandbox and its supervisor (a container, a jail); called from any thread."""

    def _after_close(self) -> None:  # noqa: B027 - optional: most backends hold nothing more
        """Once every supervisor is stopped: release what the backend holds beyond them."""

    # -- lifecycle ---------------------------------------------------------------------------------

    def _new_supervisor(self) -> Supervisor:
        sup = Supervisor(self._start(), self._start_timeout)
        with self._lock:
            if self._closed:
                sup.close()
                raise SandboxUnavailable("the sandbox backend is closed")
            self._live.add(sup)
            self._started += 1
        return sup

    def _refill(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._pending += 1
        self._starter.submit(self._refill_job)

    def _refill_job(self) -> None:
        try:
            for attempt in range(3):
                if self._closed:
                    return
                try:
                    sup = self._new_supervisor()
                except (SandboxError, OSError) as exc:
                    if self._closed:
                        return
                    log.warning(
                        "sandbox %s: start failed (attempt %d): %s", self.name, attempt, exc
                    )
                    self._last_error = exc
                    time.sleep(0.5 * (attempt + 1))
                    continue
                self._last_error = None
                self._give(sup)
                return
        finally:
            with self._lock:
                self._pending -= 1
                if not self._live and self._pending == 0:
                    self._fail_waiters(
                        SandboxUnavailable(f"no sandbox could be started: {self._last_error}")
                    )

    def _retire(self, sup: Supervisor) -> None:
        with self._lock:
            self._live.discard(sup)
            self._retired += 1
        sup.close()

    def stats(self) -> SandboxStats:
        with self._lock:
            return SandboxStats(
                self._size, len(self._live), len(self._idle), self._started, self._retired
            )

    # -- use ---------------------------------------------------------------------------------------

    def _give(self, sup: Supervisor) -> None:
        """A free supervisor: to the longest waiting thread, else to the idle list."""
        with self._lock:
            if self._waiters:
                waiter = self._waiters.popleft()
                waiter.supervisor = sup
                waiter.event.set()
            else:
                self._idle.append(sup)

    def _fail_waiters(self, error: SandboxError) -> None:
        """Under the lock: wake every waiting thread with `error`."""
        while self._waiters:
            waiter = self._waiters.popleft()
            waiter.error = error
            waiter.event.set()

    def _checkout(self) -> Supervisor:
        with self._lock:
            if self._closed:
                raise SandboxUnavailable("the sandbox backend is closed")
            if self._idle and not self._waiters:
                return self._idle.popleft()
            if not self._live and self._pending == 0:
                raise SandboxUnavailable(f"no sandbox could be started: {self._last_error}")
            waiter = _Waiter()
            self._waiters.append(waiter)
        waiter.event.wait()
        if waiter.error is not None:
            raise waiter.error
        assert waiter.supervisor is not None
        return waiter.supervisor

    def run(self, request: RunRequest) -> RunResult:
        # A sandbox found dead when the request is sent to it (its container removed or killed
        # from outside while idle) ran nothing: the request goes to another. Each dead one is
        # retired as it is found, so after as many tries as the pool holds, the next sandbox is
        # one started since (every idle one could have been killed at once).
        attempts = self._size + 1
        for attempt in range(attempts):
            try:
                return self._run_once(request)
            except _Unsent as exc:
                if attempt + 1 == attempts:
                    raise SandboxError(f"sandbox {self.name} failed: {exc}") from exc
                log.warning("sandbox %s was dead before its request: %s; retrying", self.name, exc)
        raise AssertionError("unreachable")

    def _run_once(self, request: RunRequest) -> RunResult:
        sup = self._checkout()
        try:
            # After checkout: what is sent depends on what this supervisor already holds.
            payload = encode_request(request, sup.blobs)
        except BaseException:  # a malformed request (ValueError): the caller's bug
            if self._closed:
                self._retire(sup)
            else:
                self._give(sup)
            raise
        recycle = True
        try:
            result, recycle = sup.run(request, payload, self._margin, self._program_can_kill)
        except (OSError, ValueError) as exc:
            raise SandboxError(f"sandbox {self.name} failed: {type(exc).__name__}: {exc}") from exc
        finally:
            if recycle or sup.runs >= self._recycle_after or self._closed:
                self._retire(sup)
                self._refill()
            else:
                self._give(sup)
        return result

    def environment_changed(self) -> str | None:
        """None: a backend that can tell (docker) says otherwise."""
        return None

    def same_environment(self, settings: SandboxSettings) -> SandboxSettings:
        """`settings` as they are: the host's environment is every such backend's."""
        return settings

    def ready(self) -> bool:
        """Open, with a supervisor alive or being started (a replacement counts)."""
        with self._lock:
            return not self._closed and (bool(self._live) or self._pending > 0)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            live = list(self._live)
            self._live.clear()
            self._idle.clear()
            self._fail_waiters(SandboxUnavailable("the sandbox backend is closed"))
        self._starter.shutdown(wait=True, cancel_futures=True)
        for sup in live:
            sup.close()
        self._after_close()
