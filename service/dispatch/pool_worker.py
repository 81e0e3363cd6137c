"""The worker process: loads the registry and specs once, then scores chunks of items.

It runs scorers on its main thread (math-verify's timeouts need `signal.alarm`) and reports each
item's outcome as soon as it has it, so the pool always knows which item is in flight. It exits
when its pipe closes, so a killed service leaves no workers behind.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Sequence
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from reward_specs import Item, Outcome, Registry, ScoreContext, Spec, codes, score_item
from reward_specs.judge.client import Judges, JudgeSetup
from service.core.loading import load_all_specs, load_registry
from service.core.runtime import limit_address_space, settle_heap

__all__ = ["Task", "keep_loaded", "warm_up", "worker_main"]

Task = tuple[int, str, Item]
"""(position in the batch, spec name, item)."""


_Loaded = tuple[Registry, dict[str, Spec]]

_KEPT: dict[tuple[str, tuple[str, ...]], _Loaded] = {}
"""What the fork server loaded for its warm-up (`keep_loaded`), by registry and spec directories."""


def keep_loaded(
    registry_path: str, spec_dirs: Sequence[Path], registry: Registry, specs: dict[str, Spec]
) -> None:
    """Keep the fork server's registry and specs for the workers it forks: they start from
    these objects (the same files, read once) instead of reading every spec file again."""
    _KEPT[_key(registry_path, spec_dirs)] = (registry, specs)


def _key(registry_path: str, spec_dirs: Sequence[Path]) -> tuple[str, tuple[str, ...]]:
    return registry_path, tuple(str(d) for d in spec_dirs)


def _load(registry_path: str, spec_dirs: Sequence[Path]) -> _Loaded:
    kept = _KEPT.get(_key(registry_path, spec_dirs))
    if kept is not None:
        return kept
    registry = load_registry(registry_path)
    return registry, load_all_specs(registry, spec_dirs)


def warm_up(registry: Registry, specs: dict[str, Spec], ctx: ScoreContext) -> None:
    """Score each process scorer's examples once, so the first real items pay no import or
    grammar start-up cost (sympy, ANTLR, language models of the checkers)."""
    spec = next(iter(specs.values()), None)
    if spec is None:
        return
    for scorer in registry:
        if scorer.executor == "process" and not scorer.opt_in:  # the judge's would call it
            for example in scorer.examples():
                score_item(
                    registry, spec, Item(scorer.domain, example.response, example.reference), ctx
                )


FLUSH_S = 0.05
"""Within a long chunk, outcomes are sent at least this often (deadlines see partial progress)."""


def worker_main(
    conn: Connection,
    progress: Any,
    registry_path: str,
    spec_dirs: Sequence[Path],
    memory_mb: int,
    judges: JudgeSetup | None = None,
) -> None:
    """Serve chunks until the pipe closes. `progress` is a shared array of two doubles where the
    worker publishes the position it is scoring and when it started (see pool.py). `judges`:
    the judge endpoints this worker may call (its own clients, cache and gates)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the service decides when workers stop
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # (service.dispatch.preload says why)
    limit_address_space(memory_mb)
    registry, specs = _load(registry_path, spec_dirs)
    ctx = ScoreContext(judges=Judges.open(judges) if judges is not None else None)
    warm_up(registry, specs, ctx)
    settle_heap()
    conn.send(("ready", os.getpid()))
    while True:
        try:
            message = conn.recv()
        except EOFError:
            return
        if message is None:
            return
        chunk_id, tasks = message
        done: list[tuple[int, Outcome]] = []
        flushed = time.monotonic()
        for position, spec_name, item in tasks:
            progress[1] = time.monotonic()
            progress[0] = position
            spec = specs.get(spec_name)
            if spec is None:
                outcome = Outcome.failure(
                    "infra_error", codes.UNKNOWN_SPEC, f"worker has no spec {spec_name!r}"
                )
            else:
                outcome = score_item(registry, spec, item, ctx)
            done.append((position, outcome))
            if time.monotonic() - flushed >= FLUSH_S:
                conn.send((chunk_id, done, False))
                done, flushed = [], time.monotonic()
        progress[0] = -1.0
        conn.send((chunk_id, done, True))
