"""One hash seed for every process that scores.

Five Reasoning Gym generators iterate sets and dicts of strings, so a puzzle regenerated from its
coordinates is only the same puzzle in a process whose hash seed is pinned
(`reward_specs.puzzles.gym.HASH_SEED_DEPENDENT`). Worker pools start their processes inside
`pinned_hash_seed()`; elsewhere such references are refused rather than misjudged.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator

__all__ = ["PINNED_HASH_SEED", "pinned_hash_seed"]

PINNED_HASH_SEED = "0"

_environ_lock = threading.Lock()


@contextlib.contextmanager
def pinned_hash_seed() -> Iterator[None]:
    """Processes started inside this block (a forkserver, and so every worker forked from it) run
    with PYTHONHASHSEED pinned. The variable is set in this process's environment for the block
    only; the lock keeps two threads starting processes at once (two worker pools restarting a
    dead forkserver) from restoring it under each other."""
    with _environ_lock:
        previous = os.environ.get("PYTHONHASHSEED")
        os.environ["PYTHONHASHSEED"] = PINNED_HASH_SEED
        try:
            yield
        finally:
            if previous is None:
                del os.environ["PYTHONHASHSEED"]
            else:
                os.environ["PYTHONHASHSEED"] = previous
