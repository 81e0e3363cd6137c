"""Code: run the response's program against the item's tests in a sandbox; score = passed / total.

Semantics (ProRL, section 2.2), every number below is a `CodeConfig` field pinned by the spec:

- The program is the last fenced block of the item's language, else the last bare fence, else
  the whole response (`reward_specs.code.extract`); no code at all is parsed=false. So is a
  whole response (no fence) that is no program of the language: Python's grammar does not parse
  it (`ast.parse`), or a compiled language's build fails; reason `no_code` either way, where a
  fenced program that does not compile is parsed and scores 0. `parsed` is no reward: the score
  is 0 in both cases.
- A Python syntax error scores 0 without running anything: the code is checked OUTSIDE the
  sandbox with `compile()`, which parses and compiles to byte code but never executes it (the
  sandbox runs the same CPython minor version). A C++, Java, JavaScript, Go or Rust program is
  built INSIDE the sandbox, once per response, under the same memory limits and `build_cpu_s`
  (`reward_specs.code.languages`); a compile error scores 0 with the compiler's message.
- All tests of one response share `budget_s` CPU seconds; using more (or hitting the wall-clock
  backstop `wall_cap_s`) scores 0 whatever passed before. Otherwise score = passed / total and
  success = all passed; `details.tests` has one entry per test with its status (passed,
  wrong_answer, runtime_error, timeout, memory, output_limit), CPU time and a short diff.
- Test formats. `stdio` (every language): one sandboxed execution per test, stdout compared as in
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
- `program` tests (Python) hold their expected values in the test program, which runs in the
  checkers' pool in a process the solution cannot reach (`reward_specs.code.program_run`).
  stdio tests with a `checker` are decided by it, run after the response in that pool
  (`reward_specs.code.checker`). A reference's `compare` and `limits` adjust the comparison and
  the limits within what the spec allows (`reference.with_limits`).
- A failure of the sandbox machinery (`SandboxError`) propagates: the engine reports
  `infra_error`, never a wrong answer. So does a missing sandbox (`ctx.sandbox is None`).
- Identical (code, tests, config, backend, code domain hash) are run once: a bounded cache with
  de-duplication of work in flight (`reward_specs.code.cache`). The domain hash
  (`ScoreContext.domain_hash`) holds the sandbox environment's digest, so a verdict is never
  served under another environment's hash; the service also empties the cache (`forget`) when
  it finds its environment changed.

The scorer only waits on the sandbox, holds no per-call state outside the locked cache, and is
safe to call from many threads (`executor="thread"`).
"""

from __future__ import annotations

import ast
import hashlib
from collections.abc import Sequence
from typing import Any

from reward_specs.caches import Cache
from reward_specs.canonical import canonical_json, canonical_text
from reward_specs.code.cache import SingleFlightCache
from reward_specs.code.checker import check_outputs
from reward_specs.code.extract import Language, extract_code
from reward_specs.code.harness import judge_cpp_fn, run_python_tests
from reward_specs.code.program_run import run_program_tests
from reward_specs.code.reference import (
    AssertTests,
    CodeConfig,
    CodeReference,
    FnTests,
    ProgramTests,
    StdioTests,
    count_tests,
    with_limits,
)
from reward_specs.code.requests import cpp_fn_request, stdio_request
from reward_specs.code.results import TestResult, tail
from reward_specs.code.stdio import judge_stdio
from reward_specs.engine import reference_key
from reward_specs.scorer import Example, InvalidReference, Judgement, ScoreContext, Scorer
from sandboxes.api import ExecutionResult, SandboxBackend, SandboxError, SandboxUnavailable

__all__ = ["SCORER", "CodeConfig", "CodeReference", "clear_cache", "score_code"]

CACHE_SIZE = 8192
"""Verdicts kept per scorer process (a few KB each)."""


def _syntax_error(code: str) -> dict[str, Any] | None:
    """Compile without executing; the error as details, or None when the code compiles."""
    try:
        compile(code, "solution.py", "exec", dont_inherit=True)
    except SyntaxError as exc:  # IndentationError and TabError included
        return {"error": f"{type(exc).__name__}: {exc.msg}", "line": exc.lineno}
    except (ValueError, MemoryError, RecursionError) as exc:  # NUL bytes, absurd nesting
        return {"error": f"{type(exc).__name__}: {exc}"[:200], "line": None}
    return None


def _parses(code: str) -> bool:
    """Whether Python's grammar reads `code` (`ast.parse`: no compilation, nothing executed)."""
    try:
        compile(code, "solution.py", "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return False
    return True


_COULD_NOT_START = b"sandbox: could not start the program"
"""What the supervisor appends when exec itself failed (g++ missing from the image, say)."""


def _run_and_judge(
    code: str,
    reference: CodeReference,
    config: CodeConfig,
    sandbox: SandboxBackend,
    checkers: SandboxBackend | None,
) -> Judgement:
    language, tests = reference.language, reference.tests
    source = code.encode("utf-8", "surrogateescape")
    results: list[TestResult] | Judgement
    executions: Sequence[ExecutionResult]
    if isinstance(tests, StdioTests) or (isinstance(tests, FnTests) and language == "cpp"):
        results, executions = _run_programs(source, language, tests, config, sandbox)
        if isinstance(tests, StdioTests) and tests.checker is not None:
            results = _checked(tests, executions, results, config, checkers)
    elif isinstance(tests, ProgramTests):
        results, executions = run_program_tests(source, tests, config, checkers)
    else:
        results, executions = run_python_tests(source, tests, config, sandbox)
    if isinstance(results, Judgement):
        return results

    cpu_s = sum(e.cpu_s for e in executions)
    passed = [r.status for r in results].count("passed")
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
        return Judgement.zero("budget_exceeded", **details)
    return Judgement(
        score=passed / len(results), success=passed == len(results), parsed=True, details=details
    )


def _checked(
    tests: StdioTests,
    executions: Sequence[ExecutionResult],
    results: list[TestResult] | Judgement,
    config: CodeConfig,
    checkers: SandboxBackend | None,
) -> list[TestResult] | Judgement:
    """The checker's verdicts (`reward_specs.code.checker`), in sandboxes that never run
    responses; also after a compile error, so that a broken checker is `invalid` whatever the
    response."""
    if checkers is None:
        raise SandboxUnavailable(
            "checkers run in sandboxes that never run responses, and no checker backend is "
            "configured (ctx.checker_sandbox is None)"
        )
    if isinstance(results, Judgement):
        check_outputs(
            tests,
            [ExecutionResult("skipped")] * len(tests.stdio),
            [TestResult("runtime_error") for _ in tests.stdio],
            config,
            checkers,
        )
        return results
    return check_outputs(tests, executions, results, config, checkers)


def _run_programs(
    source: bytes,
    language: Language,
    tests: StdioTests | FnTests,
    config: CodeConfig,
    sandbox: SandboxBackend,
) -> tuple[list[TestResult] | Judgement, Sequence[ExecutionResult]]:
    """stdio tests (every language) and C++ fn_name: one execution per test, in one request; a
    compile error is the response's Judgement."""
    if isinstance(tests, StdioTests):
        request = stdio_request(source, language, tests, config)
    else:
        request = cpp_fn_request(source, tests, config)
    run = sandbox.run(request)
    if (
        run.build is not None
        and run.build.exit_code == 127
        and _COULD_NOT_START in run.build.stderr
    ):
        raise SandboxError(f"the sandbox has no working compiler: {tail(run.build.stderr, 300)}")
    if run.build is not None and run.build.status != "ok":
        # a build that exited non-zero is the sandbox's `runtime_error`: here, a compile error
        # (a build out of time or memory keeps its status)
        failed = run.build.status
        return Judgement.zero(
            "compile_error",
            status="compile_error" if failed == "runtime_error" else failed,
            error=tail(run.build.stderr or run.build.stdout, 4 * config.diff_chars),
        ), run.executions
    if len(run.executions) != len(request.executions):
        raise RuntimeError(
            f"sandbox {sandbox.name!r} returned {len(run.executions)} results "
            f"for {len(request.executions)} executions"
        )
    if isinstance(tests, StdioTests):
        return judge_stdio(run, tests, config), run.executions
    return judge_cpp_fn(run, tests, config), run.executions


_CACHE: SingleFlightCache[Judgement] = SingleFlightCache("code.verdicts", CACHE_SIZE)


def clear_cache() -> None:
    """Forget cached verdicts (the service, when its sandbox's environment changed; tests)."""
    _CACHE.clear()


_KEY_PARTS: Cache[tuple[str, int], tuple[CodeConfig, Any]] = Cache("code.key_parts", 256)
"""The verdict key's hash with a (reference, config) pair already absorbed, by the reference's
key and the config's identity (an entry holds the config, so its id cannot be reused while it is
kept): a batch hashes each reference once, not per item."""


def _reference_key(reference: CodeReference, ctx: ScoreContext) -> str:
    """The reference's key: the engine's (`ScoreContext.reference_key`, from the request's
    canonical JSON, made once per reference); for a direct call without one, its own JSON's."""
    if ctx.reference_key is not None:
        return ctx.reference_key
    return reference_key(canonical_json(reference.model_dump(mode="json")))


def _key_prefix(ref_key: str, config: CodeConfig) -> Any:
    held = _KEY_PARTS.get((ref_key, id(config)))
    if held is not None and held[0] is config:
        return held[1]
    text = canonical_text([ref_key, config.model_dump(mode="json")])
    prefix = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=20)
    _KEY_PARTS.put((ref_key, id(config)), (config, prefix))
    return prefix


def _cache_key(
    code: str, ref_key: str, config: CodeConfig, backend: str, domain_hash: str | None
) -> str:
    # Two canonical JSON texts, each self-delimiting, one after the other: a different pair of
    # (reference, config) and (backend, domain hash, code) never gives the same bytes. The
    # config is the spec's: the reference (its key) decides how its own limits change it.
    h = _key_prefix(ref_key, config).copy()
    h.update(canonical_text([backend, domain_hash, code]).encode("utf-8", "surrogatepass"))
    return str(h.hexdigest())


def _check_compare(reference: CodeReference, config: CodeConfig) -> None:
    """A stdio reference's own tolerances, within what the spec lets a reference loosen."""
    tests = reference.tests
    compare = tests.compare if isinstance(tests, StdioTests) else None
    if compare is None:
        return
    for name in ("float_abs_tol", "float_rel_tol"):
        value = getattr(compare, name)
        if value is not None and value > config.max_reference_tol:
            raise InvalidReference(
                f"compare.{name}={value} is above the spec's max_reference_tol="
                f"{config.max_reference_tol}",
                "tolerance_too_loose",
            )


def score_code(
    response: str, reference: CodeReference, config: CodeConfig, ctx: ScoreContext
) -> Judgement:
    """Program run against stdio, fn_name, assert or program tests in a sandbox; passed / total,
    0 on a syntax or compile error or past the CPU budget."""
    sandbox: SandboxBackend | None = ctx.sandbox
    if sandbox is None:
        raise SandboxUnavailable(
            "the code domain needs a sandbox backend and none is configured (ctx.sandbox is None)"
        )
    ref_key = _reference_key(reference, ctx)
    spec_config, config = config, with_limits(config, reference)
    _check_compare(reference, config)
    n_tests = count_tests(reference.tests)
    if n_tests > config.max_tests:
        raise InvalidReference(
            f"{n_tests} tests, more than the spec's max_tests={config.max_tests}", "too_many_tests"
        )
    if (
        reference.language == "cpp"
        and isinstance(reference.tests, FnTests)
        and reference.tests.prelude
    ):
        raise InvalidReference("a prelude is Python only", "unsupported_tests")
    if reference.language == "cpp" and isinstance(reference.tests, AssertTests | ProgramTests):
        raise InvalidReference(
            "asserts and program tests are Python only (use stdio or fn_name for C++)",
            "unsupported_tests",
        )
    if reference.language not in ("python", "cpp") and not isinstance(reference.tests, StdioTests):
        raise InvalidReference(
            f"{reference.language} takes stdio tests only (fn_name: Python and C++; asserts: "
            "Python)",
            "unsupported_tests",
        )

    code, source = extract_code(response, reference.language)
    if code is None:
        return Judgement.unparsed("no_code", source=source)
    info: dict[str, Any] = {"language": reference.language, "source": source}
    if len(code.encode("utf-8", "surrogatepass")) > config.max_code_bytes:
        return Judgement.zero("code_too_long", **info)
    key = _cache_key(code, ref_key, spec_config, sandbox.name, ctx.domain_hash)
    judgement = _CACHE.get(key)  # only code that compiled has a verdict there
    if judgement is None:
        if reference.language == "python":
            error = _syntax_error(code)
            if error is not None and source == "whole_response" and not _parses(code):
                return Judgement.unparsed("no_code", **info, **error)  # prose, not a program
            if error is not None:
                return Judgement.zero("syntax_error", **info, **error)
        checkers: SandboxBackend | None = ctx.checker_sandbox
        judgement = _CACHE.get_or_compute(
            key, lambda: _run_and_judge(code, reference, config, sandbox, checkers)
        )
    if source == "whole_response" and judgement.details.get("reason") == "compile_error":
        # the whole response does not build: no program was found in it (the verdict is cached
        # per code, fenced or not, so this is decided here)
        return Judgement.unparsed("no_code", **info, error=judgement.details.get("error"))
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


SCORER = Scorer.from_function("code", score_code, _examples, executor="thread", forget=clear_cache)
