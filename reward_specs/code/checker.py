"""stdio tests judged by the reference's own checker (a special judge), for problems with several
valid outputs.

The checker runs as `checker INPUT OUTPUT ANSWER` (testlib's order: three file paths, the test's
input, the response's output, the reference's answer); exit status 0 accepts, anything else
refuses. It runs after the response's run has ended, in a sandbox of `ctx.checker_sandbox`, a
backend whose sandboxes never run responses (ANSWER must never reach a response's sandbox). One
request per response: the checker is built once (C++: `g++ <cpp_flags>`, with the spec's
`build_cpu_s`), then run on every test with the reference's answer as OUTPUT, then on the
response's output of every test that ran to completion. A checker that refuses the reference's
own answer (or does not build) is a broken reference: the item is `invalid`. A checker that
crashes or runs out of time on a response's output refuses it, so that a policy cannot escape a
zero by breaking the checker.

Each checker run has `checker_cpu_s` CPU seconds of its own (an rlimit set by a small launcher
before exec, whole seconds), so one run that loops does not take the others' time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from reward_specs.code.reference import Checker, CodeConfig, StdioTests
from reward_specs.code.results import TestResult, tail
from reward_specs.scorer import InvalidReference
from sandboxes.api import Execution, ExecutionResult, Limits, RunRequest, SandboxBackend

__all__ = ["check_outputs"]

_LAUNCH = (
    "import os,resource,sys\n"
    "s=int(sys.argv[1]);_,h=resource.getrlimit(resource.RLIMIT_CPU)\n"
    "h=s+1 if h==resource.RLIM_INFINITY else min(s+1,h)\n"
    "resource.setrlimit(resource.RLIMIT_CPU,(min(s,h),h))\n"
    "os.execvp(sys.argv[2],sys.argv[2:])\n"
)
"""Sets the CPU rlimit of one checker run, then becomes the checker."""


def _request(
    checker: Checker,
    tests: StdioTests,
    outputs: Sequence[bytes | None],
    config: CodeConfig,
) -> tuple[RunRequest, list[int]]:
    """The checker's request, and which test each response-check execution is for."""
    seconds = max(1, math.ceil(config.checker_cpu_s))
    files: dict[str, bytes] = {
        name: text.encode("utf-8", "surrogateescape") for name, text in checker.files.items()
    }
    source = checker.source.encode("utf-8", "surrogateescape")
    if checker.language == "python":
        files["checker.py"] = source
        command: tuple[str, ...] = ("python3", "-I", "checker.py")
        build = None
    else:
        files["checker.cpp"] = source
        command = ("./checker",)
        build = Execution(("g++", *config.cpp_flags, "-o", "checker", "checker.cpp"))
    checked: list[int] = []
    runs: list[tuple[str, str]] = []
    for i, test in enumerate(tests.stdio):
        files[f"tests/{i}.in"] = test.input.encode("utf-8", "surrogateescape")
        files[f"tests/{i}.ans"] = test.output.encode("utf-8", "surrogateescape")
        runs.append((f"tests/{i}.ans", f"tests/{i}.ans"))
    for i, output in enumerate(outputs):
        if output is not None:
            files[f"tests/{i}.out"] = output
            checked.append(i)
    runs += [(f"tests/{i}.out", f"tests/{i}.ans") for i in checked]
    inputs = [f"tests/{i}.in" for i in range(len(tests.stdio))] + [f"tests/{i}.in" for i in checked]
    executions = [
        Execution(("python3", "-I", "-c", _LAUNCH, str(seconds), *command, inp, out, ans))
        for inp, (out, ans) in zip(inputs, runs, strict=True)
    ]
    budget = (seconds + 1) * len(executions)
    limits = Limits(
        cpu_budget_s=budget,
        wall_cap_s=2 * budget + 5,
        build_cpu_s=config.build_cpu_s,
        memory_bytes=config.memory_mb << 20,
        output_bytes=config.output_limit_bytes,
        max_processes=config.max_processes,
    )
    return RunRequest(files=files, executions=executions, build=build, limits=limits), checked


def check_outputs(
    tests: StdioTests,
    runs: Sequence[ExecutionResult],
    results: list[TestResult],
    config: CodeConfig,
    sandbox: SandboxBackend,
) -> list[TestResult]:
    """`results` (the response's runs as judged without comparing outputs) with each test that
    ran to completion passed or refused by the checker."""
    checker = tests.checker
    if checker is None:
        raise ValueError("check_outputs needs a checker")
    outputs = [
        ex.stdout if r.status == "passed" else None for ex, r in zip(runs, results, strict=True)
    ]
    request, checked = _request(checker, tests, outputs, config)
    run = sandbox.run(request)
    if len(run.executions) != len(request.executions):
        raise RuntimeError(
            f"sandbox {sandbox.name!r} returned {len(run.executions)} results "
            f"for {len(request.executions)} executions"
        )
    if run.build is not None and run.build.status != "ok":
        raise InvalidReference(
            f"the checker does not build: {tail(run.build.stderr or run.build.stdout, 300)}",
            "checker_build_error",
        )
    n = len(tests.stdio)
    for i, ex in enumerate(run.executions[:n]):
        if ex.status != "ok":
            detail = tail(ex.stderr or ex.stdout, 200)
            raise InvalidReference(
                f"the checker refuses the reference's own answer of test {i} ({ex.status}"
                f"{', exit code ' + str(ex.exit_code) if ex.exit_code else ''}): {detail}",
                "checker_refuses_reference",
            )
    for i, ex in zip(checked, run.executions[n:], strict=True):
        if ex.status != "ok":
            verdict = tail(ex.stderr or ex.stdout, config.diff_chars) or ex.status
            results[i] = TestResult("wrong_answer", results[i].time, error=f"checker: {verdict}")
    return results
