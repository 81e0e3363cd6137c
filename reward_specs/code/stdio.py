"""Comparing a program's standard output with the expected output of a stdio test.

Both texts are split into lines (\\r\\n and \\r count as \\n), trailing whitespace is removed from
each line, and trailing blank lines are dropped. The outputs match when they have the same number
of lines and each pair of lines is either identical or has the same whitespace-separated tokens,
where two tokens match when they are identical, or both are numbers, at least one of them written
with a decimal point or an exponent, within the float tolerance (`values.close`). Integers must be
equal exactly; comparison is case-sensitive. A reference's `compare` may set its own
tolerances (up to the spec's `max_reference_tol`) and make the comparison case-insensitive
(both texts case-folded).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from reward_specs.code.reference import CodeConfig, StdioTests
from reward_specs.code.results import FAILED_RUN, TestResult, run_error
from reward_specs.code.values import close, short
from sandboxes.api import RunResult

__all__ = ["Mismatch", "compare_stdout", "judge_stdio"]

_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")
_INTEGER = re.compile(r"^[+-]?\d+$")


@dataclass(frozen=True, slots=True)
class Mismatch:
    line: int
    """1-based line of the first difference."""
    expected: str
    got: str


def _lines(text: str) -> list[str]:
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def _canonical_int(token: str) -> str:
    """Without sign noise or leading zeros (no int(): decimal conversion is capped in length)."""
    digits = token.lstrip("+-").lstrip("0") or "0"
    return "-" + digits if token.startswith("-") and digits != "0" else digits


def _tokens_match(a: str, b: str, rel_tol: float, abs_tol: float) -> bool:
    if a == b:
        return True
    if not (_NUMBER.match(a) and _NUMBER.match(b)):
        return False
    if _INTEGER.match(a) and _INTEGER.match(b):
        return _canonical_int(a) == _canonical_int(b)
    return close(float(a), float(b), rel_tol, abs_tol)


def _line_match(got: str, expected: str, rel_tol: float, abs_tol: float) -> bool:
    if got == expected:
        return True
    g, e = got.split(), expected.split()
    return len(g) == len(e) and all(
        _tokens_match(x, y, rel_tol, abs_tol) for x, y in zip(g, e, strict=True)
    )


def compare_stdout(
    got: str, expected: str, rel_tol: float, abs_tol: float, case_sensitive: bool = True
) -> Mismatch | None:
    """None when the outputs match, else the first differing line ("" past the end)."""
    g, e = _lines(got), _lines(expected)
    if not case_sensitive:
        g, e = [line.casefold() for line in g], [line.casefold() for line in e]
    for n in range(max(len(g), len(e))):
        gl = g[n] if n < len(g) else ""
        el = e[n] if n < len(e) else ""
        if n >= len(g) or n >= len(e) or not _line_match(gl, el, rel_tol, abs_tol):
            return Mismatch(line=n + 1, expected=el, got=gl)
    return None


def _tolerances(tests: StdioTests, config: CodeConfig) -> tuple[float, float, bool]:
    """(rel_tol, abs_tol, case_sensitive): the reference's `compare` over the spec's."""
    rel, abs_, case = config.float_rel_tol, config.float_abs_tol, True
    if tests.compare is not None:
        c = tests.compare
        rel = rel if c.float_rel_tol is None else c.float_rel_tol
        abs_ = abs_ if c.float_abs_tol is None else c.float_abs_tol
        case = c.case_sensitive
    return rel, abs_, case


def judge_stdio(run: RunResult, tests: StdioTests, config: CodeConfig) -> list[TestResult]:
    results = []
    rel_tol, abs_tol, case_sensitive = _tolerances(tests, config)
    for test, ex in zip(tests.stdio, run.executions, strict=True):
        if ex.status == "ok" and config.test_time_s is not None and ex.cpu_s > config.test_time_s:
            results.append(TestResult("timeout", ex.cpu_s, error="over the test's time limit"))
            continue
        if ex.status != "ok":
            status = FAILED_RUN[ex.status]
            error = run_error(ex, config.diff_chars) if status == "runtime_error" else None
            results.append(TestResult(status, ex.cpu_s, error=error))
            continue
        if tests.checker is not None:  # the checker decides (`reward_specs.code.checker`)
            results.append(TestResult("passed", ex.cpu_s))
            continue
        got = ex.stdout.decode("utf-8", "replace")
        mismatch = compare_stdout(got, test.output, rel_tol, abs_tol, case_sensitive)
        if mismatch is None:
            results.append(TestResult("passed", ex.cpu_s))
        else:
            diff = {
                "line": mismatch.line,
                "expected": short(mismatch.expected, config.diff_chars),
                "got": short(mismatch.got, config.diff_chars),
            }
            results.append(TestResult("wrong_answer", ex.cpu_s, diff=diff))
    return results
