"""Python tests through the trusted harness (`sandboxes/runners/py_harness.py`), and the C++
fn_name harness's output: reading the values a run reports and judging them here, outside the
sandbox, so that expected values never enter it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from reward_specs.caches import Cache
from reward_specs.code.asserts import AssertPlan, ProbeError, parse_assert
from reward_specs.code.reference import AssertTests, CodeConfig, FnTests, count_tests
from reward_specs.code.requests import harness_request, sandbox_limits
from reward_specs.code.results import FAILED_RUN, TestResult, TestStatus, run_error
from reward_specs.code.values import PLAIN, Malformed, decode, json_equal, short
from sandboxes import jsonread
from sandboxes.api import ExecutionResult, RunResult, SandboxBackend

__all__ = ["judge_cpp_fn", "run_python_tests"]


_MARK = b"\x1ePROCTOR "


@dataclass(slots=True)
class _HarnessOutput:
    fatal: str | None
    values: dict[int, dict[str, Any]]
    exits: dict[int, dict[str, Any]]
    tampered: set[int]
    fatal_from: int = 0
    """The first test the fatal error applies to (the `first` of the run that reported it)."""


def _read_harness(stdout: bytes) -> _HarnessOutput:
    """The harness's lines; a test index reported twice is void (the program wrote one)."""
    out = _HarnessOutput(fatal=None, values={}, exits={}, tampered=set())
    mark, start, loads = _MARK, len(_MARK), jsonread.loads
    for line in stdout.split(b"\n"):
        if not line.startswith(mark):
            continue
        try:
            msg = loads(line[start:])
        except (ValueError, RecursionError):  # cut off at the output limit, or forged
            continue
        if not isinstance(msg, dict):
            continue
        if "fatal" in msg:
            out.fatal = out.fatal or short(str(msg["fatal"]), 300)
            continue
        i = msg.get("i")
        if not isinstance(i, int) or isinstance(i, bool):
            continue
        table = out.values if ("values" in msg or "too_large" in msg) else out.exits
        if i in table:
            out.tampered.add(i)
        table[i] = msg
    return out


def _probe_value(outcome: Any) -> Any:
    """A probe's decoded value; ProbeError when it raised or is unusable."""
    if not isinstance(outcome, dict):
        raise ProbeError(-1, {"err": "malformed result"})
    if "ok" in outcome:
        try:
            return decode(outcome["ok"])
        except Malformed as exc:
            raise ProbeError(-1, {"err": f"malformed result: {exc}"}) from None
    raise ProbeError(-1, outcome)


def _probe_failure(outcome: dict[str, Any], limit: int) -> TestResult:
    if "unserialisable" in outcome:
        return TestResult(
            "wrong_answer", error=short(f"not plain data: {outcome['unserialisable']}", limit)
        )
    if outcome.get("memory"):
        return TestResult("memory", error="MemoryError")
    return TestResult("runtime_error", error=short(str(outcome.get("err", "error")), limit))


def _passes_plainly(i: int, msg: dict[str, Any], out: _HarnessOutput, plan: AssertPlan) -> bool:
    """True only when `_judge_harness` would find test `i` (its result line `msg`) passed: not
    void, not too large, a plan of the simple shape (`AssertPlan.simple`) and the comparison true
    on its one probe's decoded value. False decides nothing: the full judge then runs and makes
    every other verdict and its diff, with the same comparison on the same value."""
    shape = plan.simple
    if shape is None or (out.fatal is not None and i >= out.fatal_from) or i in out.tampered:
        return False
    values = msg.get("values")
    if "too_large" in msg or type(values) is not list or len(values) != 1:
        return False
    outcome = values[0]
    if type(outcome) is not dict or "ok" not in outcome:
        return False
    got = outcome["ok"]
    if type(got) not in PLAIN:
        try:
            got = decode(got)
        except Malformed:
            return False
    op, expected = shape
    try:
        return bool(op(got, expected))
    except (TypeError, ValueError, OverflowError):  # the full judge reports it
        return False


def _judge_values(
    i: int,
    values: list[Any],
    tests: FnTests | AssertTests,
    plans: Sequence[AssertPlan],
    config: CodeConfig,
) -> TestResult:
    limit = config.diff_chars
    try:
        if isinstance(tests, FnTests):
            if len(values) != 1:
                raise ProbeError(0, {"err": "malformed result"})
            got = _probe_value(values[0])
            expected = tests.cases[i].expected
            if json_equal(got, expected, config.float_rel_tol, config.float_abs_tol):
                return TestResult("passed")
            diff = {"expected": short(repr(expected), limit), "got": short(repr(got), limit)}
            return TestResult("wrong_answer", diff=diff)
        plan = plans[i]
        if len(values) != len(plan.probes):
            raise ProbeError(0, {"err": "malformed result"})
        asked: list[tuple[int, Any]] = []

        def probe(k: int) -> Any:
            value = _probe_value(values[k])
            asked.append((k, value))
            return value

        if plan.check(probe):
            return TestResult("passed")
        seen: dict[str, Any] = {}  # each probe's source once, where first asked, its last value
        for k, value in asked:
            seen[plan.probes[k]] = value
        got_text = ", ".join(f"{src} = {short(repr(v), limit)}" for src, v in seen.items())
        diff = {"expected": short(plan.source, limit), "got": short(got_text, limit)}
        return TestResult("wrong_answer", diff=diff)
    except ProbeError as exc:
        return _probe_failure(exc.outcome, limit)
    except (TypeError, ValueError, OverflowError) as exc:  # what the assert itself would raise
        return TestResult("runtime_error", error=short(f"{type(exc).__name__}: {exc}", limit))


def judge_cpp_fn(run: RunResult, tests: FnTests, config: CodeConfig) -> list[TestResult]:
    results = []
    for i, ex in enumerate(run.executions):
        if ex.status == "ok" and config.test_time_s is not None and ex.cpu_s > config.test_time_s:
            result = TestResult("timeout", error="over the test's time limit")
        elif ex.status != "ok":
            status = FAILED_RUN[ex.status]
            error = run_error(ex, config.diff_chars) if status == "runtime_error" else None
            result = TestResult(status, error=error)
        else:
            out = _read_harness(ex.stdout)
            msg = out.values.get(0)
            if msg is None or out.tampered:
                result = TestResult("runtime_error", error="no single result")
            elif not isinstance(msg.get("values"), list):
                result = TestResult("runtime_error", error="malformed result")
            else:
                result = _judge_values(i, msg["values"], tests, (), config)
        result.time = ex.cpu_s
        results.append(result)
    return results


_NO_EXIT: dict[str, Any] = {}
"""A test with no exit line (read only, never written)."""


def _judge_harness(
    runs: Sequence[ExecutionResult],
    out: _HarnessOutput,
    tests: FnTests | AssertTests,
    plans: Sequence[AssertPlan],
    config: CodeConfig,
) -> list[TestResult]:
    limit = config.diff_chars
    # A test the harness never reported failed the way the last run did.
    last = runs[-1]
    unfinished: TestStatus = FAILED_RUN.get(last.status, "runtime_error")
    results = []
    values, exits = out.values, out.exits
    for i in range(count_tests(tests)):
        msg = values.get(i)
        if msg is not None and plans and _passes_plainly(i, msg, out, plans[i]):
            cpu = msg.get("cpu_s", 0.0)
            results.append(
                TestResult("passed", float(cpu) if isinstance(cpu, (int, float)) else 0.0)
            )
            continue
        exit_info = exits.get(i, _NO_EXIT)
        cpu = (exit_info if msg is None else msg).get("cpu_s", 0.0)
        time = float(cpu) if isinstance(cpu, (int, float)) else 0.0
        if out.fatal is not None and i >= out.fatal_from:
            result = TestResult("runtime_error", error=out.fatal)
        elif i in out.tampered:
            result = TestResult("runtime_error", error="result reported twice")
        elif msg is not None:
            if "too_large" in msg:
                result = TestResult("output_limit", error="return value too large")
            elif isinstance(msg.get("values"), list):
                result = _judge_values(i, msg["values"], tests, plans, config)
            else:
                result = TestResult("runtime_error", error="malformed result")
        elif exit_info.get("signal") is not None:
            result = TestResult("runtime_error", error=f"killed by signal {exit_info['signal']}")
        elif exit_info:
            result = TestResult("runtime_error", error=f"exited ({exit_info.get('exit')})")
        else:
            error = run_error(last, limit) if unfinished == "runtime_error" else None
            result = TestResult(unfinished, error=error)
        result.time = time
        results.append(result)
    return results


def _merge(merged: _HarnessOutput, out: _HarnessOutput) -> None:
    """A later run's results into the earlier ones'; an index reported again is void."""
    for table, merged_table in ((out.values, merged.values), (out.exits, merged.exits)):
        for i, msg in table.items():
            if i in merged_table:
                merged.tampered.add(i)
            merged_table[i] = msg
    merged.tampered |= out.tampered


def _run_harness(
    source: bytes,
    job: dict[str, Any],
    total: int,
    config: CodeConfig,
    sandbox: SandboxBackend,
) -> tuple[list[ExecutionResult], _HarnessOutput]:
    """Run the harness on tests 0.., and again from the next test each time a test ended the
    harness's process (os._exit, a signal, a crash), until every test has a result or the run
    was stopped by the sandbox. The runs share the CPU budget and the wall-clock backstop.

    Returns every run's execution (a final `skipped` one when the budget ran out between runs)
    and their results merged: an index reported twice, in one run or across runs, is void."""
    limits = sandbox_limits(config)
    merged = _HarnessOutput(fatal=None, values={}, exits={}, tampered=set())
    runs: list[ExecutionResult] = []
    first = 0
    while True:
        run = sandbox.run(harness_request(source, job, config, limits, first))
        if len(run.executions) != 1:
            raise RuntimeError(
                f"sandbox {sandbox.name!r} returned {len(run.executions)} results for 1 execution"
            )
        (ex,) = run.executions
        out = _read_harness(ex.stdout)
        if runs:
            _merge(merged, out)
        else:  # the first run: nothing to merge it with
            merged = out
        runs.append(ex)
        if out.fatal is not None:
            merged.fatal, merged.fatal_from = out.fatal, first
            break
        if ex.stopped or ex.status == "skipped":
            break
        died = next((i for i in range(first, total) if i not in out.values), None)
        if died is None:
            break
        # Test `died` ended the process: it fails alone, and a fresh run takes the next one.
        reported = sum(
            float(m["cpu_s"])
            for m in out.values.values()
            if isinstance(m.get("cpu_s"), (int, float))
        )
        merged.exits[died] = {
            "exit": ex.exit_code,
            "signal": ex.signal,
            "cpu_s": max(0.0, round(ex.cpu_s - reported, 6)),
        }
        first = died + 1
        if first >= total:
            break
        cpu_left = limits.cpu_budget_s - ex.cpu_s
        wall_left = limits.wall_cap_s - ex.wall_s
        if cpu_left <= 0 or wall_left <= 0:
            runs.append(ExecutionResult(status="skipped"))
            break
        limits = replace(limits, cpu_budget_s=cpu_left, wall_cap_s=wall_left)
    return runs, merged


_JOBS: Cache[int, tuple[FnTests | AssertTests, list[AssertPlan], dict[str, Any]]] = Cache(
    "code.harness_jobs", 256
)
"""The harness's job and the assert plans of a tests object, by its identity (an entry holds it,
so the id cannot be reused while it is kept): every item of a reference shares one validated
object, so its asserts are looked up once per batch, not once per item."""


def _job(tests: FnTests | AssertTests) -> tuple[list[AssertPlan], dict[str, Any]]:
    held = _JOBS.get(id(tests))
    if held is not None and held[0] is tests:
        return held[1], held[2]
    plans: list[AssertPlan] = []
    if isinstance(tests, FnTests):
        job: dict[str, Any] = {
            "mode": "call",
            "fn_name": tests.fn_name,
            "tests": [c.args for c in tests.cases],
        }
        if tests.prelude:
            job["prelude"] = tests.prelude
    else:
        plans = [parse_assert(a) for a in tests.asserts]
        job = {"mode": "eval", "setup": tests.setup, "tests": [list(p.probes) for p in plans]}
    _JOBS.put(id(tests), (tests, plans, job))
    return plans, job


def run_python_tests(
    source: bytes, tests: FnTests | AssertTests, config: CodeConfig, sandbox: SandboxBackend
) -> tuple[list[TestResult], list[ExecutionResult]]:
    """Python fn_name or asserts tests: the harness's runs, and each test's result."""
    plans, job = _job(tests)
    executions, out = _run_harness(source, job, count_tests(tests), config, sandbox)
    return _judge_harness(executions, out, tests, plans, config), executions
