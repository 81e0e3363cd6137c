"""`asserts` tests split into values computed in the sandbox and a verdict computed outside it.

Each assert's test expression becomes a small plan. Its logical skeleton (comparisons, `and`,
`or`, `not`, `math.isclose`) and every Python literal in it stay OUTSIDE; each remaining
sub-expression (a call of the solution, an arithmetic expression, a name) is a *probe* that the
harness evaluates inside the sandbox and sends back as plain data (`values.decode`). So in
`assert f(3) == [1, 2]` only `f(3)` enters the sandbox and the expected list never does, and a
returned object whose `__eq__` always says True cannot pass: it is not plain data.

Limits, stated plainly: a literal that is part of a probe (the 3.5 in `abs(f(2) - 3.5) < 1e-6`)
is visible to the program, and a probe's value is whatever the program makes it. `is` and
`is not` are identity for None, True and False and equality otherwise (plain data has no
identity). The optional message of an assert is ignored.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from reward_specs.caches import Cache
from reward_specs.code.pyparse import parse_module

__all__ = [
    "AssertPlan",
    "Check",
    "ProbeError",
    "compile_plan",
    "evaluate",
    "parse_assert",
    "simple_shape",
]


@dataclass(frozen=True, slots=True)
class Lit:
    value: Any


@dataclass(frozen=True, slots=True)
class Probe:
    index: int


@dataclass(frozen=True, slots=True)
class Compare:
    left: Node
    rest: tuple[tuple[str, Node], ...]


@dataclass(frozen=True, slots=True)
class BoolOp:
    is_and: bool
    operands: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Not:
    operand: Node


@dataclass(frozen=True, slots=True)
class IsClose:
    a: Node
    b: Node
    rel_tol: float
    abs_tol: float


Node = Lit | Probe | Compare | BoolOp | Not | IsClose

Check = Callable[[Callable[[int], Any]], Any]
"""A plan made callable: given `probe` (as for `evaluate`), the test expression's value."""


@dataclass(frozen=True, slots=True)
class AssertPlan:
    source: str
    root: Node
    probes: tuple[str, ...]
    """Expressions evaluated inside the sandbox, in order."""
    check: Check = field(compare=False, repr=False)
    """`evaluate(root, probe)` as one call (`compile_plan`), made once with the plan."""
    simple: tuple[Callable[[Any, Any], Any], Any] | None = field(
        default=None, compare=False, repr=False
    )
    """For the usual shape, one probe compared with one literal (`f(3) == [1, 2]`): the
    operator and the literal, so that a judge can try the comparison without a probe callback
    (`simple_shape`); None for any other shape."""


class ProbeError(Exception):
    """A probe the verdict needs raised in the sandbox (or sent something unusable)."""

    def __init__(self, index: int, outcome: dict[str, Any]) -> None:
        super().__init__(index, outcome)
        self.index = index
        self.outcome = outcome


def _singleton_or_equal(a: Any, b: Any) -> bool:
    singletons = (None, True, False)
    if any(a is s for s in singletons) or any(b is s for s in singletons):
        return a is b
    return bool(a == b)


_OPS: dict[type[ast.cmpop], tuple[str, Callable[[Any, Any], Any]]] = {
    ast.Eq: ("==", operator.eq),
    ast.NotEq: ("!=", operator.ne),
    ast.Lt: ("<", operator.lt),
    ast.LtE: ("<=", operator.le),
    ast.Gt: (">", operator.gt),
    ast.GtE: (">=", operator.ge),
    ast.In: ("in", lambda a, b: a in b),
    ast.NotIn: ("not in", lambda a, b: a not in b),
    ast.Is: ("is", _singleton_or_equal),
    ast.IsNot: ("is not", lambda a, b: not _singleton_or_equal(a, b)),
}
_FUNCS = {name: fn for name, fn in ((s, f) for _, (s, f) in _OPS.items())}


def _literal(node: ast.expr) -> tuple[bool, Any]:
    try:
        return True, ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None


def _is_isclose(node: ast.Call) -> bool:
    f = node.func
    named = (isinstance(f, ast.Name) and f.id == "isclose") or (
        isinstance(f, ast.Attribute)
        and f.attr == "isclose"
        and isinstance(f.value, ast.Name)
        and f.value.id == "math"
    )
    return (
        named
        and len(node.args) == 2
        and not any(isinstance(a, ast.Starred) for a in node.args)
        and all(k.arg in ("rel_tol", "abs_tol") and _literal(k.value)[0] for k in node.keywords)
    )


class _Planner:
    def __init__(self) -> None:
        self.probes: list[str] = []

    def plan(self, node: ast.expr) -> Node:
        ok, value = _literal(node)
        if ok:
            return Lit(value)
        if isinstance(node, ast.Compare):
            left = self.plan(node.left)  # probes in Python's order of evaluation
            rest = tuple(
                (_OPS[type(op)][0], self.plan(right))
                for op, right in zip(node.ops, node.comparators, strict=True)
            )
            return Compare(left, rest)
        if isinstance(node, ast.BoolOp):
            return BoolOp(isinstance(node.op, ast.And), tuple(self.plan(v) for v in node.values))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return Not(self.plan(node.operand))
        if isinstance(node, ast.Call) and _is_isclose(node):
            kw = {k.arg: float(ast.literal_eval(k.value)) for k in node.keywords if k.arg}
            return IsClose(
                self.plan(node.args[0]),
                self.plan(node.args[1]),
                kw.get("rel_tol", 1e-9),
                kw.get("abs_tol", 0.0),
            )
        self.probes.append(ast.unparse(node))
        return Probe(len(self.probes) - 1)


@Cache("code.assert_plans", 4096)
def parse_assert(source: str) -> AssertPlan:
    """The plan of one `assert` statement; ValueError when `source` is not exactly one."""
    try:
        module = parse_module(source.strip())
    except SyntaxError as exc:
        raise ValueError(f"not valid Python: {exc.msg}") from None
    if len(module.body) != 1 or not isinstance(module.body[0], ast.Assert):
        raise ValueError("must be exactly one assert statement")
    planner = _Planner()
    root = planner.plan(module.body[0].test)
    return AssertPlan(
        source=source.strip(),
        root=root,
        probes=tuple(planner.probes),
        check=compile_plan(root),
        simple=simple_shape(root),
    )


def simple_shape(node: Node) -> tuple[Callable[[Any, Any], Any], Any] | None:
    """(operator, literal) when `node` is probe 0 compared once with a literal: its value is
    then `bool(operator(probe(0), literal))`, exactly what `compile_plan` makes of it."""
    if not (isinstance(node, Compare) and len(node.rest) == 1):
        return None
    ((name, right),) = node.rest
    if isinstance(node.left, Probe) and node.left.index == 0 and isinstance(right, Lit):
        return _FUNCS[name], right.value
    return None


def evaluate(node: Node, probe: Callable[[int], Any]) -> Any:
    """The test expression's value, Python's semantics over plain data.

    `probe(i)` returns probe i's decoded value or raises `ProbeError`; it is called only for
    probes the verdict needs (`and`/`or` and chained comparisons short-circuit as in Python).
    Comparing values of incompatible types raises TypeError, as the assert would.
    """
    match node:
        case Lit(value):
            return value
        case Probe(index):
            return probe(index)
        case Not(operand):
            return not evaluate(operand, probe)
        case BoolOp(is_and, operands):
            result: Any = None
            for operand in operands:
                result = evaluate(operand, probe)
                if bool(result) != is_and:
                    return result
            return result
        case Compare(left, rest):
            current = evaluate(left, probe)
            for op, right_node in rest:
                right = evaluate(right_node, probe)
                if not _FUNCS[op](current, right):
                    return False
                current = right
            return True
        case IsClose(a, b, rel_tol, abs_tol):
            return math.isclose(
                evaluate(a, probe), evaluate(b, probe), rel_tol=rel_tol, abs_tol=abs_tol
            )
    raise TypeError(f"unknown plan node {node!r}")


def compile_plan(node: Node) -> Check:
    """`evaluate(node, probe)` as nested closures, built once per plan: each node's fields read
    once here rather than matched on every call. The same value, the same probes asked for in
    the same order, the same exceptions (tests/test_code_parts.py compares the two)."""
    if isinstance(node, Lit):
        value = node.value
        return lambda probe: value
    if isinstance(node, Probe):
        index = node.index
        return lambda probe: probe(index)
    if isinstance(node, Not):
        operand = compile_plan(node.operand)
        return lambda probe: not operand(probe)
    if isinstance(node, BoolOp):
        return _compile_boolop(node.is_and, tuple(compile_plan(o) for o in node.operands))
    if isinstance(node, Compare):
        return _compile_compare(node)
    if isinstance(node, IsClose):
        a, b = compile_plan(node.a), compile_plan(node.b)
        rel_tol, abs_tol = node.rel_tol, node.abs_tol
        return lambda probe: math.isclose(a(probe), b(probe), rel_tol=rel_tol, abs_tol=abs_tol)
    raise TypeError(f"unknown plan node {node!r}")


def _compile_boolop(is_and: bool, operands: tuple[Check, ...]) -> Check:
    def check(probe: Callable[[int], Any]) -> Any:
        result: Any = None
        for operand in operands:
            result = operand(probe)
            if bool(result) != is_and:
                return result
        return result

    return check


def _compile_compare(node: Compare) -> Check:
    if len(node.rest) == 1:  # one operator, the usual shape: no loop
        ((name, right_node),) = node.rest
        op = _FUNCS[name]
        if isinstance(node.left, Probe) and isinstance(right_node, Lit):
            index, value = node.left.index, right_node.value
            return lambda probe: bool(op(probe(index), value))
        left, right = compile_plan(node.left), compile_plan(right_node)
        return lambda probe: bool(op(left(probe), right(probe)))
    first = compile_plan(node.left)
    rest = tuple((_FUNCS[name], compile_plan(r)) for name, r in node.rest)

    def check(probe: Callable[[int], Any]) -> Any:
        current = first(probe)
        for op, right_check in rest:
            right = right_check(probe)
            if not op(current, right):
                return False
            current = right
        return True

    return check
