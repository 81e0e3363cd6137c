"""LiveCodeBench's tests through the existing shapes, with the mapping docs/api.md shows: its
functional tests (a `Solution` method, one JSON value per input line) are `fn_name` cases with
LiveCodeBench's own import block as `prelude`; its stdin tests are `stdio`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from reward_specs.code import CodeConfig, CodeReference, clear_cache, score_code
from reward_specs.scorer import InvalidReference, ScoreContext
from sandboxes.api import SandboxBackend

DOC = (Path(__file__).resolve().parent.parent / "docs" / "api.md").read_text(encoding="utf-8")


def _documented_mapping() -> dict[str, Any]:
    """The mapping exactly as docs/api.md writes it (its `livecodebench_reference`)."""
    start = DOC.index("def livecodebench_reference")
    start = DOC.rindex("```python\n", 0, start) + len("```python\n")
    code = DOC[start : DOC.index("```", start)]
    namespace: dict[str, Any] = {}
    exec(compile(code, "docs/api.md", "exec"), namespace)
    return namespace


MAPPING = _documented_mapping()

PROBLEM = {  # the fields of a LiveCodeBench row (code_generation_lite) that the mapping reads
    "question_title": "maximum-sum-of-k-consecutive",
    "starter_code": "class Solution:\n    def maxSum(self, nums: List[int], k: int) -> int:\n",
    "public_test_cases": json.dumps(
        [
            {"input": "[2,6,7,3,1,7]\n3", "output": "16", "testtype": "functional"},
            {"input": "[1,2]\n1", "output": "2", "testtype": "functional"},
        ]
    ),
    "metadata": json.dumps({"func_name": "maxSum"}),
}
RIGHT = """
class Solution:
    def maxSum(self, nums: List[int], k: int) -> int:
        best = window = sum(nums[:k])
        for i in range(k, len(nums)):
            window += nums[i] - nums[i - k]
            best = max(best, window)
        return best
"""


def score(reference: dict[str, Any], code: str, backend: SandboxBackend) -> float:
    clear_cache()
    ref = CodeReference.model_validate(reference)
    response = f"```python\n{code.strip()}\n```"
    return score_code(response, ref, CodeConfig(), ScoreContext(sandbox=backend)).score


def test_the_mapping_of_a_functional_problem() -> None:
    reference = MAPPING["livecodebench_reference"](PROBLEM)
    assert reference["tests"]["fn_name"] == "maxSum"
    assert reference["tests"]["cases"][0] == {"args": [[2, 6, 7, 3, 1, 7], 3], "expected": 16}
    assert "from typing import *" in reference["tests"]["prelude"]


def test_a_functional_problem_scores_through_fn_name(backend: SandboxBackend) -> None:
    reference = MAPPING["livecodebench_reference"](PROBLEM)
    # `List` is not imported by the response: LiveCodeBench's import block provides it
    assert score(reference, RIGHT, backend) == 1.0
    wrong = "class Solution:\n    def maxSum(self, nums, k):\n        return max(nums) * k\n"
    assert score(reference, wrong, backend) == 0.5


def test_a_stdin_problem_scores_through_stdio(backend: SandboxBackend) -> None:
    problem = {
        **PROBLEM,
        "public_test_cases": json.dumps(
            [{"input": "3\n1 2 3\n", "output": "6\n", "testtype": "stdin"}]
        ),
        "metadata": "{}",
    }
    reference = MAPPING["livecodebench_reference"](problem)
    assert score(reference, "input()\nprint(sum(map(int, input().split())))", backend) == 1.0


def test_a_prelude_is_python_only(backend: SandboxBackend) -> None:
    reference = CodeReference.model_validate(
        {
            "language": "cpp",
            "tests": {
                "fn_name": "f",
                "prelude": "import os",
                "cases": [{"args": [], "expected": 1}],
            },
        }
    )
    with pytest.raises(InvalidReference, match="Python only"):
        score_code("int f() { return 1; }", reference, CodeConfig(), ScoreContext(backend))
