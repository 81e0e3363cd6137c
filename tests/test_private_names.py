"""No module of ours imports or touches a private name of a dependency.

A private name of rq, redis or any other third-party library is not part of
its contract and may change in any release, so the code must not rely on one.
Three checks over the AST of every module in the scanned packages:

- an import whose path has a ``_name`` part (``import x._y``, ``from x import
  _y``, ``from x._y import z``) fails unless ``x`` is one of our packages or
  the standard library;
- an attribute access ``expr._name`` fails unless ``_name`` is defined
  somewhere in our own code (a def, class, assignment, parameter, field, ...),
  or is one of the few standard-library privates listed below;
- a class of ours whose base is a third-party class fails if it defines or
  touches (``self._name``) a private name of that base: overriding RQ's
  ``_install_signal_handlers`` is relying on a private as much as calling it;
- a class of ours whose base is a third-party class from a library's internal
  modules fails: one its package exports neither at its top (``pkg.Name``) nor
  from a module one level down (``pkg.module.Name``), such as uvicorn's
  ``uvicorn.protocols.http.httptools_impl.HttpToolsProtocol``. Its methods are
  as private as an underscore would make them. The one exception is listed in
  ``PINNED_INTERNALS``, with the pin and the fingerprint test that watch it; a base a library
  documents as its extension point, though it lives deeper, is in ``DOCUMENTED_BASES``.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import sys
import textwrap
from collections.abc import Iterable, Iterator
from functools import cache
from pathlib import Path

from service.http.header_limit import EXTENDED

ROOT = Path(__file__).resolve().parent.parent
SCANNED = ("service", "reward_specs", "sandboxes", "clients", "benchmarks")
OURS = frozenset({"service", "reward_specs", "sandboxes", "proctor_client", "tests", "benchmarks"})

# Standard-library privates we rely on, each with the reason it is needed.
STDLIB_PRIVATE = frozenset(
    {
        "_exit",  # os._exit: leave a forked child without running the parent's cleanup
        "_getframe",  # sys._getframe: the supervisor's frame inspection in the jail
        "_clear",  # atexit._clear: a forked child drops the parent's exit handlers
        "_run_exitfuncs",  # atexit._run_exitfuncs: the supervisor exits as python3 does
        "_shutdown",  # threading._shutdown: join threads at exit as the interpreter does
        "_lru_cache_wrapper",  # functools._lru_cache_wrapper: the type lru_cache returns
        "_replace",  # NamedTuple._replace: documented public API despite the underscore
        "_asdict",  # NamedTuple._asdict: documented public API despite the underscore
        "_fields",  # NamedTuple._fields: documented public API despite the underscore
        "_name_",  # enum member's name as stored by enum itself
        "_value_",  # enum member's value as stored by enum itself
        "_missing_",  # enum's documented hook for unknown values
    }
)


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _top(module: str) -> str:
    return module.split(".", 1)[0]


# The benchmark scripts import one another as top-level modules.
BENCHMARK_MODULES = frozenset(p.stem for p in (ROOT / "benchmarks").glob("*.py"))


def _exempt_module(module: str) -> bool:
    top = _top(module)
    return top in OURS or top in BENCHMARK_MODULES or top in sys.stdlib_module_names


def _targets(node: ast.AST) -> Iterator[str]:
    """Names a node binds: assignment targets, attribute stores, tuple parts."""
    if isinstance(node, ast.Name):
        yield node.id
    elif isinstance(node, ast.Attribute):
        # Only a store on self/cls defines an attribute of our own class;
        # `worker._x = ...` on someone else's object defines nothing.
        if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
            yield node.attr
    elif isinstance(node, (ast.Tuple, ast.List)):
        for element in node.elts:
            yield from _targets(element)
    elif isinstance(node, ast.Starred):
        yield from _targets(node.value)


# Calls whose string argument names an attribute: setattr(obj, "_x", v) and
# namedtuple("T", ["_a"]) are the ways to define one without an assignment.
_NAMING_CALLS = frozenset({"setattr", "namedtuple"})


def _call_name(node: ast.Call) -> str:
    func = node.func
    return func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")


def _names(targets: list[ast.expr]) -> set[str]:
    return {name for target in targets for name in _targets(target)}


def _strings(nodes: list[ast.expr]) -> Iterator[str]:
    for node in nodes:
        for leaf in ast.walk(node):
            if isinstance(leaf, ast.Constant) and isinstance(leaf.value, str):
                yield leaf.value


def defined_names(tree: ast.AST) -> set[str]:
    """Every name the module defines in any way, private or not."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                names.update(_targets(target))
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            names.update(_targets(node.target))
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            names.update(_targets(node.optional_vars))
        elif isinstance(node, ast.NamedExpr):
            names.update(_targets(node.target))
        elif isinstance(node, ast.Call) and _call_name(node) in _NAMING_CALLS:
            names.update(_strings(node.args[1:2] or node.args))
        if isinstance(node, ast.Assign) and "__slots__" in _names(node.targets):
            names.update(_strings([node.value]))
    return names


def bad_imports(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """Imports that reach a private part of a third-party module."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if any(map(_private, parts[1:])) and not _exempt_module(alias.name):
                    yield node.lineno, f"import {alias.name}"
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if _exempt_module(node.module):
                continue
            parts = node.module.split(".")
            if any(map(_private, parts[1:])):
                yield node.lineno, f"from {node.module} import ..."
            for alias in node.names:
                if _private(alias.name):
                    yield node.lineno, f"from {node.module} import {alias.name}"


def bad_attributes(tree: ast.AST, ours: set[str]) -> Iterator[tuple[int, str]]:
    """Accesses ``expr._name`` of a private name no code of ours defines."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or not _private(node.attr):
            continue
        if node.attr in ours or node.attr in STDLIB_PRIVATE:
            continue
        yield node.lineno, f"._{node.attr[1:]}"


def _third_party_imports(tree: ast.AST) -> dict[str, str]:
    """Local name -> the dotted path it was imported as, for third-party imports."""
    found: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                local = alias.asname or alias.name.split(".", 1)[0]
                found[local] = alias.name if alias.asname else local
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                found[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return {name: path for name, path in found.items() if not _exempt_module(path)}


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        owner = _dotted(node.value)
        return None if owner is None else f"{owner}.{node.attr}"
    return None


def _resolve(path: str) -> object:
    """The object at a dotted path: the longest importable module, then attributes."""
    parts = path.split(".")
    for split in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        for attribute in parts[split:]:
            found = getattr(found, attribute)
        return found
    raise ImportError(path)


def _self_attribute(node: ast.AST) -> str | None:
    """The name of ``self.<name>``, if that is what `node` is."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return node.attr if node.value.id == "self" else None
    return None


@cache
def privates_of(base: type) -> frozenset[str]:
    """The private names a third-party class and its third-party ancestors define: class
    members, and the ``self._name`` attributes their methods use."""
    names: set[str] = set()
    for cls in base.__mro__:
        if cls is object or _exempt_module(cls.__module__):
            continue
        names.update(name for name in vars(cls) if _private(name))
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
        except (OSError, TypeError, SyntaxError):
            continue  # no source (a compiled class): its members above are all we know
        for node in ast.walk(tree):
            if _self_attribute(node) is not None:
                names.add(node.attr)
    return frozenset(names)


def _members(cls: ast.ClassDef) -> Iterator[tuple[int, str, str]]:
    """(line, name, how) for the private names a class body defines or uses on `self`."""
    for node in cls.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node.lineno, node.name, "overrides"
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for name in _names(targets):
                yield node.lineno, name, "overrides"
    for node in ast.walk(cls):
        name = _self_attribute(node)
        if name is not None:
            yield node.lineno, name, "touches"


def bad_overrides(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """Private names of a third-party base class that a subclass of ours defines or uses."""
    imported = _third_party_imports(tree)
    for cls in ast.walk(tree):
        if not isinstance(cls, ast.ClassDef):
            continue
        for base_node in cls.bases:
            local = _dotted(base_node)
            root = None if local is None else local.split(".", 1)[0]
            if local is None or root not in imported:
                continue
            path = imported[root] + local[len(root) :]
            base = _resolve(path)
            if not isinstance(base, type):
                continue
            theirs = privates_of(base)
            for line, name, how in _members(cls):
                if _private(name) and name in theirs:
                    yield line, f"{cls.name} {how} {path}.{name}"


PINNED_INTERNALS = {
    "uvicorn.protocols.http.httptools_impl.HttpToolsProtocol": (
        "service/http/header_limit.py: uvicorn pinned to one minor release in pyproject.toml, "
        "the methods overridden fingerprinted by tests/test_header_limit.py"
    ),
}
"""Internal classes of a dependency that a class of ours may extend, each with what guards it."""

DOCUMENTED_BASES = {
    "skyrl_gym.envs.base_text_env.BaseTextEnv": (
        "clients/proctor_client/skyrl.py: SkyRL-gym's documented base class for a new "
        "environment (its guide imports it from this module)"
    ),
}
"""Classes a library documents as the one to extend, though it exports them only from a deeper
module: public by the library's word, not by where they live."""


def _exported(cls: type) -> bool:
    """Whether a third-party class is part of its package's surface: an attribute of the package
    itself or of one of its direct submodules (imported or importable)."""
    top = cls.__module__.split(".", 1)[0]
    package = importlib.import_module(top)
    if getattr(package, cls.__name__, None) is cls:
        return True
    parts = cls.__module__.split(".")
    if len(parts) == 2 and not _private(parts[1]):
        return True  # defined in `pkg.module`, a module one level down
    for name in dir(package):
        sub = getattr(package, name)
        if inspect.ismodule(sub) and getattr(sub, cls.__name__, None) is cls:
            return True
    return False


def internal_bases(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """Third-party base classes from a library's internal modules (module docstring)."""
    imported = _third_party_imports(tree)
    for cls in ast.walk(tree):
        if not isinstance(cls, ast.ClassDef):
            continue
        for base_node in cls.bases:
            local = _dotted(base_node)
            root = None if local is None else local.split(".", 1)[0]
            if local is None or root not in imported:
                continue
            base = _resolve(imported[root] + local[len(root) :])
            if not isinstance(base, type) or _exported(base):
                continue
            where = f"{base.__module__}.{base.__qualname__}"
            if where not in PINNED_INTERNALS and where not in DOCUMENTED_BASES:
                yield cls.lineno, f"{cls.name} extends {where}, internal to its library"


BUILT = {"build", "dist", ".venv"}
"""Folders an install or a build leaves in the tree (git ignores them): copies, not sources."""


def _sources() -> Iterable[Path]:
    for package in SCANNED:
        for path in sorted((ROOT / package).rglob("*.py")):
            if not BUILT & set(path.relative_to(ROOT).parts):
                yield path


def offenders(sources: dict[str, str]) -> list[str]:
    """``path:line: what`` for every private-name use across the given sources."""
    trees = {path: ast.parse(text, path) for path, text in sources.items()}
    ours: set[str] = set()
    for tree in trees.values():
        ours |= defined_names(tree)
    found = []
    for path, tree in trees.items():
        found_here = [
            *bad_imports(tree),
            *bad_attributes(tree, ours),
            *bad_overrides(tree),
            *internal_bases(tree),
        ]
        for line, what in sorted(set(found_here)):
            found.append(f"{path}:{line}: {what}")
    return found


def test_no_private_names_of_dependencies() -> None:
    sources = {str(p.relative_to(ROOT)): p.read_text() for p in _sources()}
    assert offenders(sources) == []


def test_check_catches_a_third_party_private() -> None:
    snippet = (
        "import rq._compat\n"
        "from redis._parsers import Encoder\n"
        "from rq import _private_helper\n"
        "import os\n"
        "def stop(worker):\n"
        "    worker._stop_requested = True\n"  # a store: defines nothing in `ours`
        "    os._exit(0)\n"
    )
    found = offenders({"snippet.py": snippet})
    assert "snippet.py:1: import rq._compat" in found
    assert "snippet.py:2: from redis._parsers import ..." in found
    assert "snippet.py:3: from rq import _private_helper" in found
    assert not any("_exit" in entry for entry in found)


def test_check_allows_our_own_privates() -> None:
    snippet = (
        "import os._local_thing\n"  # stdlib: exempt from the import rule
        "from service import _helper\n"
        "class Pool:\n"
        "    def _drain(self):\n"
        "        return self._items\n"
        "    def __init__(self):\n"
        "        self._items = []\n"
    )
    found = offenders({"snippet.py": snippet})
    assert found == []


def test_check_catches_a_private_read_on_a_dependency_object() -> None:
    snippet = "def peek(job):\n    return job._status\n"
    assert offenders({"snippet.py": snippet}) == ["snippet.py:2: ._status"]


def test_check_catches_an_override_of_a_dependency_private() -> None:
    snippet = (
        "from rq import SimpleWorker\n"
        "import rq.worker\n"
        "class Quiet(SimpleWorker):\n"
        "    def _install_signal_handlers(self):\n"  # a private method of rq's worker
        "        pass\n"
        "    def stop(self):\n"
        "        self._stop_requested = True\n"  # a private attribute its methods set
        "    def _ours(self):\n"  # no name of rq's: ours to define
        "        self._mine = 1\n"
        "class Other(rq.worker.SimpleWorker):\n"
        "    _dequeue_strategy = None\n"
    )
    assert offenders({"snippet.py": snippet}) == [
        "snippet.py:4: Quiet overrides rq.SimpleWorker._install_signal_handlers",
        "snippet.py:7: Quiet touches rq.SimpleWorker._stop_requested",
        "snippet.py:11: Other overrides rq.worker.SimpleWorker._dequeue_strategy",
    ]


def test_check_catches_a_subclass_of_a_dependency_internal() -> None:
    snippet = (
        "from uvicorn.protocols.http.h11_impl import H11Protocol\n"
        "import uvicorn.protocols.http.httptools_impl as impl\n"
        "from prometheus_client.registry import Collector\n"
        "from rq import SimpleWorker\n"
        "class Mine(H11Protocol):\n"  # internal, and not pinned
        "    pass\n"
        "class Pinned(impl.HttpToolsProtocol):\n"  # internal, pinned and fingerprinted
        "    pass\n"
        "class Collects(Collector):\n"  # `prometheus_client.registry`: one level down
        "    pass\n"
        "class Works(SimpleWorker):\n"  # exported at rq's top
        "    pass\n"
    )
    assert offenders({"snippet.py": snippet}) == [
        "snippet.py:5: Mine extends uvicorn.protocols.http.h11_impl.H11Protocol, "
        "internal to its library"
    ]


def test_each_pinned_internal_is_the_one_extended() -> None:
    assert set(PINNED_INTERNALS) == {EXTENDED[0]}
