"""Code: run the response's program against the item's tests in a sandbox; score = passed / total.

Semantics (ProRL, section 2.2), every number below is a `CodeConfig` field pinned by the spec:

- The program is the last fenced block of the item's language, else the last bare fence, else
  the whole response (`reward_specs.code.extract`); no code at all is parsed=false.
- A Python syntax error scores 0 without running anything: the code is checked OUTSIDE the
  sandbox with `compile()`, which parses and compiles to byte code but never executes it (the
  sandbox runs the same CPython minor version). A C++ program is compiled INSIDE the sandbox
  under the same memory limits and `build_cpu_s`; a compile error scores 0.
- All tests of one response share `budget_s` CPU seconds; using more (or hitting the wall-clock
  backstop `wall_cap_s`) scores 0 whatever passed before. Otherwise score = passed / total and
  success = all passed; `details.tests` has one entry per test with its status (passed,
  wrong_answer, runtime_error, timeout, memory, output_limit), CPU time and a short diff.
- Test formats. `stdio` (Python, C++): one sandboxed execution per test, stdout compared as in
  `reward_specs.code.stdio`. `fn_name` + `cases` and `asserts` in Python: one execution of the
  trusted harness `sandboxes/runners/py_harness.py`, which loads the solution, then runs the
  tests in order in the same process, as a test file would; a test that ends its process
  (`os._exit`, a signal, a crash) fails alone, and a fresh run of the harness (the solution
  loaded anew) carries on with the next one, within what is left of the same budget and
  backstop. `fn_name` in C++: the solution is
  compiled with `sandboxes/runners/cpp_harness.hpp` (a free function, or a method of a class
  `Solution` when the code defines one) and each case is one execution. In every case only
  values leave the sandbox and the verdict is computed here, so expected values never enter it
  (`reward_specs.code.asserts`, `reward_specs.code.values`). `asserts` are Python only.
- A failure of the sandbox machinery (`SandboxError`) propagates: the engine reports
  `infra_error`, never a wrong answer. So does a missing sandbox (`ctx.sandbox is None`).
- Identical (code, tests, config, backend) are run once: a bounded LRU with de-duplication of
  work in flight (`reward_specs.code.cache`).

The scorer only waits on the sandbox, holds no per-call state outside the locked cache, and is
safe to call from many threads (`executor="thread"`).
"""

from __future__ import annotations

import hashlib
import json
import marshal
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    field_validator,
    model_validator,
)

from reward_specs.code.asserts import AssertPlan, ProbeError, evaluate, parse_assert
from reward_specs.code.cache import SingleFlightCache
from reward_specs.code.extract import Language, extract_code
from reward_specs.code.stdio import compare_stdout
from reward_specs.code.values import Malformed, decode, json_equal, short
from reward_specs.scorer import (
    DomainConfig,
    Example,
    InvalidReference,
    Judgement,
    ReferenceModel,
    ScoreContext,
    Scorer,
)
from sandboxes.api import (
    Execution,
    ExecutionResult,
    Limits,
    RunRequest,
    RunResult,
    SandboxBackend,
    SandboxError,
    SandboxUnavailable,
)
from sandboxes.runners import CPP_HARNESS, PY_HARNESS, runner_source

__all__ = ["SCORER", "CodeConfig", "CodeReference", "clear_cache", "score_code"]

TestStatus = Literal["passed", "wrong_answer", "runtime_error", "timeout", "memory", "output_limit"]

CACHE_SIZE = 8192
"""Verdicts kept per scorer process (a few KB each)."""


class CodeConfig(DomainConfig):
    budget_s: float = Field(5.0, gt=0, le=600)
    """CPU seconds (user + system, every process the program starts) shared by ALL tests of one
    response, including interpreter start-up and the test harness, excluding C++ compilation.
    A response that needs more scores 0, whatever it passed before the budget ran out."""
    wall_cap_s: float = Field(10.0, gt=0, le=1200)
    """Wall-clock backstop over all tests of one response, for programs that sleep or block
    instead of computing; hitting it counts as exceeding the budget (score 0). It is a backstop
    only: keep it well above `budget_s` so that machine load cannot change a verdict."""
    build_cpu_s: float = Field(10.0, gt=0, le=600)
    """CPU seconds for compiling a C++ program; more is a compile error (score 0)."""
    memory_mb: int = Field(512, ge=32, le=65536)
    """Memory of the program (and of the compiler); exceeding it fails the test as `memory`."""
    output_limit_bytes: int = Field(1 << 20, ge=1024)
    """stdout + stderr of one execution: one stdio test, or the harness run of all fn_name or
    asserts tests; more is cut off and the tests not yet finished fail as `output_limit`."""
    max_processes: int = Field(64, ge=1, le=4096)
    """Processes and threads the program may have at once (fork bombs fail, not the host)."""
    max_value_bytes: int = Field(64 * 1024, ge=256)
    """Serialised size of one fn_name return value, or of one assert's probed values; more fails
    that test as `output_limit`."""
    float_rel_tol: float = Field(1e-6, ge=0)
    """Relative tolerance when a stdio token or an fn_name value involves a float; two integers
    are compared exactly. asserts follow Python's own `==` (exact)."""
    float_abs_tol: float = Field(1e-6, ge=0)
    """Absolute tolerance, as above: |a - b| <= max(abs_tol, rel_tol * max(|a|, |b|))."""
    max_tests: int = Field(100, ge=1, le=10000)
    """An item with more tests than this is invalid (not silently truncated)."""
    max_code_bytes: int = Field(256 * 1024, ge=1024)
    """A longer program scores 0 without running (reason `code_too_long`)."""
    cpp_flags: tuple[str, ...] = ("-std=c++17", "-O2", "-pipe")
    """g++ flags; the program is compiled as `g++ <flags> -o main main.cpp`."""
    diff_chars: int = Field(120, ge=16, le=10000)
    """Length of the expected/got excerpts in `details.tests[].diff`."""

    @model_validator(mode="after")
    def _backstop_above_budget(self) -> CodeConfig:
        if self.wall_cap_s < self.budget_s:
            raise ValueError("wall_cap_s must be at least budget_s (it is only a backstop)")
        return self


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, coerce_numbers_to_str=True)


class StdioTest(_Strict):
    input: str = ""
    output: str


class StdioTests(_Strict):
    stdio: list[StdioTest] = Field(..., min_length=1)


class FnCase(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    args: list[Any]
    expected: Any


class FnTests(_Strict):
    fn_name: str = Field(..., pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    cases: list[FnCase] = Field(..., min_length=1)


class AssertTests(_Strict):
    asserts: list[str] = Field(..., min_length=1)
    setup: str = ""

    @field_validator("asserts")
    @classmethod
    def _each_one_assert(cls, asserts: list[str]) -> list[str]:
        for i, source in enumerate(asserts):
            try:
                parse_assert(source)
            except ValueError as exc:
                raise ValueError(f"asserts[{i}]: {exc}") from None
        return asserts


def _tests_shape(value: Any) -> str | None:
    """Which shape of `tests` a value means, by its one identifying key, so that a mistake is
    reported against that shape alone (`tests.asserts: must be a list of strings`), not against
    every alternative."""
    if isinstance(value, dict):
        return next((key for key in ("stdio", "fn_name", "asserts") if key in value), None)
    if isinstance(value, StdioTests | FnTests | AssertTests):
        return {StdioTests: "stdio", FnTests: "fn_name", AssertTests: "asserts"}[type(value)]
    return None


TestsShape = Annotated[
    Annotated[StdioTests, Tag("stdio")]
    | Annotated[FnTests, Tag("fn_name")]
    | Annotated[AssertTests, Tag("asserts")],
    Discriminator(
        _tests_shape,
        custom_error_type="tests_shape",
        custom_error_message="`tests` must be an object with `stdio`, `fn_name` and `cases`, "
        "or `asserts`",
    ),
]


class CodeReference(ReferenceModel):
    language: Language
    tests: TestsShape


def _count(tests: StdioTests | FnTests | AssertTests) -> int:
    match tests:
        case StdioTests():
            return len(tests.stdio)
        case FnTests():
            return len(tests.cases)
        case AssertTests():
            return len(tests.asserts)


# ----------------------------------------------------------------- building the sandbox job


def _limits(config: CodeConfig) -> Limits:
    return Limits(
        cpu_budget_s=config.budget_s,
        wall_cap_s=config.wall_cap_s,
        build_cpu_s=config.build_cpu_s,
        memory_bytes=config.memory_mb * 1024 * 1024,
        output_bytes=config.output_limit_bytes,
        max_processes=config.max_processes,
    )


def _stdio_request(
    code: bytes, language: Language, tests: StdioTests, config: CodeConfig
) -> RunRequest:
    stdins = [t.input.encode("utf-8", "surrogateescape") for t in tests.stdio]
    if language == "python":
        argv: tuple[str, ...] = ("python3", "-I", "solution.py")
        return RunRequest(
            files={"solution.py": code},
            executions=[Execution(argv, stdin) for stdin in stdins],
            limits=_limits(config),
        )
    return RunRequest(
        files={"main.cpp": code},
        build=Execution(("g++", *config.cpp_flags, "-o", "main", "main.cpp")),
        executions=[Execution(("./main",), stdin) for stdin in stdins],
        limits=_limits(config),
    )


_SOLUTION_CLASS = re.compile(rb"\b(class|struct)\s+Solution\b")


def _cpp_fn_request(code: bytes, tests: FnTests, config: CodeConfig) -> RunRequest:
    """The solution compiled with the C++ harness; one execution per case, arguments on stdin."""
    target = f"&Solution::{tests.fn_name}" if _SOLUTION_CLASS.search(code) else f"&{tests.fn_name}"
    main = (
        f'#include "{CPP_HARNESS}"\n#line 1 "main.cpp"\n'.encode()
        + code
        + f"\nsigned main() {{ return proctor::run({target}); }}\n".encode()
    )
    return RunRequest(
        files={"main.cpp": main},
        shared_files={CPP_HARNESS: runner_source(CPP_HARNESS)},
        build=Execution(("g++", *config.cpp_flags, "-o", "main", "main.cpp")),
        executions=[Execution(("./main",), json.dumps(case.args).encode()) for case in tests.cases],
        limits=_limits(config),
    )


def _harness_request(
    code: bytes, job: dict[str, Any], config: CodeConfig, limits: Limits
) -> RunRequest:
    job = {**job, "solution": "solution.py", "max_value_bytes": config.max_value_bytes}
    return RunRequest(
        files={"solution.py": code, "job.marshal": marshal.dumps(job)},
        # The same bytes object every time (cached): a backend sends it to a sandbox once, and
        # the supervisor compiles it once.
        shared_files={PY_HARNESS: runner_source(PY_HARNESS)},
        executions=[Execution(("python3", "-I", PY_HARNESS, "job.marshal"))],
        limits=limits,
    )


# ----------------------------------------------------------------- reading the results


@dataclass(slots=True)
class _TestResult:
    status: TestStatus
    time: float = 0.0
    diff: dict[str, Any] | None = None
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"status": self.status, "time": round(self.time, 4)}
        if self.diff is not None:
            out["diff"] = self.diff
        if self.error is not None:
            out["error"] = self.error
        return out


_FAILED_RUN: dict[str, TestStatus] = {
    "runtime_error": "runtime_error",
    "timeout": "timeout",
    "memory": "memory",
    "output_limit": "output_limit",
    "skipped": "timeout",
}


def _tail(data: bytes, limit: int) -> str:
    text = data.decode("utf-8", "replace").strip()
    return text if len(text) <= limit else "..." + text[-(limit - 3) :]


def _run_error(result: ExecutionResult, limit: int) -> str | None:
    parts = []
    if result.signal is not None:
        parts.append(f"killed by signal {result.signal}")
    elif result.exit_code not in (None, 0):
        parts.append(f"exit code {result.exit_code}")
    if result.stderr:
        parts.append(_tail(result.stderr, limit))
    return "; ".join(parts) or None


def _judge_stdio(run: RunResult, tests: StdioTests, config: CodeConfig) -> list[_TestResult]:
    results = []
    for test, ex in zip(tests.stdio, run.executions, strict=True):
        if ex.status != "ok":
            status = _FAILED_RUN[ex.status]
            error = _run_error(ex, config.diff_chars) if status == "runtime_error" else None
            results.append(_TestResult(status, ex.cpu_s, error=error))
            continue
        got = ex.stdout.decode("utf-8", "replace")
        mismatch = compare_stdout(got, test.output, config.float_rel_tol, config.float_abs_tol)
        if mismatch is None:
            results.append(_TestResult("passed", ex.cpu_s))
        else:
            diff = {
                "line": mismatch.line,
                "expected": short(mismatch.expected, config.diff_chars),
                "got": short(mismatch.got, config.diff_chars),
            }
            results.append(_TestResult("wrong_answer", ex.cpu_s, diff=diff))
    return results


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
    for line in stdout.split(b"\n"):
        if not line.startswith(_MARK):
            continue
        try:
            msg = json.loads(line[len(_MARK) :])
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


def _probe_failure(outcome: dict[str, Any], limit: int) -> _TestResult:
    if "unserialisable" in outcome:
        return _TestResult(
            "wrong_answer", error=short(f"not plain data: {outcome['unserialisable']}", limit)
        )
    if outcome.get("memory"):
        return _TestResult("memory", error="MemoryError")
    return _TestResult("runtime_error", error=short(str(outcome.get("err", "error")), limit))


def _judge_values(
    i: int,
    values: list[Any],
    tests: FnTests | AssertTests,
    plans: Sequence[AssertPlan],
    config: CodeConfig,
) -> _TestResult:
    limit = config.diff_chars
    try:
        if isinstance(tests, FnTests):
            if len(values) != 1:
                raise ProbeError(0, {"err": "malformed result"})
            got = _probe_value(values[0])
            expected = tests.cases[i].expected
            if json_equal(got, expected, config.float_rel_tol, config.float_abs_tol):
                return _TestResult("passed")
            diff = {"expected": short(repr(expected), limit), "got": short(repr(got), limit)}
            return _TestResult("wrong_answer", diff=diff)
        plan = plans[i]
        if len(values) != len(plan.probes):
            raise ProbeError(0, {"err": "malformed result"})
        seen: dict[str, Any] = {}

        def probe(k: int) -> Any:
            value = _probe_value(values[k])
            seen[plan.probes[k]] = value
            return value

        if evaluate(plan.root, probe):
            return _TestResult("passed")
        got_text = ", ".join(f"{src} = {short(repr(v), limit)}" for src, v in seen.items())
        diff = {"expected": short(plan.source, limit), "got": short(got_text, limit)}
        return _TestResult("wrong_answer", diff=diff)
    except ProbeError as exc:
        return _probe_failure(exc.outcome, limit)
    except (TypeError, ValueError, OverflowError) as exc:  # what the assert itself would raise
        return _TestResult("runtime_error", error=short(f"{type(exc).__name__}: {exc}", limit))


def _judge_cpp_fn(run: RunResult, tests: FnTests, config: CodeConfig) -> list[_TestResult]:
    results = []
    for i, ex in enumerate(run.executions):
        if ex.status != "ok":
            status = _FAILED_RUN[ex.status]
            error = _run_error(ex, config.diff_chars) if status == "runtime_error" else None
            result = _TestResult(status, error=error)
        else:
            out = _read_harness(ex.stdout)
            msg = out.values.get(0)
            if msg is None or out.tampered:
                result = _TestResult("runtime_error", error="no single result")
            elif not isinstance(msg.get("values"), list):
                result = _TestResult("runtime_error", error="malformed result")
            else:
                result = _judge_values(i, msg["values"], tests, (), config)
        result.time = ex.cpu_s
        results.append(result)
    return results


def _judge_harness(
    runs: Sequence[ExecutionResult],
    out: _HarnessOutput,
    tests: FnTests | AssertTests,
    plans: Sequence[AssertPlan],
    config: CodeConfig,
) -> list[_TestResult]:
    limit = config.diff_chars
    # A test the harness never reported failed the way the last run did.
    last = runs[-1]
    unfinished: TestStatus = _FAILED_RUN.get(last.status, "runtime_error")
    results = []
    for i in range(_count(tests)):
        exit_info = out.exits.get(i, {})
        cpu = out.values.get(i, exit_info).get("cpu_s", 0.0)
        time = float(cpu) if isinstance(cpu, (int, float)) else 0.0
        if out.fatal is not None and i >= out.fatal_from:
            result = _TestResult("runtime_error", error=out.fatal)
        elif i in out.tampered:
            result = _TestResult("runtime_error", error="result reported twice")
        elif i in out.values:
            msg = out.values[i]
            if "too_large" in msg:
                result = _TestResult("output_limit", error="return value too large")
            elif isinstance(msg.get("values"), list):
                result = _judge_values(i, msg["values"], tests, plans, config)
            else:
                result = _TestResult("runtime_error", error="malformed result")
        elif exit_info.get("signal") is not None:
            result = _TestResult("runtime_error", error=f"killed by signal {exit_info['signal']}")
        elif exit_info:
            result = _TestResult("runtime_error", error=f"exited ({exit_info.get('exit')})")
        else:
            error = _run_error(last, limit) if unfinished == "runtime_error" else None
            result = _TestResult(unfinished, error=error)
        result.time = time
        results.append(result)
    return results


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
    limits = _limits(config)
    merged = _HarnessOutput(fatal=None, values={}, exits={}, tampered=set())
    runs: list[ExecutionResult] = []
    first = 0
    while True:
        run = sandbox.run(_harness_request(source, {**job, "first": first}, config, limits))
        if len(run.executions) != 1:
            raise RuntimeError(
                f"sandbox {sandbox.name!r} returned {len(run.executions)} results for 1 execution"
            )
        (ex,) = run.executions
        runs.append(ex)
        out = _read_harness(ex.stdout)
        for table, merged_table in ((out.values, merged.values), (out.exits, merged.exits)):
            for i, msg in table.items():
                if i in merged_table:
                    merged.tampered.add(i)
                merged_table[i] = msg
        merged.tampered |= out.tampered
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


# ----------------------------------------------------------------- the scorer


def _syntax_error(code: str) -> dict[str, Any] | None:
    """Compile without executing; the error as details, or None when the code compiles."""
    try:
        compile(code, "solution.py", "exec", dont_inherit=True)
    except SyntaxError as exc:  # IndentationError and TabError included
        return {"error": f"{type(exc).__name__}: {exc.msg}", "line": exc.lineno}
    except (ValueError, MemoryError, RecursionError) as exc:  # NUL bytes, absurd nesting
        return {"error": f"{type(exc).__name__}: {exc}"[:200], "line": None}
    return None


_COULD_NOT_START = b"sandbox: could not start the program"
"""What the supervisor appends when exec itself failed (g++ missing from the image, say)."""


def _zero(reason: str, **details: Any) -> Judgement:
    return Judgement(score=0.0, success=False, parsed=True, details={"reason": reason, **details})


def _run_and_judge(
    code: str, reference: CodeReference, config: CodeConfig, sandbox: SandboxBackend
) -> Judgement:
    language, tests = reference.language, reference.tests
    source = code.encode("utf-8", "surrogateescape")
    if isinstance(tests, StdioTests) or (isinstance(tests, FnTests) and language == "cpp"):
        results, executions = _run_programs(source, language, tests, config, sandbox)
    else:
        plans: list[AssertPlan] = []
        if isinstance(tests, FnTests):
            job: dict[str, Any] = {
                "mode": "call",
                "fn_name": tests.fn_name,
                "tests": [c.args for c in tests.cases],
            }
        else:
            plans = [parse_assert(a) for a in tests.asserts]
            job = {"mode": "eval", "setup": tests.setup, "tests": [list(p.probes) for p in plans]}
        executions, out = _run_harness(source, job, _count(tests), config, sandbox)
        results = _judge_harness(executions, out, tests, plans, config)
    if isinstance(results, Judgement):
        return results

    cpu_s = sum(e.cpu_s for e in executions)
    passed = sum(r.status == "passed" for r in results)
    over_budget = cpu_s > config.budget_s or any(
        e.status in ("timeout", "skipped") for e in executions
    )
    details: dict[str, Any] = {
        "passed": passed,
        "total": len(results),
        "cpu_s": round(cpu_s, 4),
        "tests": [r.as_dict() for r in results],
    }
    if over_budget:
        return _zero("budget_exceeded", **details)
    return Judgement(
        score=passed / len(results), success=passed == len(results), parsed=True, details=details
    )


def _run_programs(
    source: bytes,
    language: Language,
    tests: StdioTests | FnTests,
    config: CodeConfig,
    sandbox: SandboxBackend,
) -> tuple[list[_TestResult] | Judgement, Sequence[ExecutionResult]]:
    """stdio tests (Python, C++) and C++ fn_name: one execution per test, in one request; a
    compile error is the response's Judgement."""
    if isinstance(tests, StdioTests):
        request = _stdio_request(source, language, tests, config)
    else:
        request = _cpp_fn_request(source, tests, config)
    run = sandbox.run(request)
    if (
        run.build is not None
        and run.build.exit_code == 127
        and _COULD_NOT_START in run.build.stderr
    ):
        raise SandboxError(f"the sandbox has no working compiler: {_tail(run.build.stderr, 300)}")
    if run.build is not None and run.build.status != "ok":
        return _zero(
            "compile_error",
            status=run.build.status,
            error=_tail(run.build.stderr or run.build.stdout, 4 * config.diff_chars),
        ), run.executions
    if len(run.executions) != len(request.executions):
        raise RuntimeError(
            f"sandbox {sandbox.name!r} returned {len(run.executions)} results "
            f"for {len(request.executions)} executions"
        )
    if isinstance(tests, StdioTests):
        return _judge_stdio(run, tests, config), run.executions
    return _judge_cpp_fn(run, tests, config), run.executions


_CACHE: SingleFlightCache[Judgement] = SingleFlightCache(CACHE_SIZE)


def clear_cache() -> None:
    """Forget cached verdicts (tests, or after replacing a sandbox image)."""
    _CACHE.clear()


def _cache_key(code: str, reference: CodeReference, config: CodeConfig, backend: str) -> str:
    payload = json.dumps(
        [
            backend,
            reference.language,
            code,
            reference.tests.model_dump(mode="json"),
            config.model_dump(mode="json"),
        ],
        sort_keys=True,
        separators=(",", ":"),
    )
    return hashlib.blake2b(payload.encode("utf-8", "surrogatepass"), digest_size=20).hexdigest()


def score_code(
    response: str, reference: CodeReference, config: CodeConfig, ctx: ScoreContext
) -> Judgement:
    sandbox: SandboxBackend | None = ctx.sandbox
    if sandbox is None:
        raise SandboxUnavailable(
            "the code domain needs a sandbox backend and none is configured (ctx.sandbox is None)"
        )
    n_tests = _count(reference.tests)
    if n_tests > config.max_tests:
        raise InvalidReference(
            f"{n_tests} tests, more than the spec's max_tests={config.max_tests}", "too_many_tests"
        )
    if reference.language == "cpp" and isinstance(reference.tests, AssertTests):
        raise InvalidReference(
            "asserts tests are Python only (use stdio or fn_name for C++)", "unsupported_tests"
        )

    code, source = extract_code(response, reference.language)
    if code is None:
        return Judgement.unparsed("no_code", source=source)
    info: dict[str, Any] = {"language": reference.language, "source": source}
    if len(code.encode("utf-8", "surrogatepass")) > config.max_code_bytes:
        return _zero("code_too_long", **info)
    if reference.language == "python":
        error = _syntax_error(code)
        if error is not None:
            return _zero("syntax_error", **info, **error)

    key = _cache_key(code, reference, config, sandbox.name)
    judgement = _CACHE.get_or_compute(key, lambda: _run_and_judge(code, reference, config, sandbox))
    return Judgement(
        score=judgement.score,
        success=judgement.success,
        parsed=judgement.parsed,
        details={**info, **judgement.details},
    )


# ----------------------------------------------------------------- examples and registration

_PY_SUM = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
_PY_FN = "Here it is:\n```python\ndef add(a, b):\n    return a + b\n```"
_CPP_SUM = (
    "```cpp\n#include <iostream>\nint main() { long long a, b; std::cin >> a >> b; "
    "std::cout << a + b << std::endl; }\n```"
)


def _examples() -> list[Example]:
    stdio = {"stdio": [{"input": "1 2\n", "output": "3\n"}, {"input": "-5 5", "output": "0"}]}
    return [
        Example({"language": "python", "tests": stdio}, _PY_SUM),
        Example(
            {
                "language": "python",
                "tests": {
                    "fn_name": "add",
                    "cases": [{"args": [1, 2], "expected": 3}, {"args": [0.5, 1], "expected": 1.5}],
                },
            },
            _PY_FN,
        ),
        Example(
            {
                "language": "python",
                "tests": {"asserts": ["assert add(2, 2) == 4", "assert add(-1, 1) == 0"]},
            },
            _PY_FN,
        ),
        Example({"language": "cpp", "tests": stdio}, _CPP_SUM),
    ]


SCORER: Scorer[CodeReference, CodeConfig] = Scorer(
    domain="code",
    config_type=CodeConfig,
    reference_type=CodeReference,
    score=score_code,
    examples=_examples,
    executor="thread",
    libraries=(),
    description=(
        "Program run against stdio, fn_name or assert tests in a sandbox; passed / total, "
        "0 on a syntax or compile error or past the CPU budget."
    ),
)
