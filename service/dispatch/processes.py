"""Starting and stopping the worker pool's processes (`service.dispatch.worker` runs in each)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from multiprocessing.context import ForkServerContext
from pathlib import Path

from reward_specs.hash_seed import pinned_hash_seed
from service.dispatch.pool_state import WorkerSlot
from service.dispatch.worker import worker_main

__all__ = ["kill", "shut_down", "spawn"]


def spawn(
    mp: ForkServerContext, registry_path: str, spec_dirs: Sequence[Path], memory_mb: int
) -> WorkerSlot:
    """A new worker process, forked from the fork server (started with the pinned hash seed)."""
    parent, child = mp.Pipe(duplex=True)
    progress = mp.RawArray("d", [-1.0, 0.0])
    process = mp.Process(
        target=worker_main,
        args=(child, progress, registry_path, spec_dirs, memory_mb),
        name="proctor-worker",
        daemon=True,
    )
    try:
        with pinned_hash_seed():
            process.start()
    finally:
        child.close()
    return WorkerSlot(process=process, conn=parent, progress=progress)


def kill(workers: Sequence[WorkerSlot]) -> None:
    """SIGKILL every worker and reap it."""
    for worker in workers:
        with contextlib.suppress(OSError, ValueError):  # already gone
            worker.process.kill()
    for worker in workers:
        worker.process.join(timeout=1.0)
        worker.conn.close()


def shut_down(workers: Sequence[WorkerSlot], grace_s: float = 2.0) -> None:
    """Ask every worker to exit; kill those still there after `grace_s`."""
    for worker in workers:
        with contextlib.suppress(OSError, ValueError):  # already gone
            worker.conn.send(None)
    deadline = time.monotonic() + grace_s
    for worker in workers:
        worker.process.join(timeout=max(0.0, deadline - time.monotonic()))
        if worker.process.is_alive():
            worker.process.kill()
            worker.process.join(timeout=1.0)
        worker.conn.close()
