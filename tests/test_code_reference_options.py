"""A code reference's own options, on every sandbox backend: stdio `compare` (tolerances and
case, bounded by the spec) and per-problem `limits` (time and memory, capped by the spec).
Neither changes the hash of a spec that does not set the new spec fields."""

from __future__ import annotations

from typing import Any

import pytest

from reward_specs.code import CodeConfig, CodeReference, clear_cache, score_code
from reward_specs.code.reference import with_limits
from reward_specs.scorer import InvalidReference, Judgement, ScoreContext
from sandboxes.api import SandboxBackend

PI = {"stdio": [{"input": "", "output": "3.14159265\n"}]}
BURN = "import time\nt = time.process_time()\nwhile time.process_time() - t < {s}: pass\n"


def score(
    reference: dict[str, Any], response: str, backend: SandboxBackend, **config: Any
) -> Judgement:
    clear_cache()
    ref = CodeReference.model_validate(reference)
    return score_code(response, ref, CodeConfig(**config), ScoreContext(sandbox=backend))


def py(code: str) -> str:
    return f"```python\n{code}\n```"


def test_new_spec_fields_leave_existing_hashes_alone() -> None:
    dumped = CodeConfig().model_dump(mode="json")
    assert not {"test_time_s", "test_memory_mb", "max_reference_tol"} & set(dumped)
    assert "test_time_s" in CodeConfig(test_time_s=1.0).model_dump(mode="json")


# ------------------------------------------------------------------------------ compare


def test_a_reference_loosens_the_float_tolerance(backend: SandboxBackend) -> None:
    answer = py("print(3.1416)")
    assert score({"language": "python", "tests": PI}, answer, backend).score == 0.0
    loose = {**PI, "compare": {"float_abs_tol": 1e-4}}
    assert score({"language": "python", "tests": loose}, answer, backend).score == 1.0
    assert score({"language": "python", "tests": loose}, py("print(3.15)"), backend).score == 0


def test_a_reference_tightens_the_float_tolerance(backend: SandboxBackend) -> None:
    exact = {**PI, "compare": {"float_abs_tol": 0, "float_rel_tol": 0}}
    answer = py("print(3.141592651)")
    assert score({"language": "python", "tests": PI}, answer, backend).score == 1.0
    assert score({"language": "python", "tests": exact}, answer, backend).score == 0.0


def test_case_insensitive_comparison(backend: SandboxBackend) -> None:
    tests: dict[str, Any] = {"stdio": [{"input": "", "output": "YES\n"}]}
    answer = py("print('yes')")
    assert score({"language": "python", "tests": tests}, answer, backend).score == 0.0
    tests["compare"] = {"case_sensitive": False}
    assert score({"language": "python", "tests": tests}, answer, backend).score == 1.0
    assert score({"language": "python", "tests": tests}, py("print('no')"), backend).score == 0


def test_the_spec_bounds_what_a_reference_may_loosen(backend: SandboxBackend) -> None:
    reference = {"language": "python", "tests": {**PI, "compare": {"float_rel_tol": 0.5}}}
    with pytest.raises(InvalidReference, match="max_reference_tol"):
        score(reference, py("print(3)"), backend)
    assert score(reference, py("print(3)"), backend, max_reference_tol=0.5).score == 1.0


# ------------------------------------------------------------------------------ limits


def test_a_per_test_time_limit_fails_that_test_only(backend: SandboxBackend) -> None:
    tests = {"stdio": [{"input": "0\n", "output": "ok\n"}, {"input": "0.4\n", "output": "ok\n"}]}
    code = py("s = float(input())\n" + BURN.format(s="s") + "print('ok')")
    assert score({"language": "python", "tests": tests}, code, backend).score == 1.0
    limited = {"language": "python", "tests": tests, "limits": {"time_s": 0.2}}
    judgement = score(limited, code, backend)
    assert judgement.score == 0.5, judgement.details
    assert [t["status"] for t in judgement.details["tests"]] == ["passed", "timeout"]


def test_a_time_limit_bounds_one_process_tests_together(backend: SandboxBackend) -> None:
    tests = {"fn_name": "f", "cases": [{"args": [0], "expected": 0}, {"args": [1], "expected": 1}]}
    code = py(
        "import time\ndef f(x):\n    t = time.process_time()\n"
        + "    while time.process_time() - t < 0.3: pass\n    return x"
    )
    assert score({"language": "python", "tests": tests}, code, backend).score == 1.0
    limited = {"language": "python", "tests": tests, "limits": {"time_s": 0.2}}
    judgement = score(limited, code, backend)
    assert judgement.score == 0.0 and judgement.details["reason"] == "budget_exceeded"


def test_a_time_limit_above_the_spec_is_capped() -> None:
    reference = CodeReference.model_validate(
        {"language": "python", "tests": {"program": "pass"}, "limits": {"time_s": 100}}
    )
    assert with_limits(CodeConfig(), reference).budget_s == CodeConfig().budget_s


ALLOCATE = "data = bytearray(200 * 1024 * 1024)\nprint(len(data) > 0)"


def test_a_per_problem_memory_limit(backend: SandboxBackend) -> None:
    tests = {"stdio": [{"input": "", "output": "True\n"}]}
    assert score({"language": "python", "tests": tests}, py(ALLOCATE), backend).score == 1.0
    limited = {"language": "python", "tests": tests, "limits": {"memory_mb": 128}}
    judgement = score(limited, py(ALLOCATE), backend)
    assert judgement.score == 0.0 and judgement.details["tests"][0]["status"] == "memory"
    # above the spec's memory_mb it is capped: the spec's 512 MB still hold
    roomy = {"language": "python", "tests": tests, "limits": {"memory_mb": 4096}}
    assert score(roomy, py(ALLOCATE), backend, memory_mb=128).score == 0.0


def test_a_tight_memory_limit_bounds_the_program_not_its_compiler(
    backend: SandboxBackend,
) -> None:
    tests = {"stdio": [{"input": "", "output": "1\n"}]}
    small = (
        "```cpp\n#include <bits/stdc++.h>\nint main() { std::vector<int> v(1000, 1);"
        " std::cout << v[0] << std::endl; }\n```"
    )
    big = (
        "```cpp\n#include <bits/stdc++.h>\nint main() { std::vector<char> v(300 << 20, 1);"
        " std::cout << (int) v[12345] << std::endl; }\n```"
    )
    limited = {"language": "cpp", "tests": tests, "limits": {"memory_mb": 64}}
    judgement = score(limited, small, backend)
    assert judgement.score == 1.0, judgement.details
    judgement = score(limited, big, backend)
    assert judgement.score == 0.0 and judgement.details["tests"][0]["status"] == "memory"
