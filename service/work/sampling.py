"""Puzzle sampling away from the API process.

A sampling request chooses its own cost (a dataset's sizes), so it never runs where the API's
work runs. Each call gets a child process of its own, forked from the worker pool's fork server
with the pinned hash seed (so its entries are the ones the workers regenerate), under
`worker_memory_mb` and killed at `item_timeout_s` or as soon as its client goes. At most
`sample_processes` run at once, and waiting calls are admitted round-robin across tenants, so a
client that floods the route waits behind its own calls, not in front of others'.

What a config gets wrong stays `InvalidReference` (the route's 404 or 422): too slow and too large
are the config's fault too, named as such. A child that dies without an answer is ours:
`Unavailable` (503).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import multiprocessing
import signal
import threading
import time
from collections.abc import AsyncIterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from reward_specs import InvalidReference
from reward_specs.hash_seed import pinned_hash_seed
from reward_specs.puzzles import PuzzleConfig, sample_prompts
from reward_specs.puzzles.bounds import check_sample_bounds
from service.core.runtime import limit_address_space
from service.dispatch.base import Unavailable
from service.dispatch.fair import FairQueue

__all__ = ["MAX_SAMPLE_BYTES", "SampleCall", "Sampler"]

MAX_SAMPLE_BYTES = 16 * 1024 * 1024
"""The most encoded entries one call may return; more is refused as `sample_too_large`."""
_POLL_S = 0.05
"""How often a waiting call looks at its client and its deadline."""


@dataclass(frozen=True, slots=True)
class SampleCall:
    """One `sample_prompts` call, as sent to its child process."""

    task: str
    config: Mapping[str, Any]
    seed: int
    count: int
    start: int
    puzzle_config: PuzzleConfig


class _Cancelled(Exception):
    """The caller went away: the child is killed and nothing is answered."""


class FairSlots:
    """At most `size` holders at once; waiters admitted round-robin across tenants (one event
    loop; not thread-safe)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._free = size
        self._waiting: FairQueue[asyncio.Future[None]] = FairQueue()

    @property
    def held(self) -> int:
        return self.size - self._free

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    @contextlib.asynccontextmanager
    async def hold(self, tenant: str) -> AsyncIterator[None]:
        if self._free > 0 and not self._waiting:
            self._free -= 1
        else:
            granted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            token = object()
            self._waiting.push(tenant, token, granted)
            try:
                await granted
            except asyncio.CancelledError:
                if granted.done() and not granted.cancelled():
                    self._release()  # granted just as the caller went: hand the slot on
                else:
                    self._waiting.discard(token)
                raise
        try:
            yield
        finally:
            self._release()

    def _release(self) -> None:
        while (waiter := self._waiting.pop()) is not None:
            if not waiter.done():
                waiter.set_result(None)
                return
        self._free += 1


class Sampler:
    """Runs `sample_prompts` calls in child processes (see the module docstring)."""

    def __init__(self, processes: int, timeout_s: float, memory_mb: int) -> None:
        self.timeout_s = timeout_s
        self.memory_mb = memory_mb
        self._slots = FairSlots(processes)
        # One thread per slot waits on its child; nothing else runs on these threads.
        self._threads = ThreadPoolExecutor(processes, thread_name_prefix="proctor-sample")
        self._mp = multiprocessing.get_context("forkserver")
        # Without a worker pool (queue mode) the fork server is the sampler's: children fork
        # with the sampling code and Reasoning Gym (which reward_specs imports at first use)
        # loaded. A pool made after this sets its own preload, which warms Reasoning Gym too.
        self._mp.set_forkserver_preload(["service.work.sampling", "reasoning_gym"])

    def load(self) -> tuple[int, int]:
        """(calls running in a child, calls waiting for one), for /metrics."""
        return self._slots.held, self._slots.waiting

    async def sample(self, tenant: str, call: SampleCall) -> list[dict[str, Any]]:
        """The entries of `call`, or `InvalidReference` (the config's fault) or `Unavailable`.
        Cancelling the awaiting task kills the child."""
        check_sample_bounds(call.task, call.config)  # up front: a refusal costs no process
        async with self._slots.hold(tenant):
            cancel = threading.Event()
            future = asyncio.get_running_loop().run_in_executor(
                self._threads, self._run, call, cancel
            )
            try:
                return await asyncio.shield(future)
            except asyncio.CancelledError:
                cancel.set()
                with contextlib.suppress(_Cancelled, InvalidReference, Unavailable):
                    await future  # the slot is free only once the child is gone
                raise

    def close(self) -> None:
        self._threads.shutdown(wait=False, cancel_futures=True)

    def _run(self, call: SampleCall, cancel: threading.Event) -> list[dict[str, Any]]:
        receiver, sender = self._mp.Pipe(duplex=False)
        process = self._mp.Process(
            target=sample_child,
            args=(sender, call, self.memory_mb),
            name="proctor-sample",
            daemon=True,
        )
        try:
            with pinned_hash_seed():
                process.start()
        finally:
            sender.close()
        try:
            return _decode(self._wait(receiver, cancel), call.task, self)
        finally:
            with contextlib.suppress(OSError, ValueError):
                process.kill()
            process.join(timeout=5.0)
            receiver.close()

    def _wait(self, receiver: Connection, cancel: threading.Event) -> bytes:
        deadline = time.monotonic() + self.timeout_s
        while not receiver.poll(_POLL_S):
            if cancel.is_set():
                raise _Cancelled
            if time.monotonic() >= deadline:
                raise InvalidReference(
                    f"generating these entries took longer than this server's item_timeout_s "
                    f"({self.timeout_s:g} s): ask for fewer entries or a smaller config",
                    "sample_timeout",
                )
        try:
            return receiver.recv_bytes(MAX_SAMPLE_BYTES)
        except EOFError:
            raise Unavailable("the puzzle sampling process died without an answer") from None
        except OSError:  # over maxlength
            raise InvalidReference(
                f"these entries are over {MAX_SAMPLE_BYTES // (1024 * 1024)} MiB encoded: ask "
                "for fewer entries or a smaller config",
                "sample_too_large",
            ) from None


def _decode(raw: bytes, task: str, sampler: Sampler) -> list[dict[str, Any]]:
    message = json.loads(raw)
    if "entries" in message:
        entries: list[dict[str, Any]] = message["entries"]
        return entries
    if message.get("code") == "sample_out_of_memory":
        raise InvalidReference(
            f"task {task!r}: generating these entries needs more than this server's "
            f"worker_memory_mb ({sampler.memory_mb} MiB): ask for fewer entries or a smaller "
            "config",
            "sample_too_large",
        )
    raise InvalidReference(message["message"], message["code"])


def sample_child(conn: Connection, call: SampleCall, memory_mb: int) -> None:
    """The child's side: one call, one message (`{"entries"}` or `{"code", "message"}`)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the service decides when children stop
    limit_address_space(memory_mb)
    message: dict[str, Any]
    try:
        entries = sample_prompts(
            call.task, call.config, call.seed, call.count, call.start, call.puzzle_config
        )
        message = {"entries": entries}
    except InvalidReference as exc:
        out_of_memory = isinstance(exc.__cause__, MemoryError)  # raised by the generator
        message = {"code": "sample_out_of_memory" if out_of_memory else exc.code}
        message["message"] = str(exc)
    except MemoryError:
        message = {"code": "sample_out_of_memory", "message": ""}
    try:
        conn.send_bytes(json.dumps(message).encode())
    except MemoryError:
        conn.send_bytes(b'{"code": "sample_out_of_memory", "message": ""}')
    conn.close()
