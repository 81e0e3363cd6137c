"""stdio tests judged by the reference's checker, on every sandbox backend: several valid outputs
accepted and wrong ones refused, the asymmetric checker, a checker that refuses the reference
(invalid), one that crashes or loops on a response's output (that test refused, the others
judged), C++ checkers with a shipped header, and the checkers' own pool."""

from __future__ import annotations

from typing import Any

import pytest

from reward_specs.code import CodeConfig, CodeReference, clear_cache, score_code
from reward_specs.scorer import InvalidReference, Judgement, ScoreContext
from sandboxes.api import SandboxBackend, SandboxUnavailable
from sandboxes.checkers import LazyBackend

# Divisors of n: the first line (their number) must be the reference's; the rest is any order.
DIVISORS_PY = """
import sys
inp, out, ans = (open(p).read().split() for p in sys.argv[1:4])
n = int(inp[0])
if not out or out[0] != ans[0]:
    sys.exit("wrong count")
k = int(ans[0])
got = out[1:]
if len(got) != k or not all(t.isdigit() for t in got):
    sys.exit("wrong length")
values = [int(t) for t in got]
if len(set(values)) != k or any(v < 1 or n % v for v in values):
    sys.exit("not the divisors")
"""
DIVISORS_CPP = """
#include <fstream>
#include <set>
#include "check_util.h"
int main(int argc, char** argv) {
    std::ifstream in(argv[1]), out(argv[2]), ans(argv[3]);
    long long n, k, k_out;
    in >> n; ans >> k;
    if (!(out >> k_out) || k_out != k) return fail("wrong count");
    std::set<long long> seen;
    for (long long i = 0; i < k; i++) {
        long long v;
        if (!(out >> v) || v < 1 || n % v != 0 || !seen.insert(v).second) return fail("bad");
    }
    std::string extra;
    if (out >> extra) return fail("extra output");
    return 0;
}
"""
CHECK_UTIL = "#include <cstdio>\nstatic int fail(const char* m) { std::puts(m); return 1; }\n"
TESTS = [
    {"input": "12\n", "output": "6\n1 2 3 4 6 12\n"},
    {"input": "7\n", "output": "2\n1 7\n"},
]


def checker(language: str) -> dict[str, Any]:
    if language == "python":
        return {"language": "python", "source": DIVISORS_PY}
    return {"language": "cpp", "source": DIVISORS_CPP, "files": {"check_util.h": CHECK_UTIL}}


def score(
    reference: dict[str, Any],
    code: str,
    backend: SandboxBackend,
    checkers: SandboxBackend | None,
    **config: Any,
) -> Judgement:
    clear_cache()
    ref = CodeReference.model_validate(reference)
    ctx = ScoreContext(sandbox=backend, checker_sandbox=checkers)
    return score_code(f"```python\n{code.strip()}\n```", ref, CodeConfig(**config), ctx)


def divisors_reference(language: str) -> dict[str, Any]:
    return {"language": "python", "tests": {"stdio": TESTS, "checker": checker(language)}}


DESCENDING = """
n = int(input())
d = [v for v in range(n, 0, -1) if n % v == 0]
print(len(d)); print(*d)
"""
ASCENDING_ONE_LINE = """
n = int(input())
d = [v for v in range(1, n + 1) if n % v == 0]
print(len(d), *d)
"""
COPIES_FIRST_LINE = """
n = int(input())
d = [v for v in range(1, n + 1) if n % v == 0]
print(len(d)); print(*([1] * len(d)))
"""
WRONG_COUNT = "n = int(input())\nprint(1)\nprint(1)"


@pytest.mark.parametrize("language", ["python", "cpp"])
def test_several_valid_outputs_are_accepted_and_wrong_ones_refused(
    backend: SandboxBackend, checkers: SandboxBackend, language: str
) -> None:
    reference = divisors_reference(language)
    for right in (DESCENDING, ASCENDING_ONE_LINE):
        judgement = score(reference, right, backend, checkers)
        assert judgement.score == 1.0, judgement.details
    judgement = score(reference, WRONG_COUNT, backend, checkers)
    assert judgement.score == 0.0
    assert [t["status"] for t in judgement.details["tests"]] == ["wrong_answer"] * 2


@pytest.mark.parametrize("language", ["python", "cpp"])
def test_the_asymmetric_checker_refuses_a_copied_first_line(
    backend: SandboxBackend, checkers: SandboxBackend, language: str
) -> None:
    # For 7 the copy [1, 1] has a repeated divisor too: both tests refused.
    judgement = score(divisors_reference(language), COPIES_FIRST_LINE, backend, checkers)
    assert judgement.score == 0.0, judgement.details
    assert "checker" in judgement.details["tests"][0]["error"]


def test_a_checker_refusing_the_reference_makes_the_item_invalid(
    backend: SandboxBackend, checkers: SandboxBackend
) -> None:
    broken = {"language": "python", "source": "import sys\nsys.exit(1)"}
    reference = {"language": "python", "tests": {"stdio": TESTS, "checker": broken}}
    with pytest.raises(InvalidReference, match="refuses the reference's own answer"):
        score(reference, DESCENDING, backend, checkers)
    # whatever the response did: one whose every run crashed
    with pytest.raises(InvalidReference):
        score(reference, "raise SystemExit(3)", backend, checkers)


def test_a_checker_that_does_not_build_is_invalid(
    backend: SandboxBackend, checkers: SandboxBackend
) -> None:
    broken = {"language": "cpp", "source": '#include "testlib.h"\nint main() {}'}
    reference = {"language": "python", "tests": {"stdio": TESTS, "checker": broken}}
    with pytest.raises(InvalidReference, match="does not build"):
        score(reference, DESCENDING, backend, checkers)


def test_a_checker_crashing_or_looping_on_an_output_refuses_that_test_only(
    backend: SandboxBackend, checkers: SandboxBackend
) -> None:
    fragile = (
        "import sys\nout = open(sys.argv[2]).read()\n"
        "if 'crash' in out: raise RuntimeError('checker bug')\n"
        "if 'loop' in out:\n    while True: pass\n"
        "sys.exit(0 if out.split() == open(sys.argv[3]).read().split() else 1)\n"
    )
    tests = [
        {"input": "crash\n", "output": "fine\n"},
        {"input": "loop\n", "output": "fine\n"},
        {"input": "fine\n", "output": "fine\n"},
    ]
    reference = {
        "language": "python",
        "tests": {"stdio": tests, "checker": {"language": "python", "source": fragile}},
    }
    judgement = score(reference, "print(input())", backend, checkers, checker_cpu_s=1.0)
    statuses = [t["status"] for t in judgement.details["tests"]]
    assert statuses == ["wrong_answer", "wrong_answer", "passed"], judgement.details
    assert judgement.score == pytest.approx(1 / 3)


def test_the_response_never_sees_the_answer(
    backend: SandboxBackend, checkers: SandboxBackend
) -> None:
    # The answer is a secret no program could compute; the response looks for it everywhere.
    tests = [{"input": "", "output": "proctor-" + "answer-91c2\n"}]
    exact = "import sys\nsys.exit(open(sys.argv[2]).read() != open(sys.argv[3]).read())\n"
    reference = {
        "language": "python",
        "tests": {"stdio": tests, "checker": {"language": "python", "source": exact}},
    }
    look = (
        "import os, re\npat = re.compile(rb'proctor-answer-[0-9a-f]{4}')\n"
        "for d, _, names in os.walk('/'):\n"
        "    if d.startswith(('/proc', '/sys', '/dev')): continue\n"
        "    for n in names:\n"
        "        try:\n"
        "            m = pat.search(open(os.path.join(d, n), 'rb').read(1 << 20))\n"
        "            if m: print(m.group().decode()); raise SystemExit\n"
        "        except OSError: pass\n"
        "print('nothing')\n"
    )
    assert score(reference, "print('proctor-' + 'answer-91c2')", backend, checkers).score == 1
    for _ in range(3):
        assert score(reference, look, backend, checkers, budget_s=4).score == 0.0


def test_without_a_checker_pool_the_item_is_not_judged(backend: SandboxBackend) -> None:
    with pytest.raises(SandboxUnavailable, match="checker"):
        score(divisors_reference("python"), DESCENDING, backend, None)


def test_the_checker_pool_is_opened_on_first_use() -> None:
    opened: list[int] = []

    def opener() -> SandboxBackend:
        opened.append(1)
        raise SandboxUnavailable("not here")

    lazy = LazyBackend("local", opener)
    assert lazy.stats().size == 0 and lazy.ready() and not opened
    with pytest.raises(SandboxUnavailable):
        lazy.run(None)  # type: ignore[arg-type]
    assert opened == [1]
    lazy.close()
    assert not lazy.ready()
