"""Code's `parsed` means a program was found, in every language, on both backends.

A response with no fence is the program only if it is one of the item's language (Python: its
grammar reads it; the compiled languages: it builds); otherwise it has no code (`parsed` false,
reason `no_code`, score 0). A fenced program that does not compile is still a program: parsed,
score 0 (`syntax_error`, `compile_error`). "I don't know." used to be a parsed syntax error.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from reward_specs import Item, ScoreContext, default_registry, load_specs, score_item
from reward_specs.code import clear_cache
from sandboxes.api import RunRequest, RunResult, SandboxBackend, SandboxStats
from tests.lang_programs import PROGRAMS, RIGHT_TESTS

REGISTRY = default_registry()
SPEC = load_specs(REGISTRY)["prorl-v1-careful-2"]
RIGHT = {
    "python": "a, b = map(int, input().split())\nprint(a + b)\n",
    "cpp": "#include <iostream>\nint main() { long long a, b; std::cin >> a >> b; "
    'std::cout << a + b << "\\n"; }\n',
    **{language: programs["right"].strip("\n") + "\n" for language, programs in PROGRAMS.items()},
}
BROKEN = {
    "python": "def f(:\n    pass\n",
    "cpp": "int main() { return 0 }\n",
    **{language: programs["broken"] for language, programs in PROGRAMS.items()},
}
LANGUAGES = sorted(RIGHT)
PROSE = "I don't know."


@pytest.fixture(autouse=True)
def fresh_cache() -> Iterator[None]:
    clear_cache()
    yield
    clear_cache()


def _score(language: str, response: str, backend: SandboxBackend) -> Any:
    reference = {"language": language, "tests": RIGHT_TESTS}
    return score_item(REGISTRY, SPEC, Item("code", response, reference), ScoreContext(backend))


def _fenced(language: str, code: str) -> str:
    return f"Here it is:\n```{language}\n{code.rstrip()}\n```\n"


def test_every_language_is_covered() -> None:
    assert LANGUAGES == ["cpp", "go", "java", "javascript", "python", "rust"]


@pytest.mark.parametrize("language", LANGUAGES)
def test_prose_without_a_fence_is_no_code(language: str, backend: SandboxBackend) -> None:
    out = _score(language, PROSE, backend)
    assert (out.status, out.score, out.success, out.parsed) == ("ok", 0.0, False, False), out
    assert out.details["reason"] == "no_code" and out.details["source"] == "whole_response"
    assert out.details["error"], out  # why it is no program: the parser's or compiler's message


@pytest.mark.parametrize("language", LANGUAGES)
def test_a_fenced_program_that_does_not_compile_is_parsed(
    language: str, backend: SandboxBackend
) -> None:
    out = _score(language, _fenced(language, BROKEN[language]), backend)
    assert (out.status, out.score, out.parsed) == ("ok", 0.0, True), out
    reason = "syntax_error" if language == "python" else "compile_error"
    assert out.details["reason"] == reason and out.details["source"] == "fenced"


@pytest.mark.parametrize("language", LANGUAGES)
def test_the_same_text_without_a_fence_is_no_code(language: str, backend: SandboxBackend) -> None:
    # the fenced verdict is cached per code first: the whole response must not inherit its parsed
    fenced = _score(language, _fenced(language, BROKEN[language]), backend)
    whole = _score(language, BROKEN[language], backend)
    assert (fenced.parsed, whole.parsed) == (True, False)
    assert (whole.score, whole.details["reason"]) == (0.0, "no_code"), whole


@pytest.mark.parametrize("language", LANGUAGES)
def test_a_whole_response_that_is_a_program_is_parsed_and_run(
    language: str, backend: SandboxBackend
) -> None:
    out = _score(language, RIGHT[language], backend)
    assert (out.status, out.score, out.success, out.parsed) == ("ok", 1.0, True, True), out
    assert out.details["source"] == "whole_response"


@pytest.mark.parametrize(
    ("response", "parsed", "reason"),
    [
        (PROSE, False, "no_code"),
        ("The answer is 42", False, "no_code"),
        ("```python\nprint(1)", False, "no_code"),  # an unclosed fence: the whole text, no program
        # Python's grammar reads these, the compiler refuses them: a program with a syntax error
        ("return 1\n", True, "syntax_error"),
        ("x = 1\nnonlocal x\n", True, "syntax_error"),
    ],
)
def test_python_asks_its_grammar(response: str, parsed: bool, reason: str) -> None:
    # decided before any sandbox is asked for: a stand-in that refuses every run shows it
    out = _score("python", response, _NoRuns())
    assert (out.status, out.score, out.parsed, out.details["reason"]) == ("ok", 0.0, parsed, reason)


class _NoRuns:
    """A sandbox backend (at the seam, `sandboxes.api.SandboxBackend`) that fails the test if
    anything is run in it."""

    name = "no-runs"

    def run(self, request: RunRequest) -> RunResult:
        raise AssertionError("the response was run")

    def ready(self) -> bool:
        return True

    def stats(self) -> SandboxStats:
        raise AssertionError("not asked")

    def close(self) -> None:
        pass
