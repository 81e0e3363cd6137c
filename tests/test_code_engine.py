"""The code domain through the engine (`score_item`), on the real backends: outcome statuses,
the missing-sandbox and sandbox-failure paths, the cache, and concurrent callers."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from reward_specs import Item, ScoreContext, default_registry, load_specs, score_item
from reward_specs.code import SCORER, clear_cache
from sandboxes.api import Execution, RunRequest, RunResult, SandboxBackend, SandboxError
from tests.sandbox_fixtures import open_or_skip, sandbox_settings

REGISTRY = default_registry()
SPEC = load_specs(REGISTRY)["prorl-v1"]

SQUARE = {"language": "python", "tests": {"asserts": ["assert sq(3) == 9", "assert sq(-2) == 4"]}}
GOOD = "```python\ndef sq(x):\n    return x * x\n```"


class Counting:
    """A seam around a real backend: counts requests, or fails them as the machinery would."""

    def __init__(self, inner: SandboxBackend, name: str = "", fail: bool = False) -> None:
        self.inner = inner
        self.name = name or inner.name
        self.fail = fail
        self.runs = 0
        self._lock = threading.Lock()

    def run(self, request: RunRequest) -> RunResult:
        with self._lock:
            self.runs += 1
        if self.fail:
            raise SandboxError("supervisor lost (injected)")
        return self.inner.run(request)

    def ready(self) -> bool:
        return self.inner.ready()

    def close(self) -> None:
        pass


@pytest.fixture(autouse=True)
def fresh_cache() -> Iterator[None]:
    clear_cache()
    yield
    clear_cache()


def score(
    response: str, reference: dict[str, Any], sandbox: Any
) -> Any:  # Outcome, loosely typed for brevity
    return score_item(REGISTRY, SPEC, Item("code", response, reference), ScoreContext(sandbox))


@pytest.mark.parametrize("example", SCORER.examples(), ids=lambda e: str(e.reference)[:40])
def test_examples_score_one_and_empty_scores_zero(example: Any, backend: SandboxBackend) -> None:
    good = score(example.response, dict(example.reference), backend)
    assert (good.status, good.score, good.success) == ("ok", 1.0, True), good
    empty = score("", dict(example.reference), backend)
    assert (empty.status, empty.score, empty.parsed) == ("ok", 0.0, False), empty


def test_reasoning_is_stripped_before_extraction(local_backend: SandboxBackend) -> None:
    response = "<think>```python\ndef sq(x):\n    return 0\n```</think>" + GOOD
    outcome = score(response, SQUARE, local_backend)
    assert (outcome.status, outcome.score) == ("ok", 1.0)


@pytest.mark.parametrize(
    "reference,code",
    [
        ({"language": "cobol", "tests": {"stdio": [{"input": "", "output": ""}]}}, None),
        ({"language": "python", "tests": {"asserts": ["print(1)"]}}, None),
        ({"language": "python", "tests": {}}, None),
        ({"language": "cpp", "tests": {"asserts": ["assert f() == 1"]}}, "unsupported_tests"),
        (
            {"language": "python", "tests": {"asserts": ["assert f() == 1"] * 101}},
            "too_many_tests",
        ),
    ],
)
def test_unusable_references_are_invalid(
    reference: dict[str, Any], code: str | None, local_backend: SandboxBackend
) -> None:
    outcome = score(GOOD, reference, local_backend)
    assert outcome.status == "invalid", outcome
    assert outcome.score is None
    if code is not None:
        assert outcome.error["code"] == code


def test_each_python_execution_sees_only_its_own_output(backend: SandboxBackend) -> None:
    """What the stdio format relies on: step i's stdout is what step i printed, nothing else.

    (Regression: with python3 steps run in the forked supervisor, replacing sys.stdout in the
    child finalised the supervisor's old stream, whose buffer still held the frames of earlier
    steps, and flushed them into the program's stdout.)"""
    request = RunRequest(
        files={"main.py": b"print(input())"},
        executions=[Execution(("python3", "main.py"), f"{k}\n".encode()) for k in range(4)],
    )
    result = backend.run(request)
    assert [e.stdout for e in result.executions] == [b"0\n", b"1\n", b"2\n", b"3\n"]


def test_no_sandbox_is_an_infra_error_not_a_zero() -> None:
    outcome = score(GOOD, SQUARE, None)
    assert outcome.status == "infra_error"
    assert "no" in outcome.error["message"] and "sandbox" in outcome.error["message"]


def test_sandbox_failure_is_an_infra_error_not_a_zero(local_backend: SandboxBackend) -> None:
    broken = Counting(local_backend, fail=True)
    outcome = score(GOOD, SQUARE, broken)
    assert outcome.status == "infra_error"
    assert "SandboxError" in outcome.error["message"]
    # ... and the failure is not cached: the next call runs again.
    again = score(GOOD, SQUARE, broken)
    assert again.status == "infra_error"
    assert broken.runs == 2


class NoCompiler(Counting):
    """A real backend whose image would lack g++: the build step names a missing program."""

    def run(self, request: RunRequest) -> RunResult:
        assert request.build is not None
        build = Execution(("g++-not-installed", *request.build.argv[1:]))
        return self.inner.run(dataclasses.replace(request, build=build))


HARNESS_CASES = [
    ("```python\ndef sq(x):\n    return x * x if x > 0 else 0\n```", 0.5),
    ("```python\nimport os\ndef sq(x):\n    if x < 0: os._exit(1)\n    return x * x\n```", 0.5),
]


@pytest.mark.parametrize(("response", "expected"), HARNESS_CASES)
def test_harness_in_a_fresh_interpreter_scores_as_forked(
    response: str, expected: float, local_backend: SandboxBackend
) -> None:
    """Without the forked-Python path the harness runs in a fresh `python3` that compiles its
    source; the forked path runs the code the supervisor compiled. Same verdicts."""
    fresh = open_or_skip(sandbox_settings("local", pool_size=1, fork_python=False))
    try:
        for sandbox in (local_backend, fresh):
            clear_cache()
            outcome = score(response, SQUARE, sandbox)
            assert (outcome.status, outcome.score) == ("ok", expected), outcome
    finally:
        fresh.close()


def test_a_missing_compiler_is_an_infra_error_not_a_zero(local_backend: SandboxBackend) -> None:
    reference = {"language": "cpp", "tests": {"stdio": [{"input": "", "output": "1"}]}}
    outcome = score("```cpp\nint main(){}\n```", reference, NoCompiler(local_backend))
    assert outcome.status == "infra_error", outcome
    assert "compiler" in outcome.error["message"]


def test_identical_responses_run_once(local_backend: SandboxBackend) -> None:
    counting = Counting(local_backend)
    with ThreadPoolExecutor(8) as pool:
        outcomes = list(pool.map(lambda _: score(GOOD, SQUARE, counting), range(16)))
    assert {(o.status, o.score) for o in outcomes} == {("ok", 1.0)}
    assert counting.runs == 1
    # A different response, or the same on another backend, runs again.
    score(GOOD.replace("x * x", "x*x"), SQUARE, counting)
    score(GOOD, SQUARE, Counting(local_backend, name="other"))
    assert counting.runs == 2


def test_a_verdict_is_kept_under_the_code_domain_hash(local_backend: SandboxBackend) -> None:
    # The same code on the same backend under another environment's digest (another code
    # domain hash) runs again: a verdict is never served under a digest it was not judged in.
    counting = Counting(local_backend)
    item = Item("code", GOOD, SQUARE)
    other = load_specs(REGISTRY, environments={"code": "sha256:" + "1" * 64})["prorl-v1"]
    assert other.domain_hashes["code"] != SPEC.domain_hashes["code"]
    for spec in (SPEC, SPEC, other, other):
        assert score_item(REGISTRY, spec, item, ScoreContext(counting)).score == 1.0
    assert counting.runs == 2
    assert SCORER.forget is not None
    SCORER.forget()  # what the service calls when its environment changed
    assert score_item(REGISTRY, other, item, ScoreContext(counting)).score == 1.0
    assert counting.runs == 3


def test_syntax_errors_never_reach_the_sandbox(local_backend: SandboxBackend) -> None:
    counting = Counting(local_backend)
    outcome = score("```python\ndef sq(x)\n    return x\n```", SQUARE, counting)
    assert (outcome.status, outcome.score, outcome.parsed) == ("ok", 0.0, True)
    assert outcome.details["reason"] == "syntax_error"
    assert outcome.details["line"] == 1
    assert counting.runs == 0


def test_concurrent_callers_get_the_serial_verdicts(backend: SandboxBackend) -> None:
    variants = [f"```python\ndef sq(x):  # {k}\n    return x * {k % 3} * x\n```" for k in range(24)]
    serial = [score(v, SQUARE, backend).score for v in variants]
    clear_cache()
    with ThreadPoolExecutor(12) as pool:
        concurrent = list(pool.map(lambda v: score(v, SQUARE, backend).score, variants))
    assert concurrent == serial
    assert serial[:3] == [0.0, 1.0, 0.0]
