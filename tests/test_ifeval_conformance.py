"""Conformance with the reference implementation, strict and loose, instruction by instruction.

The reference is lm-eval's copy of Google's IFEval checkers (a dev dependency), loaded offline by
`tests/ifeval_reference.py` with langdetect seeded as ours is. Three things are compared with it:
the conformance set in `tests/data/ifeval/` (IFEval-format prompts with a following and a breaking
response each), the per-threshold table of `test_ifeval_instructions.py`, and sentence counts.
The conformance set also records the reference's verdicts, so it is checked even without lm-eval.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from reward_specs.ifeval import LANGUAGE_CODES, build_check, evaluate
from reward_specs.ifeval.text import count_sentences, detect_language
from tests.test_ifeval_instructions import CASES

DATA = Path(__file__).parent / "data" / "ifeval"


def _load(name: str) -> list[dict[str, Any]]:
    with (DATA / name).open(encoding="utf-8") as f:
        return [json.loads(line) for line in f]


PROMPTS = {row["key"]: row for row in _load("prompts.jsonl")}
RESPONSES = _load("responses.jsonl")


def _reference() -> Any:
    """The oracle module; in CI its absence is a failure, elsewhere a skip."""
    if importlib.util.find_spec("lm_eval") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("lm-eval (the dev extra) is required in CI for the conformance oracle")
        pytest.skip("lm-eval is not installed (pip install -e '.[dev]')")
    from tests import ifeval_reference

    return ifeval_reference


def _ours(ids: list[str], kwargs: list[dict[str, Any]], response: str) -> tuple[list[bool], ...]:
    verdicts = evaluate(response, [build_check(i, k) for i, k in zip(ids, kwargs, strict=True)])
    return [v.strict for v in verdicts], [v.loose for v in verdicts]


def _label(row: dict[str, Any]) -> str:
    return f"{row['key']}-{row['intent']}"


def test_conformance_set_covers_every_instruction_several_times() -> None:
    counts: dict[str, int] = {}
    for prompt in PROMPTS.values():
        for instruction_id in prompt["instruction_id_list"]:
            counts[instruction_id] = counts.get(instruction_id, 0) + 1
    assert len(counts) == 25
    assert min(counts.values()) >= 3
    intents = {row["intent"] for row in RESPONSES}
    assert intents == {"follows", "breaks"}


@pytest.mark.parametrize("row", RESPONSES, ids=_label)
def test_conformance_set_matches_recorded_reference(row: dict[str, Any]) -> None:
    prompt = PROMPTS[row["key"]]
    strict, loose = _ours(prompt["instruction_id_list"], prompt["kwargs"], row["response"])
    assert strict == row["reference_strict"]
    assert loose == row["reference_loose"]
    # the response does what it was written for, in the reference's strict judgement
    assert all(strict) == (row["intent"] == "follows")


@pytest.mark.parametrize("row", RESPONSES, ids=_label)
def test_conformance_set_matches_live_reference(row: dict[str, Any]) -> None:
    reference = _reference()
    prompt = PROMPTS[row["key"]]
    expected = reference.reference_verdicts(
        prompt["instruction_id_list"], prompt["kwargs"], row["response"], prompt["prompt"]
    )
    assert _ours(prompt["instruction_id_list"], prompt["kwargs"], row["response"]) == expected


def test_threshold_table_is_the_reference_verdict() -> None:
    reference = _reference()
    disagreements = []
    for case in CASES:
        strict, loose = reference.reference_verdicts(
            [case.instruction_id], [case.kwargs], case.response
        )
        if (strict[0], loose[0]) != (case.strict, case.loose):
            disagreements.append((case.instruction_id, case.response, strict[0], loose[0]))
    assert disagreements == []


SENTENCE_TEXTS = [
    'He said "Stop." Then he left.',
    "Wait... what? Really!",
    "I have 3.5 apples. You have 2.",
    "See e.g. the U.K. and the E.U. They agree.",
    "1. First item.\n2. Second item.",
    "It costs $5.99. Buy it!",
    "Mr. and Mrs. Smith arrived at 10 a.m. on Jan. 5. They left.",
    "The Ph.D. student left at 5 p.m. She was tired.",
    "Version 2.0 ships today. Version 3.0 ships later.",
    "What?! No way. (Yes way.)",
    "12345 !!! 678",
    "no capital letters. still a sentence. and another",
]


def test_sentence_counts_of_the_reference_test_suite() -> None:
    """The counts asserted by Google's own `instructions_util_test.py`."""
    assert count_sentences("xx,x. xx,x! xx/x. x{x}x? x.") == 5
    assert count_sentences("xx,x! xxxx. x(x)x?") == 3
    assert count_sentences("xxxx. xx,x! xx|x. x&x x?") == 4
    assert count_sentences("xx-x]xx,x! x{x}xx,x.") == 2


@pytest.mark.parametrize("text", SENTENCE_TEXTS + [row["response"] for row in RESPONSES])
def test_sentence_counts_match_reference(text: str) -> None:
    reference = _reference()
    assert count_sentences(text) == reference.reference_count_sentences(text)


SHORT_TEXTS = ["Guten Morgen", "Hola", "ciao bella", "ok", "merci beaucoup", "Tak", "hi there"]


def test_language_detection_is_deterministic_in_process() -> None:
    for text in SHORT_TEXTS:
        answers = {detect_language(text) for _ in range(30)}
        assert len(answers) == 1, (text, answers)


def test_language_detection_is_deterministic_across_processes() -> None:
    here = [detect_language(text) for text in SHORT_TEXTS]
    code = (
        "import json, sys\n"
        "from reward_specs.ifeval.text import detect_language\n"
        f"print(json.dumps([detect_language(t) for t in {SHORT_TEXTS!r}]))\n"
    )
    root = Path(__file__).resolve().parents[1]
    for _ in range(2):
        out = subprocess.run(
            [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True
        )
        assert json.loads(out.stdout) == here


def test_language_detection_matches_seeded_reference() -> None:
    reference = _reference()
    for text in SHORT_TEXTS:
        for code in LANGUAGE_CODES:
            kwargs = [{"language": code}]
            ours = _ours(["language:response_language"], kwargs, text)
            expected = reference.reference_verdicts(["language:response_language"], kwargs, text)
            assert ours == expected, (text, code)
