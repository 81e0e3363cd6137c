"""Loading the scorer registry and the spec files: the one place that knows where specs live
(the built-in directory, then the operator's `spec_dirs`), used by the app, the CLI and the
workers alike, so all three see the same specs."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

from reward_specs import BUILTIN_SPEC_DIR, Registry, Spec, load_specs
from reward_specs.registry import load_registry

__all__ = ["LoadedSpecs", "load_all_specs", "load_registry"]


def load_all_specs(
    registry: Registry,
    spec_dirs: Sequence[Path] = (),
    environments: Mapping[str, str] | None = None,
) -> dict[str, Spec]:
    """The built-in specs and those of `spec_dirs`, by name (a later file may not redefine an
    earlier name: `load_specs` refuses it). `environments`: the digests of the environments
    domains run in (`Spec.environments`), which enter those domains' hashes."""
    return load_specs(registry, (BUILTIN_SPEC_DIR, *spec_dirs), environments)


class LoadedSpecs:
    """The specs under the environments in use: loaded once without any (spec errors surface
    at start-up), again whenever `under` is asked for other environments than the last (the
    sandbox's digest is known only once it has started, and a queue API may learn it from its
    workers)."""

    def __init__(self, registry: Registry, spec_dirs: Sequence[Path] = ()) -> None:
        self._registry = registry
        self._spec_dirs = tuple(spec_dirs)
        self._lock = threading.Lock()
        self._key: tuple[tuple[str, str], ...] = ()
        self._specs = load_all_specs(registry, self._spec_dirs)

    def under(self, environments: Mapping[str, str]) -> dict[str, Spec]:
        key = tuple(sorted(environments.items()))
        if key == self._key:
            return self._specs
        with self._lock:
            if key != self._key:
                self._specs = load_all_specs(self._registry, self._spec_dirs, dict(key))
                self._key = key
            return self._specs
