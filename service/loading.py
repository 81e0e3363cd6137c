"""Loading the scorer registry and the spec files: the one place that knows where specs live
(the built-in directory, then the operator's `spec_dirs`), used by the app, the CLI and the
workers alike, so all three see the same specs."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from reward_specs import BUILTIN_SPEC_DIR, Registry, Spec, load_specs
from reward_specs.registry import load_registry

__all__ = ["load_all_specs", "load_registry"]


def load_all_specs(registry: Registry, spec_dirs: Sequence[Path] = ()) -> dict[str, Spec]:
    """The built-in specs and those of `spec_dirs`, by name (a later file may not redefine an
    earlier name: `load_specs` refuses it)."""
    return load_specs(registry, (BUILTIN_SPEC_DIR, *spec_dirs))
