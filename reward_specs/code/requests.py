"""The sandbox requests of a code item: its files, executions and limits, by test shape."""

from __future__ import annotations

import json
import marshal
import re
from dataclasses import replace
from typing import Any

from reward_specs.caches import Cache
from reward_specs.code.extract import Language
from reward_specs.code.languages import LANGUAGES
from reward_specs.code.reference import CodeConfig, FnTests, StdioTests
from sandboxes.api import Execution, Limits, RunRequest
from sandboxes.runners import CPP_HARNESS, PY_HARNESS, runner_source

__all__ = ["cpp_fn_request", "harness_request", "sandbox_limits", "stdio_request"]


_LIMITS: Cache[int, tuple[CodeConfig, Limits]] = Cache("code.sandbox_limits", 64)
"""The sandbox limits of a config, by its identity (an entry holds it, so the id cannot be reused
while it is kept): the items of a batch share their config, and one `Limits` object each lets the
backend write its JSON once (`sandboxes.frames`)."""


def sandbox_limits(config: CodeConfig) -> Limits:
    held = _LIMITS.get(id(config))
    if held is not None and held[0] is config:
        return held[1]
    limits = _limits_of(config)
    _LIMITS.put(id(config), (config, limits))
    return limits


def _limits_of(config: CodeConfig) -> Limits:
    program_mb = min(config.memory_mb, config.test_memory_mb or config.memory_mb)
    return Limits(
        cpu_budget_s=config.budget_s,
        wall_cap_s=config.wall_cap_s,
        build_cpu_s=config.build_cpu_s,
        memory_bytes=program_mb * 1024 * 1024,
        output_bytes=config.output_limit_bytes,
        max_processes=config.max_processes,
        build_memory_bytes=None if program_mb == config.memory_mb else config.memory_mb << 20,
    )


def stdio_request(
    code: bytes, language: Language, tests: StdioTests, config: CodeConfig
) -> RunRequest:
    stdins = [t.input.encode("utf-8", "surrogateescape") for t in tests.stdio]
    if language == "python":
        argv: tuple[str, ...] = ("python3", "-I", "solution.py")
        return RunRequest(
            files={"solution.py": code},
            executions=[Execution(argv, stdin) for stdin in stdins],
            limits=sandbox_limits(config),
        )
    plan = LANGUAGES[language].plan(code, config.memory_mb * 1024 * 1024, config.cpp_flags)
    limits = sandbox_limits(config)
    limits = replace(
        limits, address_space_bytes=plan.address_space_bytes, stack_bytes=plan.stack_bytes
    )
    return RunRequest(
        files={plan.source_file: code},
        build=None if plan.build is None else Execution(plan.build),
        executions=[Execution(plan.run, stdin) for stdin in stdins],
        limits=limits,
    )


_SOLUTION_CLASS = re.compile(rb"\b(class|struct)\s+Solution\b")


def cpp_fn_request(code: bytes, tests: FnTests, config: CodeConfig) -> RunRequest:
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
        limits=sandbox_limits(config),
    )


_JOB_FILES: Cache[tuple[int, int, int], tuple[dict[str, Any], bytes]] = Cache(
    "code.harness_job_files", 256
)
"""The harness's job file by (job, first test, value limit), the job by identity (an entry holds
it, so the id cannot be reused while it is kept): a tests object has one job dict, never
changed, so every item of a reference sends the same bytes."""


def harness_request(
    code: bytes, job: dict[str, Any], config: CodeConfig, limits: Limits, first: int = 0
) -> RunRequest:
    """The harness on `code`, from test `first` of `job` (`harness._job`'s, never changed)."""
    key = (id(job), first, config.max_value_bytes)
    held = _JOB_FILES.get(key)
    if held is not None and held[0] is job:
        job_file = held[1]
    else:
        # Named before it is dumped, as it always was: marshal flags an object referenced more
        # than once for back-references, so a temporary dict would change the file's bytes.
        full = {**job, "first": first, "solution": "solution.py"}
        full["max_value_bytes"] = config.max_value_bytes
        job_file = marshal.dumps(full)
        _JOB_FILES.put(key, (job, job_file))
    return RunRequest(
        files={"solution.py": code, "job.marshal": job_file},
        # The same bytes object every time (cached): a backend sends it to a sandbox once, and
        # the supervisor compiles it once.
        shared_files={PY_HARNESS: runner_source(PY_HARNESS)},
        executions=_HARNESS_RUN,
        limits=limits,
    )


_HARNESS_RUN = (Execution(("python3", "-I", PY_HARNESS, "job.marshal")),)
"""The harness's one execution, the same in every request (immutable)."""
