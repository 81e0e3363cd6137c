"""Java, JavaScript, Go and Rust through the code domain, on both backends: a right program scores
1, a wrong one 0, one that does not compile 0 with the compiler's message, an endless loop and a
memory bomb 0 with their statuses; the build is one step per response, outside the test budget."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from reward_specs import Item, ScoreContext, default_registry, load_specs, score_item
from reward_specs.code import clear_cache
from reward_specs.code.extract import extract_code
from reward_specs.code.languages import java_names
from reward_specs.code.reference import CodeConfig, StdioTests
from reward_specs.code.requests import stdio_request
from sandboxes.api import SandboxBackend
from tests.lang_programs import COMPILED, PROGRAMS, RIGHT_TESTS

REGISTRY = default_registry()
SPEC = load_specs(REGISTRY)["prorl-v1"]
FENCE = {"java": "java", "javascript": "js", "go": "go", "rust": "rust"}


@pytest.fixture(autouse=True)
def fresh_cache() -> Iterator[None]:
    clear_cache()
    yield
    clear_cache()


def score(language: str, kind: str, backend: SandboxBackend, tests: Any = RIGHT_TESTS) -> Any:
    program = PROGRAMS[language][kind].strip("\n")
    response = f"Here:\n```{FENCE[language]}\n{program}\n```\n"
    reference = {"language": language, "tests": tests}
    return score_item(REGISTRY, SPEC, Item("code", response, reference), ScoreContext(backend))


@pytest.mark.parametrize("language", COMPILED)
def test_right_and_wrong(language: str, backend: SandboxBackend) -> None:
    right = score(language, "right", backend)
    assert (right.status, right.score, right.success) == ("ok", 1.0, True), right
    assert right.details["language"] == language and right.details["source"] == "fenced"
    wrong = score(language, "wrong", backend)
    assert (wrong.status, wrong.score) == ("ok", 0.0), wrong
    assert [t["status"] for t in wrong.details["tests"]] == ["wrong_answer", "wrong_answer"]


@pytest.mark.parametrize("language", COMPILED)
def test_a_program_that_does_not_compile_scores_zero_with_the_message(
    language: str, backend: SandboxBackend
) -> None:
    out = score(language, "broken", backend)
    assert (out.status, out.score, out.details["reason"]) == ("ok", 0.0, "compile_error"), out
    assert out.details["status"] == "compile_error", out  # not the build's `runtime_error`
    assert "error" in out.details["error"].lower() or "expected" in out.details["error"], out


@pytest.mark.parametrize("language", COMPILED)
def test_an_endless_loop_exceeds_the_budget(language: str, backend: SandboxBackend) -> None:
    out = score(language, "loop", backend, {"stdio": [{"input": "", "output": "1"}]})
    assert (out.status, out.score, out.details["reason"]) == ("ok", 0.0, "budget_exceeded"), out


@pytest.mark.parametrize("language", COMPILED)
def test_a_memory_bomb_fails_as_memory(language: str, backend: SandboxBackend) -> None:
    out = score(language, "memory", backend, {"stdio": [{"input": "", "output": "2048"}]})
    assert (out.status, out.score) == ("ok", 0.0), out
    assert [t["status"] for t in out.details["tests"]] == ["memory"], out


@pytest.mark.parametrize("language", COMPILED)
def test_the_build_is_one_step_outside_the_test_budget(language: str) -> None:
    tests = StdioTests.model_validate(RIGHT_TESTS)
    code = PROGRAMS[language]["right"].encode()
    request = stdio_request(code, language, tests, CodeConfig())  # type: ignore[arg-type]
    assert request.build is not None and len(request.executions) == 2
    assert request.limits.build_cpu_s == CodeConfig().build_cpu_s
    assert all(ex.argv == request.executions[0].argv for ex in request.executions)


@pytest.mark.parametrize(
    "code,names",
    [
        # javac requires a public class's file to carry its name
        (b"public final class Sol { public static void main(String[] a) {} }", "Sol"),
        # no public class: the class declaring main, not a helper before it
        (b"class Pair {}\nclass Run { static public void main(String[] a) {} }", "Run"),
        (b"class A {}", "Main"),
    ],
)
def test_java_file_and_class_names(code: bytes, names: str) -> None:
    assert java_names(code) == (f"{names}.java", names)


@pytest.mark.parametrize(
    "tag,language", [("js", "javascript"), ("golang", "go"), ("rs", "rust"), ("Java", "java")]
)
def test_fence_tags(tag: str, language: str) -> None:
    assert extract_code(f"```{tag}\nx\n```", language) == ("x\n", "fenced")  # type: ignore[arg-type]


@pytest.mark.parametrize("language", COMPILED)
def test_only_stdio_tests_for_the_new_languages(language: str, backend: SandboxBackend) -> None:
    fn = {"fn_name": "f", "cases": [{"args": [1], "expected": 1}]}
    out = score(language, "right", backend, fn)
    assert out.status == "invalid" and out.error["code"] == "unsupported_tests", out


def test_proctor_serve_says_what_the_local_sandbox_lacks(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from reward_specs.code import languages
    from service import cli
    from service.settings import Settings

    assert languages.missing_toolchains() == {}  # tests/run installs them all
    # a host with none of them on the sandbox's PATH
    monkeypatch.setattr(languages, "SANDBOX_PATH", "/nonexistent")
    missing = languages.missing_toolchains()
    assert missing["go"] == "golang-go" and missing["rust"] == "rustc"
    cli._say_what_local_lacks(Settings())
    err = capsys.readouterr().err
    assert "no compiler for cpp, go, java, javascript, rust" in err, err
    assert "apt-get install default-jdk-headless g++ golang-go nodejs rustc" in err, err
