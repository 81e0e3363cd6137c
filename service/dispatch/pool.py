"""A pool of scoring worker processes that never loses an item.

One manager thread owns every worker: it sends chunks to idle workers, reads their outcomes,
reaps dead workers and enforces timeouts, all from one `multiprocessing.connection.wait` loop, so
no process state is ever read from two threads; the work it holds (batches, their pending chunks,
the outcomes so far) is its `ledger.Ledger`. A worker sends its outcomes in batches (at the end of
a chunk, or every `FLUSH_S` within a long one) and publishes the item it is scoring, and since
when, in a small shared array: so IPC costs one message per chunk, yet after a death or a timeout
the pool knows exactly which item was running. Callers `submit` a batch and get a
`concurrent.futures.Future` that always resolves with exactly one `Outcome` per task:

- a worker that dies mid-chunk is replaced; the item it was scoring is retried once, and an item
  that kills a worker twice is judged 0 as a poison item; the rest of its chunk is requeued;
- an item that runs past `item_timeout_s` has its worker killed and replaced, and is judged 0
  with reason `timeout` (the verifiers' own timeouts normally fire long before);
- items not finished by the batch's deadline are `infra_error` (`deadline_exceeded`);
- if workers cannot even start, pending items are `infra_error` (`workers_unavailable`);
- an item that cannot be pickled for a worker is `invalid`, alone: its chunk goes on without it;
- if the manager itself crashes, or its thread is gone or stalled (no heartbeat for `stall_s`),
  a new one takes over: the workers are replaced, the items held are retried once and then
  `infra_error` (`pool_crashed`). A superseded manager that wakes up leaves at once.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any

from reward_specs import Item, Outcome, codes
from reward_specs.judge.client import JudgeSetup
from service.dispatch import processes
from service.dispatch.base import DispatchStats
from service.dispatch.ledger import Ledger
from service.dispatch.outcomes import OutcomeLedger
from service.dispatch.pool_state import Batch, PoolStats, WorkerSlot

__all__ = ["WorkerPool"]

log = logging.getLogger(__name__)

_START_FAILURES_BEFORE_BROKEN = 5
_CRASH_WINDOW_S = 60.0
"""Manager crashes within this window count towards the back-off before the next manager."""
STALL_S = 60.0
"""A manager whose loop has not come round for this long is taken to be wedged and replaced (an
iteration normally takes well under a second; the longest waits in it are a few seconds)."""


class WorkerPool:
    def __init__(
        self,
        size: int,
        *,
        registry_path: str,
        spec_dirs: Sequence[Path] = (),
        item_timeout_s: float = 30.0,
        memory_mb: int = 4096,
        chunk_size: int = 0,
        judges: JudgeSetup | None = None,
    ) -> None:
        self.size = size
        self.judges = judges
        self.registry_path = registry_path
        self.spec_dirs = tuple(spec_dirs)
        self.item_timeout_s = item_timeout_s
        self.memory_mb = memory_mb
        self._mp = processes.fork_server_context()
        self._inbox: queue.SimpleQueue[Batch | None] = queue.SimpleQueue()
        self._wake_r, self._wake_w = self._mp.Pipe(duplex=False)
        self._workers: list[WorkerSlot] = []
        self._ledger = Ledger(size, chunk_size)
        self._start_failures = 0
        self._next_spawn_at = 0.0
        self._stats = PoolStats()
        self._thread: threading.Thread | None = None
        self._thread_lock = threading.Lock()
        self._generation = 0
        self._beat = time.monotonic()
        self.stall_s = STALL_S
        self._crashes: deque[float] = deque()
        self._stopping = False
        self._spawning = False

    # ------------------------------------------------------------------ public, any thread

    def start(self) -> None:
        """Start the fork server and the manager, and return: the manager spawns the workers
        (`_top_up`), which are ready once they have warmed up (`ready`); batches submitted
        meanwhile wait for them."""
        processes.start_fork_server(self.registry_path, self.spec_dirs)
        self._start_manager(recovering=False)

    def heal(self) -> bool:
        """Start a new manager if the last one is gone or stalled (any thread; cheap when all is
        well). True if one had to be started."""
        with self._thread_lock:
            thread = self._thread
            if thread is None or self._stopping:
                return False
            # waiting for the fork server to fork (its warm-up, on a first spawn) is no stall
            stalled = not self._spawning and time.monotonic() - self._beat > self.stall_s
            if thread.is_alive() and not stalled:
                return False
            log.error(
                "worker pool manager is %s; starting a new one", "stalled" if stalled else "gone"
            )
            self._start_manager(recovering=True)
            return True

    def _start_manager(self, recovering: bool) -> None:
        self._generation += 1
        self._beat = time.monotonic()
        self._thread = threading.Thread(
            target=self._run,
            args=(self._generation, recovering),
            name=f"proctor-pool-{self._generation}",
            daemon=True,
        )
        self._thread.start()

    def submit(
        self,
        spec_name: str,
        items: Sequence[Item],
        deadline: float,
        costs: Sequence[float] | None = None,
        on_done: Callable[[int], None] | None = None,
        tenant: str = "",
    ) -> Future[list[Outcome]]:
        """Score `items` under spec `spec_name`; `deadline` is a `time.monotonic()` instant.

        `costs`, one estimate per item in any unit, orders the work: the costliest items go out
        first, in chunks of about equal cost, so the batch ends with cheap ones spread over every
        worker rather than with one slow item on one worker (see `ledger.plan_chunks`). `on_done`
        is called from the manager thread with each position as it gets its outcome. Chunks
        go to workers round-robin across tenants, then across their batches (`fair`)."""
        if costs is not None and len(costs) != len(items):
            raise ValueError(f"{len(costs)} costs for {len(items)} items")
        future: Future[list[Outcome]] = Future()
        if not items:
            future.set_result([])
            return future
        if self._stopping:
            future.set_exception(RuntimeError("the worker pool is stopped"))
            return future
        outcomes = OutcomeLedger(len(items), on_done)
        batch = Batch(spec_name, items, deadline, future, outcomes, costs, tenant)
        self._inbox.put(batch)
        self.heal()
        self._wake()
        return future

    def stats(self) -> DispatchStats:
        """The local backend's snapshot, as far as the pool knows it (any thread)."""
        counts = self._stats
        return DispatchStats(
            backend="local",
            workers=len(self._workers),
            ready_workers=sum(w.ready for w in self._workers),
            pending=len(self._ledger.pending),
            restarts=counts.restarts,
            timeouts=counts.timeouts,
            poison_items=counts.poison_items,
            broken=counts.broken,
            extras={"manager_restarts": counts.manager_restarts},
        )

    def ready(self) -> bool:
        self.heal()
        return self._stats.broken is None and any(w.ready for w in self._workers)

    def worker_pids(self) -> list[int]:
        return [w.process.pid for w in self._workers if w.process.pid is not None and w.ready]

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the manager and the workers within about `timeout` seconds (after the worker
        start it may be in), even if the manager is wedged or gone (then the workers are killed
        from here)."""
        self._stopping = True
        self._inbox.put(None)
        self._wake()
        thread = self._thread
        if thread is not None and (not self._join_manager(thread, timeout) or self._workers):
            log.error("worker pool manager did not stop in %.1fs; killing workers", timeout)
            self._kill_workers()

    def _join_manager(self, thread: threading.Thread, timeout: float) -> bool:
        """Wait up to `timeout` seconds for the stopping manager to end, counted from the end
        of the worker start it may be in (a first start waits for the fork server's warm-up: a
        manager in it is busy, not wedged), and never longer than `stall_s`. True if it ended."""
        now = time.monotonic()
        give_up, end = now + self.stall_s, now + timeout
        while thread.is_alive():
            now = time.monotonic()
            if self._spawning:
                end = now + timeout
            if now >= min(end, give_up):
                return False
            thread.join(min(0.05, end - now))
        return True

    # ------------------------------------------------------------------ manager thread only

    def _wake(self) -> None:
        # If the manager is gone, submit() already refuses new work; nothing to wake.
        with contextlib.suppress(OSError, ValueError):
            self._wake_w.send_bytes(b"")

    def _spawn(self) -> WorkerSlot:
        self._spawning = True
        try:
            return processes.spawn(
                self._mp, self.registry_path, self.spec_dirs, self.memory_mb, self.judges
            )
        finally:
            self._spawning = False
            self._beat = time.monotonic()

    def _run(self, generation: int, recovering: bool) -> None:
        """The manager: serves until stopped; after a crash of its own it recovers and goes on."""
        try:
            while generation == self._generation:
                if recovering:
                    self._recover()
                try:
                    self._serve(generation)
                    return
                except Exception:  # a bug of ours: the items held are retried, never lost
                    log.exception("worker pool manager crashed; recovering")
                    recovering = True
        finally:
            if generation == self._generation:
                self._shutdown_workers()

    def _serve(self, generation: int) -> None:
        while generation == self._generation and self._drain_inbox():
            self._beat = time.monotonic()
            self._top_up()
            self._assign()
            waitables: list[Any] = [self._wake_r]
            for worker in self._workers:
                waitables += [worker.conn, worker.process.sentinel]
            busy = any(w.chunk is not None for w in self._workers) or self._ledger.batches
            ready = wait(waitables, timeout=0.05 if busy else 0.5)
            if generation != self._generation:
                return  # superseded while waiting: the state is the new manager's
            for waitable in ready:
                self._on_ready(waitable)
            self._check_timeouts()
            self._check_deadlines()

    def _recover(self) -> None:
        """After a manager crash: the workers' state is unknown, so they are replaced; each
        batch's missing items are retried once, then resolved as `infra_error`."""
        self._stats.manager_restarts += 1
        now = time.monotonic()
        self._crashes.append(now)
        while self._crashes and now - self._crashes[0] > _CRASH_WINDOW_S:
            self._crashes.popleft()
        self._kill_workers()
        self._ledger.retry_after_crash()
        time.sleep(min(2.0, 0.05 * 2 ** len(self._crashes)))  # a crash loop must not spin

    def _top_up(self) -> None:
        """Keep `size` workers, spawning with back-off after failed starts (a forkserver that
        died is restarted by multiprocessing on the next spawn)."""
        while (
            len(self._workers) < self.size
            and self._stats.broken is None
            and not self._stopping
            and time.monotonic() >= self._next_spawn_at
        ):
            try:
                self._workers.append(self._spawn())
            except OSError as exc:
                self._start_failures += 1
                self._next_spawn_at = time.monotonic() + min(2.0, 0.1 * 2**self._start_failures)
                log.error("cannot start a worker: %s", exc)
                if self._start_failures >= _START_FAILURES_BEFORE_BROKEN:
                    self._stats.broken = f"workers cannot be started: {exc}"
                    self._ledger.fail_all(codes.WORKERS_UNAVAILABLE, self._stats.broken)

    def _drain_inbox(self) -> bool:
        while True:
            try:
                batch = self._inbox.get_nowait()
            except queue.Empty:
                return True
            if batch is None:
                self._ledger.fail_all(codes.SHUTTING_DOWN, "the service is shutting down")
                return False
            if self._stats.broken is not None:
                self._ledger.finish_missing(batch, codes.WORKERS_UNAVAILABLE, self._stats.broken)
                continue
            self._ledger.add(batch)

    def _assign(self) -> None:
        for worker in self._workers:
            if not worker.ready or worker.chunk is not None:
                continue
            sendable = self._ledger.next_message()
            if sendable is None:
                return
            chunk, payload = sendable
            try:
                worker.conn.send_bytes(payload)
            except (OSError, ValueError):
                self._ledger.put_back(chunk)  # the worker died; its sentinel will tell
                continue
            worker.chunk = chunk

    def _worker_for(self, ready: Any) -> WorkerSlot | None:
        for worker in self._workers:
            if ready is worker.conn or ready == worker.process.sentinel:
                return worker
        return None

    def _on_ready(self, ready: Any) -> None:
        if ready is self._wake_r:
            while self._wake_r.poll():
                self._wake_r.recv_bytes()
            return
        worker = self._worker_for(ready)
        if worker is None:
            return
        self._read_messages(worker)
        if ready == worker.process.sentinel or not worker.process.is_alive():
            self._on_death(worker)

    def _read_messages(self, worker: WorkerSlot) -> None:
        try:
            while worker.conn.poll():
                message = worker.conn.recv()
                if message[0] == "ready":
                    worker.ready = True
                    self._start_failures = 0
                    continue
                chunk_id, outcomes, finished = message
                chunk = worker.chunk
                if chunk is None or chunk.id != chunk_id:
                    continue
                for position, outcome in outcomes:
                    self._ledger.record(chunk.batch, position, outcome)
                if finished:
                    worker.chunk = None
        except (EOFError, OSError):
            pass  # the worker is gone: its sentinel is ready too and _on_death runs next

    def _replace(self, worker: WorkerSlot) -> None:
        worker.conn.close()
        worker.process.join(timeout=1.0)
        self._workers = [w for w in self._workers if w is not worker]
        if self._stopping:
            return
        if not worker.ready:
            self._start_failures += 1
            if self._start_failures >= _START_FAILURES_BEFORE_BROKEN:
                self._stats.broken = (
                    f"workers exit during start-up (exit code {worker.process.exitcode})"
                )
                log.error("worker pool broken: %s", self._stats.broken)
                self._ledger.fail_all(codes.WORKERS_UNAVAILABLE, self._stats.broken)
                return
            self._next_spawn_at = time.monotonic() + min(2.0, 0.1 * 2**self._start_failures)
        self._stats.restarts += 1
        self._top_up()

    def _on_death(self, worker: WorkerSlot) -> None:
        log.warning("worker %s exited with code %s", worker.process.pid, worker.process.exitcode)
        chunk, current = worker.chunk, worker.current()
        if chunk is not None:
            batch = chunk.batch
            culprit = None
            if current is not None and not batch.outcomes.has(current[0]):
                culprit = current[0]
            self._ledger.requeue(batch, [p for p in worker.unfinished() if p != culprit])
            if culprit is not None:
                if self._ledger.strike(batch, culprit):
                    self._stats.poison_items += 1
                else:
                    self._ledger.requeue(batch, [culprit])
        self._replace(worker)

    def _check_timeouts(self) -> None:
        now = time.monotonic()
        for worker in list(self._workers):
            current = worker.current()
            if current is None or now - current[1] < self.item_timeout_s:
                continue
            position = current[0]
            self._stats.timeouts += 1
            log.warning(
                "item exceeded %.1fs; killing worker %s", self.item_timeout_s, worker.process.pid
            )
            if worker.process.pid is not None:
                with contextlib.suppress(ProcessLookupError):  # it may have died meanwhile
                    os.kill(worker.process.pid, signal.SIGKILL)
            worker.process.join(timeout=5.0)
            self._read_messages(worker)
            chunk = worker.chunk
            if chunk is not None:
                if not chunk.batch.outcomes.has(position):
                    limit = self.item_timeout_s
                    self._ledger.record(
                        chunk.batch, position, Outcome.judged_zero("timeout", limit_s=limit)
                    )
                self._ledger.requeue(chunk.batch, worker.unfinished())
            worker.chunk = None
            self._replace(worker)

    def _check_deadlines(self) -> None:
        self._ledger.expire(time.monotonic())

    def _kill_workers(self) -> None:
        processes.kill(self._workers)
        self._workers = []

    def _shutdown_workers(self) -> None:
        processes.shut_down(self._workers)
        self._workers = []
