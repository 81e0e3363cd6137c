"""The house's layout, as a reviewer checks it (issue 38): modules and functions short enough to
read, `service/` in rooms whose module names do not collide, public names without an underscore
in the supervisor's `__all__`, and no module reaching for another's private names."""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import sandboxes.supervisor

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("service", "reward_specs", "sandboxes", "clients", "benchmarks")
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 80
MAX_SERVICE_TOP_MODULES = 8
BUILT = {"build", "dist", ".venv", "node_modules"}


def _modules(*packages: str) -> Iterator[Path]:
    for package in packages:
        for path in sorted((ROOT / package).rglob("*.py")):
            if not BUILT & set(path.relative_to(ROOT).parts):
                yield path


def test_no_module_is_over_500_lines() -> None:
    long = {
        str(p.relative_to(ROOT)): n
        for p in _modules(*PACKAGES)
        if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}


def test_no_function_is_over_80_lines() -> None:
    long = {}
    for path in _modules(*PACKAGES):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                lines = (node.end_lineno or node.lineno) - first + 1
                if lines > MAX_FUNCTION_LINES:
                    long[f"{path.relative_to(ROOT)}:{node.lineno} {node.name}"] = lines
    assert long == {}


def test_no_two_service_modules_share_a_name() -> None:
    names = Counter(p.name for p in _modules("service") if p.name != "__init__.py")
    assert {name: n for name, n in names.items() if n > 1} == {}


def test_service_top_level_is_a_few_modules() -> None:
    top = sorted(p.name for p in (ROOT / "service").glob("*.py"))
    assert len(top) <= MAX_SERVICE_TOP_MODULES, top


def test_the_supervisor_exports_no_underscore_names() -> None:
    assert [n for n in sandboxes.supervisor.__all__ if n.startswith("_")] == []


OURS = ("service", "reward_specs", "sandboxes", "proctor_client")


def _imported_from(path: Path, node: ast.ImportFrom) -> Path:
    """The folder or module file an import of ours names (relative or absolute)."""
    if node.level:
        base = path.parent
        for _ in range(node.level - 1):
            base = base.parent
    else:
        base = ROOT / "clients" if (node.module or "").startswith("proctor_client") else ROOT
    for part in (node.module or "").split("."):
        base = base / part if part else base
    return base


def test_no_module_imports_a_private_name_of_another() -> None:
    """A name shared between modules is public: `from .tree import _Reaper` says the name is
    private to `tree` and uses it elsewhere all the same. (A private module of the package, such
    as `proctor_client._defaults`, is imported whole, as httpx's are.)"""
    found = []
    for path in _modules("service", "reward_specs", "sandboxes", "clients"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.ImportFrom):
                continue
            if not node.level and (node.module or "").split(".")[0] not in OURS:
                continue
            source = _imported_from(path, node)
            for alias in node.names:
                name = alias.name
                if not name.startswith("_") or name.startswith("__"):
                    continue
                if (source / f"{name}.py").exists() or (source / name).is_dir():
                    continue  # a private module, imported whole
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} {name}")
    assert found == []
