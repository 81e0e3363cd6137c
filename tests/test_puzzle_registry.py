"""Every Reasoning Gym task: gold answers score 1, the empty answer 0, and references fail loudly.

The registry-wide invariant runs over the installed registry (about 100 tasks), regenerating each
entry from (task, config, seed, index) and also sending it by value after a JSON round trip, as a
trainer using /v1/puzzles/{task}/sample would.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from reasoning_gym.dataset import ProceduralDataset
from reasoning_gym.factory import DATASETS, register_dataset

from reward_specs import Item, ScoreContext, default_registry, load_specs, score_item
from reward_specs.puzzles import gym

REGISTRY = default_registry()
SPEC = load_specs(REGISTRY)["prorl-v1"]
CTX = ScoreContext()
SHORT = os.environ.get("PROCTOR_SHORT", "") == "1"
INDICES = (0, 1) if SHORT else (0, 1, 2)
TASKS = [t for t in gym.task_names() if t != "composite"]


def score(response: str, reference: dict[str, Any]) -> Any:
    return score_item(REGISTRY, SPEC, Item("puzzle", response, reference), CTX)


def gold_of(task: str, entry: dict[str, Any]) -> str | None:
    if task == "graph_color":
        return json.dumps(entry["metadata"]["possible_answer"])
    answer = entry.get("answer")
    return answer if isinstance(answer, str) else None


def test_the_whole_registry_is_exposed() -> None:
    assert set(gym.task_names()) == set(DATASETS)
    assert len(TASKS) >= 100


@pytest.mark.parametrize("task", TASKS)
def test_gold_answer_scores_one_and_empty_zero(task: str) -> None:
    for index in INDICES:
        reference = {"task": task, "config": {}, "seed": 11, "index": index}
        entry = gym.entry_for(task, {}, 11, index)
        gold = gold_of(task, entry)
        by_value = {"task": task, "entry": json.loads(json.dumps(gym.jsonable(entry)))}
        if not gym.regeneration_reproducible(task):
            refused = score("<answer>x</answer>", reference)
            assert refused.error is not None and refused.error["code"] == "irreproducible_task"
            reference = by_value
        if gold is not None:
            for ref in (reference, by_value):
                outcome = score(f"<answer>{gold}</answer>", ref)
                assert outcome.status == "ok", outcome.error
                assert (outcome.score, outcome.success, outcome.parsed) == (1.0, True, True), (
                    ref is by_value,
                    outcome.details,
                )
        empty = score("", by_value)
        assert (empty.status, empty.score, empty.parsed) == ("ok", 0.0, False)


_GENERATE = """
import json, sys
from reward_specs.puzzles import gym
out = {t: json.dumps(gym.jsonable(gym.entry_for(t, {}, 11, 0)), sort_keys=True)
       for t in gym.task_names() if t != "composite"}
with open(sys.argv[1], "w") as f:  # not stdout: some generators print progress dots
    json.dump(out, f)
"""


def test_hash_seed_dependent_tasks_are_the_listed_ones(tmp_path: Path) -> None:
    """Regenerating an entry is only trusted where it gives the same entry in any process."""
    outputs = [tmp_path / "1.json", tmp_path / "2.json"]
    runs = [
        subprocess.Popen(
            [sys.executable, "-W", "ignore", "-c", _GENERATE, str(out)],
            env={**os.environ, "PYTHONHASHSEED": out.stem},
            stdout=subprocess.DEVNULL,
        )
        for out in outputs
    ]
    assert [run.wait(timeout=300) for run in runs] == [0, 0]
    first, second = (json.loads(out.read_text()) for out in outputs)
    differing = {t for t in first if first[t] != second[t]}
    assert differing <= gym.HASH_SEED_DEPENDENT, differing - gym.HASH_SEED_DEPENDENT


def test_composite_is_scored_by_its_parts() -> None:
    config = {
        "datasets": [
            {"name": "graph_color", "weight": 1, "config": {}},
            {"name": "gcd", "weight": 1, "config": {}},
        ]
    }
    seen = set()
    for index in range(8):
        entry = gym.entry_for("composite", config, 3, index)
        source = entry["metadata"]["source_dataset"]
        seen.add(source)
        gold = gold_of(source, entry)
        outcome = score(
            f"<answer>{gold}</answer>",
            {"task": "composite", "config": config, "seed": 3, "index": index},
        )
        assert (outcome.status, outcome.score) == ("ok", 1.0), outcome
        if source == "graph_color":
            assert "violations" in outcome.details  # our validator, not RG's scorer
    assert seen == {"graph_color", "gcd"}


@pytest.mark.parametrize(
    "reference,code,named",
    [
        (
            {"task": "no_such_task", "config": {}, "seed": 1, "index": 0},
            "unknown_task",
            "no_such_task",
        ),
        (
            {"task": "no_such_task", "entry": {"question": "", "metadata": {}}},
            "unknown_task",
            "no_such_task",
        ),
        ({"task": "gcd", "config": {"bogus": 1}, "seed": 1, "index": 0}, "invalid_config", "bogus"),
        (
            {"task": "gcd", "config": {"min_value": -3}, "seed": 1, "index": 0},
            "invalid_config",
            "min_value",
        ),
        ({"task": "gcd", "config": {"size": 5}, "seed": 1, "index": 7}, "invalid_index", "index 7"),
        ({"task": "composite", "config": {}, "seed": 1, "index": 0}, "invalid_config", "composite"),
        ({"task": "gcd", "seed": 1}, "invalid_reference", "entry"),
        (
            {"task": "graph_color", "entry": {"metadata": {"puzzle": {"vertices": [0]}}}},
            "invalid_reference",
            "puzzle",
        ),
    ],
)
def test_unusable_references_are_invalid(reference: dict[str, Any], code: str, named: str) -> None:
    outcome = score("<answer>1</answer>", reference)
    assert outcome.status == "invalid"
    assert outcome.error is not None
    assert outcome.error["code"] == code
    assert named in outcome.error["message"]


def test_answer_extraction() -> None:
    reference = {"task": "gcd", "config": {}, "seed": 2, "index": 0}
    gold = gym.entry_for("gcd", {}, 2, 0)["answer"]
    # the last <answer> wins, whitespace inside the tag is ignored
    assert score(f"<answer>0</answer> then <answer>\n {gold} \n</answer>", reference).score == 1.0
    # nothing in the tags: parsed false, with the reason
    outcome = score(f"The gcd is \\boxed{{{gold}}}", reference)
    assert (outcome.parsed, outcome.details["reason"]) == (False, "no_answer")
    # an unclosed <think> hides everything (the engine strips reasoning)
    assert score(f"<think> <answer>{gold}</answer>", reference).parsed is False


def test_fallbacks_are_a_spec_parameter() -> None:
    from reward_specs.puzzles import PuzzleConfig, PuzzleReference, score_puzzle

    gold = gym.entry_for("gcd", {}, 2, 0)["answer"]
    reference = PuzzleReference.model_validate({"task": "gcd", "config": {}, "seed": 2, "index": 0})
    config = PuzzleConfig(fallbacks=("boxed", "answer_is"))
    judged = score_puzzle(f"so \\boxed{{{gold}}}", reference, config, CTX)
    assert (judged.score, judged.details["source"]) == (1.0, "boxed")
    judged = score_puzzle(f"The answer is {gold}", reference, config, CTX)
    assert (judged.score, judged.details["source"]) == (1.0, "answer_is")


# ---------------------------------------------------------------- scorers that raise
# Two tasks registered in Reasoning Gym's own registry for these tests (the seam: a task whose
# scorer raises on some answers, and one whose scorer raises on every answer).


@dataclasses.dataclass
class _FlakyConfig:
    seed: int | None = None
    size: int = 10


class _Flaky(ProceduralDataset):
    def __init__(self, config: _FlakyConfig) -> None:
        super().__init__(config=config, seed=config.seed, size=config.size)

    def __getitem__(self, idx: int) -> dict[str, Any]:
        return {"question": "2+2?", "answer": "4", "metadata": {"source_index": idx}}

    def score_answer(self, answer: str | None, entry: dict[str, Any]) -> float:
        if answer == "boom":
            raise RuntimeError("scorer bug on 'boom'")
        return 1.0 if answer == entry["answer"] else 0.0


class _Broken(_Flaky):
    def score_answer(self, answer: str | None, entry: dict[str, Any]) -> float:
        raise ImportError("a missing optional dependency")


@pytest.fixture
def test_tasks() -> Iterator[None]:
    register_dataset("proctor_test_flaky", _Flaky, _FlakyConfig)
    register_dataset("proctor_test_broken", _Broken, _FlakyConfig)
    try:
        yield
    finally:
        DATASETS.pop("proctor_test_flaky")
        DATASETS.pop("proctor_test_broken")


@pytest.mark.usefixtures("test_tasks")
def test_an_answer_that_crashes_the_scorer_is_judged_zero_and_says_so() -> None:
    reference = {"task": "proctor_test_flaky", "config": {}, "seed": 1, "index": 0}
    outcome = score("<answer>boom</answer>", reference)
    assert (outcome.status, outcome.score, outcome.success, outcome.parsed) == (
        "ok",
        0.0,
        False,
        True,
    )
    assert "RuntimeError: scorer bug on 'boom'" in outcome.details["scorer_exception"]
    assert score("<answer>4</answer>", reference).score == 1.0


@pytest.mark.usefixtures("test_tasks")
def test_a_task_whose_scorer_always_raises_makes_items_invalid() -> None:
    for index in (0, 1):
        reference = {"task": "proctor_test_broken", "config": {}, "seed": 1, "index": index}
        outcome = score("<answer>4</answer>", reference)
        assert outcome.status == "invalid"
        assert outcome.error is not None and outcome.error["code"] == "broken_task"
        assert "ImportError" in outcome.error["message"]


def test_regenerating_many_seeds_keeps_the_scoring_datasets() -> None:
    # Scoring datasets live apart from the datasets built to regenerate entries, so references
    # by coordinates over many seeds never make every task rebuild its scorer.
    scorer = gym.scoring_dataset("basic_arithmetic")
    for seed in range(gym.DATASET_CACHE_SIZE + 8):
        gym.entry_for("basic_arithmetic", {}, 1000 + seed, 0)
    assert gym.scoring_dataset("basic_arithmetic") is scorer
