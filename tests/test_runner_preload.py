"""The supervisor runs a shared runner's definitions itself, once (`supervisor/shared.py`), and
each forked run only the runner's closing `if __name__ == "__main__":` block. That is sound only
while every runner's top level, up to that block, defines things and does nothing else: checked
here on the runners' syntax trees (the supervisor splits them as text)."""

from __future__ import annotations

import ast

import pytest

from sandboxes.runners import PY_HARNESS, PY_PROGRAM, runner_source
from sandboxes.supervisor.shared import _preload, split_main

DEFINING = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef, ast.Assign, ast.AnnAssign)


def defines_only(body: list[ast.stmt]) -> list[str]:
    """The statements of `body` that do more than import or define (docstrings and the bodies of
    `if TYPE_CHECKING:` blocks included), as "line N: Kind"."""
    found = []
    for stmt in body:
        if isinstance(stmt, ast.If):
            found += defines_only(stmt.body) + defines_only(stmt.orelse)
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue
        elif not isinstance(stmt, DEFINING):
            found.append(f"line {stmt.lineno}: {type(stmt).__name__}")
        for node in ast.walk(stmt):
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.decorator_list:
                found.append(f"line {node.lineno}: a decorator")
    return found


@pytest.mark.parametrize("name", [PY_HARNESS, PY_PROGRAM])
def test_runner_top_level_only_defines(name: str) -> None:
    source = runner_source(name)
    parts = split_main(source)
    assert parts is not None, f"{name} has no closing main block"
    definitions, final = parts
    assert defines_only(ast.parse(definitions).body) == []
    (guard,) = ast.parse(final).body
    assert isinstance(guard, ast.If) and not guard.orelse
    assert ast.unparse(guard.test) == "__name__ == '__main__'"


@pytest.mark.parametrize("name", [PY_HARNESS, PY_PROGRAM])
def test_runner_preloads(name: str) -> None:
    final, main = _preload(runner_source(name), f"/sandbox/work/{name}")
    assert main is not None
    assert main.__name__ == "__main__" and main.__file__ == f"/sandbox/work/{name}"
    assert callable(main.__dict__["main"])
    # The final block keeps the script's line numbers (tracebacks show the real lines).
    guard_line = runner_source(name).decode().splitlines().index('if __name__ == "__main__":') + 1
    assert final.co_filename == f"/sandbox/work/{name}"
    assert min(line for _, _, line in final.co_lines() if line) == guard_line


def test_other_scripts_run_whole() -> None:
    _, main = _preload(b"print('hi')\n", "/sandbox/work/a.py")
    assert main is None
    _, main = _preload(b'import no_such_module\n\nif __name__ == "__main__":\n    pass\n', "b.py")
    assert main is None  # its definitions failed here: the child runs it all, and fails there
