"""Loading the scorer registry and the spec files: the one place that knows where specs live
(the built-in directory, then the operator's `spec_dirs`), used by the app, the CLI and the
workers alike, so all three see the same specs."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from pathlib import Path

from reward_specs import BUILTIN_SPEC_DIR, Registry, Spec, load_specs

__all__ = ["load_all_specs", "load_registry"]


def load_registry(path: str) -> Registry:
    """Resolve a `module:function` registry factory (the `registry` setting)."""
    module_name, _, attr = path.partition(":")
    factory: Callable[[], Registry] = getattr(importlib.import_module(module_name), attr)
    registry = factory()
    if not isinstance(registry, Registry):
        raise TypeError(f"{path} returned {type(registry).__name__}, not a Registry")
    return registry


def load_all_specs(registry: Registry, spec_dirs: Sequence[Path] = ()) -> dict[str, Spec]:
    """The built-in specs and those of `spec_dirs`, by name (a later file may not redefine an
    earlier name: `load_specs` refuses it)."""
    return load_specs(registry, (BUILTIN_SPEC_DIR, *spec_dirs))
