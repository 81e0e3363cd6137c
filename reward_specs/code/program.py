"""`program` tests: what the scorer reads from a test program's syntax tree, outside the sandbox.

A test program is the dataset's own Python test code (HumanEval's `check(candidate)` and its call,
MBPP's setup code and asserts, a pytest-style file of `def test_*`). Its tests are its top-level
`def test_*` functions, in order, taken from the syntax tree here and never from a namespace the
solution could add to; a program without any is one test. The names it would look up in the
solution are its free names: loaded somewhere, bound nowhere at its top level, and not builtins
(so a solution cannot stand in for `abs` or `len`). The runner that executes it in the sandbox is
`sandboxes/runners/py_program.py`.
"""

from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass

from reward_specs.caches import Cache
from reward_specs.code.pyparse import compile_module, parse_module

__all__ = ["ProgramPlan", "plan_program"]

_BUILTINS = frozenset(dir(builtins))
_OWN_SCOPES = (ast.Lambda, ast.GeneratorExp, ast.ListComp, ast.SetComp, ast.DictComp)
"""Expressions with their own scope: what they bind is not the module's."""


@dataclass(frozen=True, slots=True)
class ProgramPlan:
    tests: tuple[str, ...]
    """The top-level `def test_*` functions in order; empty: the whole program is one test."""
    names: tuple[str, ...]
    """Free names of the program, each a stub calling the solution's function of that name."""


def _top_level_bindings(module: ast.Module) -> set[str]:
    """Names the module's own top-level code binds (not the locals of its functions), and the
    names its functions declare `global`."""
    bound: set[str] = set()
    stack: list[ast.AST] = list(module.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
            bound.update(
                name for sub in ast.walk(node) if isinstance(sub, ast.Global) for name in sub.names
            )
            stack.extend(node.decorator_list)
            continue
        if isinstance(node, _OWN_SCOPES):
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names if a.name != "*")
        elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            bound.add(node.id)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
        stack.extend(ast.iter_child_nodes(node))
    return bound


@Cache("code.program_plans", 1024)
def plan_program(source: str) -> ProgramPlan:
    """The plan of a test program; ValueError when it is not valid Python."""
    try:
        module = parse_module(source, "test_program.py")
        compile_module(module, "test_program.py")
    except SyntaxError as exc:
        raise ValueError(f"not valid Python: {exc.msg} (line {exc.lineno})") from None
    except (ValueError, MemoryError, RecursionError) as exc:
        raise ValueError(f"not valid Python: {type(exc).__name__}") from None
    tests = tuple(
        node.name
        for node in module.body
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")
    )
    if len(set(tests)) != len(tests):
        raise ValueError("a test function is defined twice")
    loaded = {
        node.id
        for node in ast.walk(module)
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)
    }
    names = sorted(loaded - _top_level_bindings(module) - _BUILTINS)
    return ProgramPlan(tests=tests, names=tuple(names))
