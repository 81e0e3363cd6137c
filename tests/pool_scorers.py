"""Scorers that misbehave on purpose, for the worker-pool tests (a registry seam, not a mock).

`PROCTOR_REGISTRY=tests.pool_scorers:registry` adds them beside the real domains:

- `sleep`: sleeps `reference.seconds`, then scores 1 (slow items, deadlines, hard timeouts);
- `crash`: kills its worker process (a poison item);
- `crash_once`: kills its worker the first time it sees `reference.marker` (a path), scores 1 after.
- `count`: declares the response's last line as its answer key and reports in `details.call` how
  many times its worker process has called it, so a test sees which items were scored apart;
- `bad_key`: like `count`, but its answer key raises (the service must fall back to the response).
- `kill_host`: SIGKILLs the `proctor worker` process that hosts its worker process (queue mode:
  an item that takes a whole worker machine down); refuses to run anywhere else.
- `ordered`: sleeps `reference.seconds`, labels its workload by `reference.kind` and reports in
  `details.call` the order in which its worker process scored it (scheduling tests).

`tests.pool_scorers:broken_in_workers` is a registry whose worker processes cannot start.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from reward_specs import (
    SCORERS,
    DomainConfig,
    Example,
    Judgement,
    ReferenceModel,
    Registry,
    ScoreContext,
    Scorer,
)


class _Config(DomainConfig):
    pass


class SleepReference(ReferenceModel):
    seconds: float = 0.0


class MarkerReference(ReferenceModel):
    marker: str = ""


def _sleep(response: str, ref: SleepReference, config: _Config, ctx: ScoreContext) -> Judgement:
    time.sleep(ref.seconds)
    ok = response == "ok"
    return Judgement(score=float(ok), success=ok, parsed=bool(response))


def _crash(response: str, ref: MarkerReference, config: _Config, ctx: ScoreContext) -> Judgement:
    if response:
        os._exit(17)
    return Judgement(score=0.0, success=False, parsed=False)


def _crash_once(
    response: str, ref: MarkerReference, config: _Config, ctx: ScoreContext
) -> Judgement:
    marker = Path(ref.marker)
    if response and ref.marker and not marker.exists():
        marker.write_text("crashed once")
        os._exit(17)
    ok = response == "ok"
    return Judgement(score=float(ok), success=ok, parsed=bool(response))


_calls = 0


def _count(response: str, ref: ReferenceModel, config: _Config, ctx: ScoreContext) -> Judgement:
    global _calls
    _calls += 1
    return Judgement(score=1.0, success=True, parsed=True, details={"call": _calls})


_ordered_calls = 0


def _ordered(response: str, ref: SleepReference, config: _Config, ctx: ScoreContext) -> Judgement:
    global _ordered_calls
    _ordered_calls += 1
    time.sleep(ref.seconds)
    return Judgement(score=1.0, success=True, parsed=True, details={"call": _ordered_calls})


def _kind(reference: Mapping[str, Any]) -> str | None:
    kind = reference.get("kind")
    return kind if isinstance(kind, str) else None


def _last_line(response: str, config: _Config) -> str:
    return response.rsplit("\n", 1)[-1]


def _raising_key(response: str, config: _Config) -> str:
    raise RuntimeError("a bug in an answer key")


def _worker_host() -> int | None:
    """The nearest ancestor that is a `proctor worker` (pool process -> forkserver -> host)."""
    pid = os.getppid()
    while pid > 1:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        if b"service.cli" in cmdline and b"worker" in cmdline:
            return pid
        status = Path(f"/proc/{pid}/status").read_text()
        pid = int(next(ln for ln in status.splitlines() if ln.startswith("PPid:")).split()[1])
    return None


def _kill_host(response: str, ref: ReferenceModel, config: _Config, ctx: ScoreContext) -> Judgement:
    host = _worker_host()
    if host is None:
        raise RuntimeError("kill_host runs under `proctor worker` only")
    os.kill(host, signal.SIGKILL)
    time.sleep(60)  # this process goes with its host's pipes
    return Judgement(score=0.0, success=False, parsed=False)


def registry() -> Registry:
    return Registry(
        [
            *SCORERS,
            Scorer("sleep", _Config, SleepReference, _sleep, lambda: [Example({}, "ok")]),
            Scorer("crash", _Config, MarkerReference, _crash, lambda: []),
            Scorer("crash_once", _Config, MarkerReference, _crash_once, lambda: []),
            Scorer("count", _Config, ReferenceModel, _count, lambda: [], answer_key=_last_line),
            Scorer("bad_key", _Config, ReferenceModel, _count, lambda: [], answer_key=_raising_key),
            Scorer("ordered", _Config, SleepReference, _ordered, lambda: [], workload=_kind),
            Scorer("kill_host", _Config, ReferenceModel, _kill_host, lambda: []),
        ]
    )


def broken_in_workers() -> Registry:
    """Loads in the service but not in its worker processes: a pool that cannot start."""
    if multiprocessing.parent_process() is not None:
        raise RuntimeError("this registry refuses to load in a worker process")
    return registry()
