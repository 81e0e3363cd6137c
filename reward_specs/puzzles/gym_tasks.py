"""Reasoning Gym's tasks imported one at a time, the module that registers each when it is named.

`import reasoning_gym` imports every task's module (about a hundred, with matplotlib for the game
of life), and its registry (`reasoning_gym.factory.DATASETS`) fills only as they import. A worker
that scores a few tasks needs only their modules: `load_task(task)` imports the one module whose
source registers `task` (found by reading the package's sources, not importing them), with the
package `__init__`s above it deferred (`reward_specs.lazy`). `load_all()` imports the whole
package, as `import reasoning_gym` does: for the list of tasks, an unknown name, and composites
(whose parts are made through the registry). An index that misses a task only costs a full load.
"""

from __future__ import annotations

import functools
import importlib.util
import re
from pathlib import Path

from reward_specs.lazy import import_deferring_parents, import_whole

__all__ = ["load_all", "load_task", "task_modules"]

PACKAGE = "reasoning_gym"

_REGISTERED = re.compile(r"^register_dataset\(\s*(?:([A-Za-z_]\w*)|[\"']([^\"']+)[\"'])\s*,", re.M)


@functools.cache
def task_modules() -> dict[str, str]:
    """Each task's name to the module whose source registers it, where the source says plainly."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return {}
    root = Path(next(iter(spec.submodule_search_locations)))
    found: dict[str, str] = {}
    for path in sorted(root.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        for constant, literal in _REGISTERED.findall(source):
            name = literal or _constant(source, constant)
            if name is not None:
                parts = path.relative_to(root).with_suffix("").parts
                found.setdefault(name, ".".join((PACKAGE, *parts)))
    return found


def _constant(source: str, constant: str) -> str | None:
    match = re.search(rf"^{re.escape(constant)}\s*=\s*[\"']([^\"']+)[\"']", source, re.M)
    return match.group(1) if match else None


def load_task(task: str) -> None:
    """Import the module that registers `task`, if the index knows one."""
    module = task_modules().get(task)
    if module is not None:
        import_deferring_parents(module)


def load_all() -> None:
    """Import the whole package: every task registered."""
    import_whole(PACKAGE)
