"""`program` tests in the sandbox: the request that runs the test program's runner
(`sandboxes/runners/py_program.py`, which calls the solution in a process of its own), and
reading the per-test verdicts it reports.

Unlike `fn_name` and `asserts`, the verdict is made INSIDE the sandbox, by the test program
itself: it holds the expected values. What keeps them from the solution is the process boundary
the runner sets up (its docstring says how), and that only the runner's stdout carries results.
"""

from __future__ import annotations

import marshal
from pathlib import Path
from typing import Any

from reward_specs.caches import Cache
from reward_specs.code import values
from reward_specs.code.program import plan_program
from reward_specs.code.reference import CodeConfig, ProgramTests
from reward_specs.code.requests import sandbox_limits
from reward_specs.code.results import FAILED_RUN, TestResult, TestStatus, run_error
from reward_specs.code.values import short
from sandboxes import jsonread
from sandboxes.api import (
    Execution,
    ExecutionResult,
    Limits,
    RunRequest,
    SandboxBackend,
    SandboxError,
    SandboxUnavailable,
)
from sandboxes.runners import PY_HARNESS, PY_PROGRAM, runner_source

__all__ = ["program_request", "run_program_tests"]

_MARK = b"\x1ePROCTOR "
VALUES_FILE = "proctor_values.py"
_STATUSES: frozenset[str] = frozenset(
    ("passed", "wrong_answer", "runtime_error", "memory", "output_limit")
)


@Cache("code.values_source", 1)
def _values_source() -> bytes:
    """`reward_specs/code/values.py` itself: the runner decodes the solution's values with it."""
    return Path(values.__file__).read_bytes()


def program_request(
    code: bytes, tests: ProgramTests, config: CodeConfig, limits: Limits
) -> RunRequest:
    plan = plan_program(tests.program)
    job: dict[str, Any] = {
        "program": tests.program,
        "tests": list(plan.tests),
        "names": list(plan.names),
        "serve": ["python3", "-I", PY_HARNESS, "--serve"],
        "values": VALUES_FILE,
        "max_value_bytes": config.max_value_bytes,
    }
    return RunRequest(
        files={"solution.py": code},
        shared_files={
            PY_PROGRAM: runner_source(PY_PROGRAM),
            PY_HARNESS: runner_source(PY_HARNESS),
            VALUES_FILE: _values_source(),
        },
        # On stdin, never in a file: the solution, started later, could read a file.
        executions=[Execution(("python3", "-I", PY_PROGRAM), marshal.dumps(job))],
        limits=limits,
    )


def _reported(stdout: bytes) -> tuple[dict[int, dict[str, Any]], str | None]:
    found: dict[int, dict[str, Any]] = {}
    fatal = None
    for line in stdout.split(b"\n"):
        if not line.startswith(_MARK):
            continue
        try:
            msg = jsonread.loads(line[len(_MARK) :])
        except (ValueError, RecursionError):  # cut off at the output limit
            continue
        if not isinstance(msg, dict):
            continue
        if "fatal" in msg:
            fatal = str(msg["fatal"])
        elif isinstance(msg.get("i"), int) and msg.get("status") in _STATUSES:
            found.setdefault(msg["i"], msg)
    return found, fatal


def run_program_tests(
    source: bytes, tests: ProgramTests, config: CodeConfig, sandbox: SandboxBackend | None
) -> tuple[list[TestResult], list[ExecutionResult]]:
    """The test program's verdicts, one per test (a test it never reported failed the way its
    run ended), and the run's execution, in `sandbox`: the checkers' pool (`ctx.checker_sandbox`,
    `sandboxes.checkers`), not the responses': the test program never enters a sandbox where
    responses run; in the checkers' pool every untrusted program (the solution here, a checker
    there) is exec'd afresh by a trusted runner."""
    if sandbox is None:
        raise SandboxUnavailable(
            "program tests run in the checkers' pool, where no response runs, "
            "and none is configured (ctx.checker_sandbox is None)"
        )
    run = sandbox.run(program_request(source, tests, config, sandbox_limits(config)))
    if len(run.executions) != 1:
        raise RuntimeError(
            f"sandbox {sandbox.name!r} returned {len(run.executions)} results for 1 execution"
        )
    (ex,) = run.executions
    found, fatal = _reported(ex.stdout)
    if fatal is not None:
        raise SandboxError(f"the program runner could not start: {short(fatal, 300)}")
    unfinished: TestStatus = FAILED_RUN.get(ex.status, "runtime_error")
    limit = config.diff_chars
    results = []
    for i in range(len(plan_program(tests.program).tests) or 1):
        msg = found.get(i)
        if msg is None:
            error = run_error(ex, limit) if unfinished == "runtime_error" else None
            result = TestResult(unfinished, error=error or "not reported")
        else:
            status: TestStatus = msg["status"]
            error = str(msg.get("error") or "") or None
            result = TestResult(status, error=short(error, 4 * limit) if error else None)
            cpu = msg.get("cpu_s")
            result.time = float(cpu) if isinstance(cpu, (int, float)) else 0.0
        results.append(result)
    return results, [ex]
