"""Puzzle samples of different seeds never share an entry (seed space 2), and a reference written
before seed spaces still names the entry it named.

Reasoning Gym draws entry i of a dataset seeded s from `Random(s + i)`: with the user's seed as the
dataset seed, (seed 1, index 1) is (seed 2, index 0). Under seed space 2 the dataset of seed s is
seeded `s * 2**32`, so entry (s, i) is drawn from `s * 2**32 + i`, one generator seed each.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from reward_specs import (
    InvalidReference,
    Item,
    ScoreContext,
    default_registry,
    load_specs,
    score_item,
)
from reward_specs.puzzles import (
    MAX_SAMPLE_COUNT,
    SEED_SPACE,
    SEED_STRIDE,
    PuzzleReference,
    dataset_seed,
    entry_for,
    sample_entries,
)
from service.main import create_app
from service.settings import Settings
from tests.helpers import score

TASKS = ("basic_arithmetic", "chain_sum", "spell_backward")
"""Tasks whose entries are drawn from `Random(dataset seed + index)` alone."""


def test_every_seed_and_index_has_a_generator_seed_of_its_own() -> None:
    seeds, indices = range(64), range(4096)
    spaced = {dataset_seed(s, SEED_SPACE) + i for s in seeds for i in indices}
    assert len(spaced) == len(seeds) * len(indices)
    legacy = {dataset_seed(s) + i for s in seeds for i in indices}
    assert len(legacy) == 64 + 4095  # what seed space 2 is for: seeds used to overlap


def _puzzle(entry: dict[str, Any]) -> tuple[Any, Any]:
    """An entry's question and answer (its metadata also holds its index)."""
    return entry["question"], entry["answer"]


@pytest.mark.parametrize("task", TASKS)
def test_an_entry_is_drawn_from_its_generator_seed(task: str) -> None:
    # What makes distinct generator seeds distinct entries: (seed s, index i) of seed space 2 is
    # entry 0 of the dataset seeded s * 2**32 + i, as the library draws it.
    for seed, index in ((0, 0), (1, 0), (1, 7), (3, 499)):
        spaced = entry_for(task, {}, seed, index, SEED_SPACE)
        alone = entry_for(task, {}, seed * SEED_STRIDE + index, 0)
        assert _puzzle(spaced) == _puzzle(alone), (seed, index)


def test_a_reference_without_a_seed_space_means_what_it_meant() -> None:
    assert dataset_seed(5) == 5
    old = _puzzle(entry_for("gcd", {}, 5, 3))
    assert old == _puzzle(entry_for("gcd", {}, 8, 0))  # the overlap, as before
    assert _puzzle(entry_for("gcd", {}, 0, 3, SEED_SPACE)) == _puzzle(entry_for("gcd", {}, 0, 3))
    assert _puzzle(entry_for("gcd", {}, 5, 3, SEED_SPACE)) != old


def _scored(reference: dict[str, Any], answer: str) -> Any:
    registry = default_registry()
    spec = load_specs(registry)["prorl-v1-2"]
    item = Item("puzzle", f"<answer>{answer}</answer>", reference)
    return score_item(registry, spec, item, ScoreContext())


def test_both_forms_of_a_reference_score_their_own_entry() -> None:
    old = {"task": "chain_sum", "config": {}, "seed": 5, "index": 3}
    new = {**old, "seed_space": 2}
    old_gold = entry_for("chain_sum", {}, 5, 3)["answer"]
    new_gold = entry_for("chain_sum", {}, 5, 3, SEED_SPACE)["answer"]
    assert old_gold != new_gold
    assert _scored(old, old_gold).score == 1.0 and _scored(old, new_gold).score == 0.0
    assert _scored(new, new_gold).score == 1.0 and _scored(new, old_gold).score == 0.0


@pytest.mark.parametrize(
    "reference",
    [
        {"task": "gcd", "config": {}, "seed": -1, "index": 0, "seed_space": 2},
        {"task": "gcd", "config": {}, "seed": 1, "index": 2**32, "seed_space": 2},
        {"task": "gcd", "config": {}, "seed": 1, "index": 0, "seed_space": 3},
        {"task": "gcd", "entry": {"question": "q", "answer": "1", "metadata": {}}, "seed_space": 2},
    ],
    ids=["negative-seed", "index-past-the-range", "unknown-space", "with-an-entry"],
)
def test_a_reference_outside_seed_space_2_is_refused(reference: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        PuzzleReference.model_validate(reference)
    assert _scored(reference, "1").status == "invalid"


def test_sampling_refuses_a_negative_seed_and_a_range_past_one_seed() -> None:
    with pytest.raises(InvalidReference, match="negative"):
        sample_entries("gcd", {}, -1, 1)
    with pytest.raises(InvalidReference, match="one seed's range") as past:
        sample_entries("gcd", {}, 1, 2, SEED_STRIDE - 1)
    assert past.value.code == "invalid_index"
    # the last index of seed 1, in a dataset that large
    (last,) = sample_entries("gcd", {"size": SEED_STRIDE}, 1, 1, SEED_STRIDE - 1)
    assert last["reference"]["index"] == SEED_STRIDE - 1


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ({"seed": -1}, "seed"),
        # the schema's bound on start keeps start + count within one seed, whatever the count
        ({"start": SEED_STRIDE - MAX_SAMPLE_COUNT + 1}, "start"),
        ({"start": SEED_STRIDE}, "start"),
    ],
)
def test_the_route_refuses_them_with_a_422(body: dict[str, Any], named: str) -> None:
    bare = TestClient(create_app(Settings(workers=1)))
    reply = bare.post("/v1/puzzles/gcd/sample", json=body)
    assert reply.status_code == 422, reply.text
    assert reply.json()["detail"][0]["loc"] == ["body", named]
    schema = bare.get("/openapi.json").json()["components"]["schemas"]["SampleRequest"]
    assert schema["properties"]["start"]["maximum"] == SEED_STRIDE - MAX_SAMPLE_COUNT


def test_two_seeds_sampled_over_http_share_no_entry(client: httpx.Client) -> None:
    items = []
    for task in TASKS:
        questions = []
        for seed in (1, 2):
            reply = client.post(f"/v1/puzzles/{task}/sample", json={"seed": seed, "count": 32})
            assert reply.status_code == 200, reply.text
            entries = reply.json()["entries"]
            assert {e["reference"]["seed_space"] for e in entries} == {2}
            questions.append({e["question"] for e in entries})
            items += [
                {
                    "domain": "puzzle",
                    "response": f"<answer>{e['answer']}</answer>",
                    "reference": e["reference"],
                }
                for e in entries
            ]
        assert len(questions[0]) == len(questions[1]) == 32, task
        assert not questions[0] & questions[1], task
        # as the library seeded them before seed spaces, the two seeds shared 31 of 32
        legacy = [{entry_for(task, {}, s, i)["question"] for i in range(32)} for s in (1, 2)]
        assert len(legacy[0] & legacy[1]) == 31, task
    # the references the samples carry regenerate the same entries in the workers
    assert [r["score"] for r in score(client, items)] == [1.0] * len(items)
