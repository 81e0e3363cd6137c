"""What a code item's reference and the code spec look like: `CodeConfig`, and `CodeReference`
with its shapes of tests (stdio, fn_name + cases, asserts, program)."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    field_validator,
    model_validator,
)

from reward_specs.code.asserts import parse_assert
from reward_specs.code.extract import Language
from reward_specs.code.program import plan_program
from reward_specs.scorer import DomainConfig, ReferenceModel

__all__ = [
    "AssertTests",
    "Checker",
    "CodeConfig",
    "CodeReference",
    "FnCase",
    "FnTests",
    "Limits",
    "ProgramTests",
    "StdioCompare",
    "StdioTest",
    "StdioTests",
    "Tests",
    "count_tests",
    "with_limits",
]


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

    test_time_s: float | None = Field(None, gt=0, le=600)
    """CPU seconds of one test where each test is its own execution (stdio, C++ fn_name): a
    test that uses more fails as `timeout`, the others are judged as usual. None: no limit of
    its own. A reference's `limits.time_s` sets it (never above `budget_s`)."""
    test_memory_mb: int | None = Field(None, ge=1, le=65536)
    """Memory of the program when below `memory_mb` (the compiler keeps `memory_mb`). None:
    `memory_mb`. A reference's `limits.memory_mb` sets it (never above `memory_mb`)."""
    checker_cpu_s: float = Field(5.0, gt=0, le=60)
    """CPU seconds of each run of a stdio reference's checker (whole seconds, rounded up); more
    refuses that output (on the reference's own answer: the item is invalid). Checkers run on
    our time, not the response's budget."""
    max_reference_tol: float = Field(1e-3, ge=0)
    """The largest `float_abs_tol` / `float_rel_tol` a stdio reference's `compare` may ask; a
    reference asking more is invalid."""

    added_later: ClassVar[frozenset[str]] = frozenset(
        {"test_time_s", "test_memory_mb", "checker_cpu_s", "max_reference_tol"}
    )

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


class StdioCompare(_Strict):
    """How this reference's outputs are compared, over the spec's defaults."""

    float_abs_tol: float | None = Field(None, ge=0)
    float_rel_tol: float | None = Field(None, ge=0)
    case_sensitive: bool = True


class Checker(_Strict):
    """A special judge, run as `checker INPUT OUTPUT ANSWER` (`reward_specs.code.checker`)."""

    language: Literal["python", "cpp"]
    source: str = Field(..., min_length=1)
    files: dict[str, str] = Field(default_factory=dict)
    """Files beside the checker, such as `testlib.h` (not on any package registry this project
    uses: a dataset whose C++ checkers include it ships it here)."""

    @field_validator("files")
    @classmethod
    def _plain_names(cls, files: dict[str, str]) -> dict[str, str]:
        for name in files:
            parts = name.split("/")
            if name.startswith("/") or ".." in parts or "" in parts or parts[0] == "tests":
                raise ValueError(f"files: {name!r} is not a plain relative name")
            if name in ("checker", "checker.py", "checker.cpp"):
                raise ValueError(f"files: {name!r} is the checker's own name")
        return files


class StdioTests(_Strict):
    stdio: list[StdioTest] = Field(..., min_length=1)
    compare: StdioCompare | None = None
    checker: Checker | None = None
    """When set, the checker decides each test instead of the comparison (`compare` unused)."""


class FnCase(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    args: list[Any]
    expected: Any


class FnTests(_Strict):
    fn_name: str = Field(..., pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    cases: list[FnCase] = Field(..., min_length=1)
    prelude: str = ""
    """Python code run before the solution, in its namespace: the imports a dataset's own
    harness puts before every solution (LiveCodeBench's `from typing import *` and the rest)."""


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


class ProgramTests(_Strict):
    program: str = Field(..., min_length=1)
    """Python test code: each top-level `def test_*` one test, else the whole program one test
    (`reward_specs.code.program`)."""

    @field_validator("program")
    @classmethod
    def _valid_python(cls, program: str) -> str:
        plan_program(program)
        return program


def _tests_shape(value: Any) -> str | None:
    """Which shape of `tests` a value means, by its one identifying key, so that a mistake is
    reported against that shape alone (`tests.asserts: must be a list of strings`), not against
    every alternative."""
    if isinstance(value, dict):
        keys = ("stdio", "fn_name", "asserts", "program")
        return next((key for key in keys if key in value), None)
    if isinstance(value, StdioTests | FnTests | AssertTests | ProgramTests):
        shapes = {
            StdioTests: "stdio",
            FnTests: "fn_name",
            AssertTests: "asserts",
            ProgramTests: "program",
        }
        return shapes[type(value)]
    return None


TestsShape = Annotated[
    Annotated[StdioTests, Tag("stdio")]
    | Annotated[FnTests, Tag("fn_name")]
    | Annotated[AssertTests, Tag("asserts")]
    | Annotated[ProgramTests, Tag("program")],
    Discriminator(
        _tests_shape,
        custom_error_type="tests_shape",
        custom_error_message="`tests` must be an object with `stdio`, `fn_name` and `cases`, "
        "`asserts`, or `program`",
    ),
]


class Limits(_Strict):
    """The dataset's own limits for one problem (Codeforces states them per problem), each
    capped by the spec: they can tighten the spec's limits, never loosen them."""

    time_s: float | None = Field(None, gt=0, le=600)
    """CPU seconds per test."""
    memory_mb: int | None = Field(None, ge=1, le=65536)


class CodeReference(ReferenceModel):
    language: Language
    tests: TestsShape
    limits: Limits | None = None


Tests = StdioTests | FnTests | AssertTests | ProgramTests


def count_tests(tests: Tests) -> int:
    match tests:
        case StdioTests():
            return len(tests.stdio)
        case FnTests():
            return len(tests.cases)
        case AssertTests():
            return len(tests.asserts)
        case ProgramTests():
            return len(plan_program(tests.program).tests) or 1


def with_limits(config: CodeConfig, reference: CodeReference) -> CodeConfig:
    """The spec's config with the reference's own limits applied, each capped by the spec.

    `time_s` is per test: where each test is its own execution it is `test_time_s`; where all
    tests run in one process (Python fn_name, asserts, program) the process cannot be timed per
    test from outside, so the tests share `time_s` times their number (at most `budget_s`)."""
    limits = reference.limits
    if limits is None:
        return config
    update: dict[str, Any] = {}
    if limits.memory_mb is not None:
        memory = config.test_memory_mb or config.memory_mb
        update["test_memory_mb"] = min(memory, limits.memory_mb, config.memory_mb)
    if limits.time_s is not None:
        tests = reference.tests
        per_execution = isinstance(tests, StdioTests) or (
            isinstance(tests, FnTests) and reference.language == "cpp"
        )
        if per_execution:
            time_s = config.test_time_s or config.budget_s
            update["test_time_s"] = min(time_s, limits.time_s, config.budget_s)
        else:
            update["budget_s"] = min(config.budget_s, limits.time_s * count_tests(tests))
    return config.model_copy(update=update)
