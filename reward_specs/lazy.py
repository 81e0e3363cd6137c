"""Heavy verifier libraries, imported where they are first used rather than with their domain.

Listing or hashing specs, building the HTTP app or answering `proctor specs` needs each domain's
config and reference models, not the libraries that judge answers (nltk, sympy, math-verify,
reasoning-gym, pint), which take seconds to import. A domain module names such a library once,

    if TYPE_CHECKING:
        import sympy
    else:
        sympy = lazy_import("sympy")

and writes `sympy.Integer` where it needs it: the first attribute read imports the library, and
each attribute read is then kept on the stand-in, so later reads cost what a module's do. This is
the one reason reward_specs imports anything late (never to break an import cycle); the spec hash
reads library versions from their metadata, without importing them, and the service's workers
import every library during their warm-up, before they take any work.
"""

from __future__ import annotations

import importlib
import types
from typing import Any

__all__ = ["lazy_import"]


class _LazyModule(types.ModuleType):
    """Stands in for module `__name__` until an attribute is read from it."""

    def __getattr__(self, attr: str) -> Any:  # only for attributes not already kept here
        value = getattr(importlib.import_module(self.__name__), attr)
        setattr(self, attr, value)
        return value


def lazy_import(name: str) -> types.ModuleType:
    """Module `name` (dotted names too), imported on the first read of one of its attributes."""
    return _LazyModule(name)
