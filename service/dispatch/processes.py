"""Starting and stopping the worker pool's processes (`service.dispatch.pool_worker` runs in each).

Workers are forked from multiprocessing's fork server, which is started with the pinned hash
seed and warmed for the pool's registry before it forks anyone (`service.dispatch.preload`): so
a worker's start is a fork of a process that has the verifier libraries imported and their first
parses done, not an interpreter importing them again.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing.forkserver
import os
import time
from collections.abc import Iterator, Sequence
from multiprocessing.context import ForkServerContext
from pathlib import Path

from reward_specs.hash_seed import pinned_hash_seed
from reward_specs.judge.client import JudgeSetup
from service.dispatch.pool_state import WorkerSlot
from service.dispatch.pool_worker import worker_main

__all__ = ["WARM_ENV", "fork_server_context", "kill", "shut_down", "spawn", "start_fork_server"]

WARM_ENV = "PROCTOR_FORK_SERVER_WARM"
"""JSON `{"registry": "module:function", "spec_dirs": [...]}`: what a fork server started by
this module warms (`service.dispatch.preload`)."""


def fork_server_context() -> ForkServerContext:
    """multiprocessing's fork-server context, whose server imports (and warms) what workers need."""
    mp = multiprocessing.get_context("forkserver")
    mp.set_forkserver_preload(["service.dispatch.preload", "service.dispatch.pool_worker"])
    return mp


@contextlib.contextmanager
def _fork_server_environment(registry_path: str, spec_dirs: Sequence[Path]) -> Iterator[None]:
    """What a fork server started in this block inherits: the pinned hash seed, and the registry
    and spec directories to warm (`WARM_ENV`); both are set in this process for the block only."""
    with pinned_hash_seed():
        previous = os.environ.get(WARM_ENV)
        os.environ[WARM_ENV] = json.dumps(
            {"registry": registry_path, "spec_dirs": [str(d) for d in spec_dirs]}
        )
        try:
            yield
        finally:
            if previous is None:
                del os.environ[WARM_ENV]
            else:
                os.environ[WARM_ENV] = previous


def start_fork_server(registry_path: str, spec_dirs: Sequence[Path]) -> None:
    """Start the fork server now, if it is not running, without waiting for its warm-up: it
    imports and warms while this process goes on (`proctor serve` importing the web stack), and
    the first `spawn` waits for it. One fork server serves every pool of a process: the first
    to start it names the registry it warms (a worker warms whatever else it needs itself)."""
    fork_server_context()
    with _fork_server_environment(registry_path, spec_dirs):
        multiprocessing.forkserver.ensure_running()


def spawn(
    mp: ForkServerContext,
    registry_path: str,
    spec_dirs: Sequence[Path],
    memory_mb: int,
    judges: JudgeSetup | None = None,
) -> WorkerSlot:
    """A new worker process, forked from the fork server (started, if it is not running, with
    the pinned hash seed and warmed for `registry_path`). The first call waits for the server's
    warm-up."""
    parent, child = mp.Pipe(duplex=True)
    progress = mp.RawArray("d", [-1.0, 0.0])
    process = mp.Process(
        target=worker_main,
        args=(child, progress, registry_path, spec_dirs, memory_mb, judges),
        name="proctor-worker",
        daemon=True,
    )
    try:
        with _fork_server_environment(registry_path, spec_dirs):
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
