"""Every data source `proctor_client.verl` maps, scored through `compute_score` against a live
server with a response and ground truth in that dataset's own format, as verl's preprocessing
(`examples/data_preprocess/`) leaves them: GSM8K's `#### 72`, DAPO's `Answer:` line, MATH's
boxed answer, the code sets' `{"inputs", "outputs", "fn_name"?}` JSON, IFEval's row."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from proctor_client import ProctorClient, ScoreItem
from proctor_client.verl import (
    DATA_SOURCE_DOMAINS,
    DATA_SOURCE_FORMATS,
    aclose,
    code_reference,
    compute_score,
    reference_of,
)
from tests.helpers import Server

GSM8K_SOLUTION = (
    "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\n"
    "Natalia sold 48+24 = <<48+24=72>>72 clips altogether in April and May.\n#### 72"
)
TWO_SUM = (
    "```python\nclass Solution:\n    def twoSum(self, nums, target):\n"
    "        seen = {}\n        for i, n in enumerate(nums):\n"
    "            if target - n in seen:\n                return [seen[target - n], i]\n"
    "            seen[n] = i\n```"
)

# data_source -> (response, ground_truth as verl hands it over, expected score)
SOURCES: dict[str, tuple[str, Any, float]] = {
    # GSM8K: verl's preprocessing keeps the number after `####` as the ground truth.
    "openai/gsm8k": (GSM8K_SOLUTION, "72", 1.0),
    # MATH: the ground truth is the solution's last boxed answer; responses box theirs.
    "lighteval/MATH": ("Halving gives $\\boxed{\\dfrac{1}{2}}$.", "\\frac{1}{2}", 1.0),
    "DigitalLearningGmbH/MATH-lighteval": ("So $x = \\boxed{-3}$.", "-3", 1.0),
    "HuggingFaceH4/MATH-500": (
        "In polar form the point is $\\boxed{\\left( 3, \\frac{\\pi}{2} \\right)}$.",
        "\\left( 3, \\frac{\\pi}{2} \\right)",
        1.0,
    ),
    # DAPO-Math-17k: the prompt asks for `Answer: $Answer` on the last line.
    "math_dapo": ("So m + n = 34.\n\nAnswer: 34", "34", 1.0),
    "aime24": ("Thus the product is 204, not 240.\nAnswer: 240", "204", 0.0),
    "aime25": ("The count is $\\boxed{70}$.", "70", 1.0),  # verl's math_dapo reads a box too
    # NuminaMath (PRIME's Eurus-2 data): boxed answers.
    "numina_aops_forum": ("Hence the maximum is $\\boxed{\\sqrt{2}}$.", "\\sqrt{2}", 1.0),
    "numina_synthetic_math": ("The sum is $\\boxed{12}$.", "12", 1.0),
    "numina_amc_aime": ("There are $\\boxed{5}$ such numbers.", "5", 1.0),
    "numina_olympiads": ("We get $\\boxed{x=2}$.", "2", 1.0),
    # Code (PRIME's Eurus-2 data, TACO, APPS): the tests as JSON text, verl's shape.
    "codecontests": (
        "```python\na, b = map(int, input().split())\nprint(a + b)\n```",
        json.dumps({"inputs": ["1 2\n", "10 -3\n"], "outputs": ["3\n", "7\n"]}),
        1.0,
    ),
    "codeforces": (  # one case of two right: partial credit, as verl's continuous score
        "```python\nn = int(input())\nprint(sum(map(int, input().split())) if n < 3 else 0)\n```",
        json.dumps({"inputs": ["2\n1 2\n", "3\n1 2 3\n"], "outputs": [["3"], ["6"]]}),
        0.5,
    ),
    "apps": (  # APPS stores a call's arguments as a list and wraps the return value in one
        "```python\ndef add(a, b):\n    return a + b\n```",
        {"fn_name": "add", "inputs": [[1, 2], [-4, 4]], "outputs": [[3], [0]]},
        1.0,
    ),
    "taco": (  # verl's harness: one JSON argument a line; a LeetCode-style `Solution` class
        TWO_SUM,
        json.dumps(
            {
                "fn_name": "twoSum",
                "inputs": ["[2, 7, 11, 15]\n9", "[3, 2, 4]\n6"],
                "outputs": ["[[0, 1]]", "[[1, 2]]"],
            }
        ),
        1.0,
    ),
    # IFEval: the dataset's row (instruction ids and their kwargs) as the ground truth.
    "google/IFEval": (
        "hello world, all in lower case",
        {
            "key": 1000,
            "prompt": "Answer in lowercase, without commas.",
            "instruction_id_list": ["change_case:english_lowercase", "punctuation:no_comma"],
            "kwargs": [{}, {}],
        },
        0.5,
    ),
}


def test_every_mapped_data_source_has_a_case() -> None:
    assert set(SOURCES) == set(DATA_SOURCE_DOMAINS)
    assert set(DATA_SOURCE_FORMATS) <= set(DATA_SOURCE_DOMAINS)


async def _scored(url: str, data_source: str, response: str, ground_truth: Any) -> Any:
    try:
        return await compute_score(data_source, response, ground_truth, {"index": 0}, url=url)
    finally:
        await aclose()


@pytest.mark.parametrize("data_source", sorted(SOURCES))
def test_data_source_in_its_own_format(server: Server, data_source: str) -> None:
    response, ground_truth, expected = SOURCES[data_source]
    scored = asyncio.run(_scored(server.url, data_source, response, ground_truth))
    assert scored["score"] == expected, scored
    assert scored["proctor_parsed"] == 1.0


def test_without_its_format_gsm8k_would_score_unparsed(server: Server) -> None:
    """The bug this closes: a GSM8K-trained response, judged by the spec's extraction alone."""
    with ProctorClient(server.url) as client:
        plain, native = client.score(
            [
                ScoreItem(domain="math", response=GSM8K_SOLUTION, reference={"answer": "72"}),
                ScoreItem(
                    domain="math",
                    response=GSM8K_SOLUTION,
                    reference={"answer": "72", "format": "gsm8k"},
                ),
            ]
        )
    assert (plain.reward, plain.parsed) == (0.0, False)
    assert (native.reward, native.parsed) == (1.0, True)


def test_a_stated_format_is_kept() -> None:
    """A ground truth that is already a reference keeps its own `format` (or none)."""
    assert reference_of("openai/gsm8k", "math", "72", None) == {"answer": "72", "format": "gsm8k"}
    stated = {"answer": "72", "format": "math_dapo"}
    assert reference_of("openai/gsm8k", "math", stated, None) == stated
    assert reference_of("lighteval/MATH", "math", "72", None) == {"answer": "72"}


@pytest.mark.parametrize(
    ("ground_truth", "tests"),
    [
        # stdio, lines given as a list are joined
        ({"inputs": ["1\n", ["2", "3"]], "outputs": ["1\n", ["2", "3"]]},
         {"stdio": [{"input": "1\n", "output": "1\n"}, {"input": "2\n3", "output": "2\n3"}]}),
        # fn_name, verl's stdin harness: one JSON value a line; no input is no arguments
        ({"fn_name": "f", "inputs": ["[1, 2]\n\"a\"\n", ""], "outputs": ["[3]", "null"]},
         {"fn_name": "f", "cases": [{"args": [[1, 2], "a"], "expected": 3},
                                    {"args": [], "expected": None}]}),
        # fn_name, APPS's lists; a wrapped list return value stays a list
        ({"fn_name": "f", "inputs": [[1]], "outputs": [[[1, 2]]]},
         {"fn_name": "f", "cases": [{"args": [1], "expected": [1, 2]}]}),
        # an output that is not JSON is the string itself
        ({"fn_name": "f", "inputs": [["x"]], "outputs": ["plain text"]},
         {"fn_name": "f", "cases": [{"args": ["x"], "expected": "plain text"}]}),
    ],
)  # fmt: skip
def test_code_reference(ground_truth: dict[str, Any], tests: dict[str, Any]) -> None:
    reference = code_reference(ground_truth)
    assert reference["language"] == "python"
    got = dict(reference["tests"])
    prelude = got.pop("prelude", None)
    assert got == tests
    assert (prelude is not None) == ("fn_name" in tests)
    if prelude is not None:
        assert "from typing import *" in prelude and "import collections" in prelude


def test_code_reference_keeps_the_first_cases() -> None:
    ground_truth = {"inputs": [str(i) for i in range(12)], "outputs": [str(i) for i in range(12)]}
    assert len(code_reference(ground_truth, 10)["tests"]["stdio"]) == 10
    with pytest.raises(ValueError, match="3 inputs but 2 outputs"):
        code_reference({"inputs": ["1", "2", "3"], "outputs": ["1", "2"]})
