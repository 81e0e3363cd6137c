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

Some packages' `__init__` imports far more than the modules a scorer uses (nltk's pulls in scipy,
scikit-learn and pandas for tokenizers that need none of them). `lazy_import(name,
defer_package_init=True)` imports `name` with its not yet imported parent packages standing in
(`_DeferredPackage`): their submodules import as usual, and their own `__init__` runs, in the same
module object, only when something reads a name that is not a submodule (`import nltk;
nltk.word_tokenize` still works, later). The modules are the library's own, unchanged.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
import types
from collections.abc import Sequence
from typing import Any

__all__ = ["import_deferring_parents", "import_whole", "lazy_import"]


class _LazyModule(types.ModuleType):
    """Stands in for module `__name__` until an attribute is read from it."""

    def __getattr__(self, attr: str) -> Any:  # only for attributes not already kept here
        value = getattr(self._load(), attr)
        setattr(self, attr, value)
        return value

    def _load(self) -> types.ModuleType:
        return importlib.import_module(self.__name__)


class _LazySubmodule(_LazyModule):
    """A `_LazyModule` whose parent packages' `__init__` waits (`_DeferredPackage`); the modules
    `first` are imported before it, as the package's own `__init__` would have (where the
    library's modules import each other in a cycle that only that order resolves)."""

    def __init__(self, name: str, first: Sequence[str]) -> None:
        super().__init__(name)
        self._first = tuple(first)

    def _load(self) -> types.ModuleType:
        for name in self._first:
            import_deferring_parents(name)
        return import_deferring_parents(self.__name__)


class _DeferredPackage(types.ModuleType):
    """Package `__name__`, its `__init__` not run yet: a submodule read imports that submodule,
    any other name runs the `__init__` here (once) and is then read as from the real package."""

    def __getattr__(self, attr: str) -> Any:
        with _LOCK:
            if type(self) is not _DeferredPackage:  # another thread ran the __init__ meanwhile
                return getattr(self, attr)
            if importlib.util.find_spec(f"{self.__name__}.{attr}") is not None:
                return importlib.import_module(f"{self.__name__}.{attr}")
            _run_package_init(self)
        return getattr(self, attr)


def _run_package_init(package: types.ModuleType) -> None:
    spec = package.__spec__
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot run the __init__ of {package.__name__}", name=package.__name__)
    package.__class__ = types.ModuleType  # from here on, an ordinary package
    spec.loader.exec_module(package)


_LOCK = threading.RLock()


def import_deferring_parents(name: str) -> types.ModuleType:
    """`importlib.import_module(name)`, with `name`'s parent packages that are not imported yet
    standing in for themselves (`_DeferredPackage`) rather than running their `__init__`."""
    with _LOCK:
        parts = name.split(".")
        for end in range(1, len(parts)):
            package = ".".join(parts[:end])
            if package in sys.modules:
                continue
            spec = importlib.util.find_spec(package)
            if spec is None or spec.submodule_search_locations is None:
                raise ImportError(f"{package} is not a package", name=package)
            module = importlib.util.module_from_spec(spec)
            module.__class__ = _DeferredPackage
            sys.modules[package] = module
            if end > 1:
                setattr(sys.modules[".".join(parts[: end - 1])], parts[end - 1], module)
        return importlib.import_module(name)


def import_whole(name: str) -> types.ModuleType:
    """`importlib.import_module(name)` with every `__init__` in it run, its own and its
    subpackages', even those deferred so far (an `__init__` that imports its subpackages would
    otherwise find their stand-ins and leave their own `__init__` unrun)."""
    with _LOCK:
        module = importlib.import_module(name)
        if type(module) is _DeferredPackage:
            _run_package_init(module)
        for deferred in [m for n, m in sys.modules.items() if n.startswith(f"{name}.")]:
            if type(deferred) is _DeferredPackage:
                _run_package_init(deferred)
        return module


def lazy_import(
    name: str, *, defer_package_init: bool = False, first: Sequence[str] = ()
) -> types.ModuleType:
    """Module `name` (dotted names too), imported on the first read of one of its attributes;
    with `defer_package_init`, without running its parent packages' `__init__` (see above), and
    after the modules `first`."""
    return _LazySubmodule(name, first) if defer_package_init else _LazyModule(name)
