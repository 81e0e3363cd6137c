"""Graph colouring: our validator against Reasoning Gym's `score_answer`.

The property: on generated puzzles (the sizes ProRL evaluates: 10, 13, 15, 18 and 20 vertices, and
others) and answers that are valid, broken one rule at a time, or malformed JSON, our score equals
the library's wherever the library does not raise. Every answer goes through the whole scorer
(`<answer>` extraction, JSON location, validation).
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
import reasoning_gym
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reward_specs.puzzles import PuzzleConfig, PuzzleReference, score_puzzle
from reward_specs.scorer import Judgement, ScoreContext
from tests.puzzle_cases import malformed_variants

CTX = ScoreContext()
LENIENT = PuzzleConfig()
STRICT = PuzzleConfig(strict=True)
PROR_SIZES = (10, 13, 15, 18, 20)


def _dataset(vertices: int, colours: int, p: float, seed: int) -> Any:
    return reasoning_gym.create_dataset(
        "graph_color",
        min_num_vertices=vertices,
        max_num_vertices=vertices,
        num_colors=colours,
        edge_probability=p,
        seed=seed,
        size=1000,
    )


def ours(entry: dict[str, Any], text: str, config: PuzzleConfig = LENIENT) -> Judgement:
    reference = PuzzleReference.model_validate({"task": "graph_color", "entry": entry})
    return score_puzzle(f"<answer>{text}</answer>", reference, config, CTX)


def theirs(dataset: Any, entry: dict[str, Any], text: str) -> float | None:
    """Reasoning Gym's score on the text we give both, or None where its scorer raises."""
    try:
        return float(dataset.score_answer(text, entry))
    except Exception:
        return None


def _mutations(entry: dict[str, Any], rng: random.Random) -> list[tuple[str, Any]]:
    """The valid colouring, then one rule broken at a time (as JSON-able values)."""
    puzzle = entry["metadata"]["puzzle"]
    valid = {str(k): v for k, v in entry["metadata"]["possible_answer"].items()}
    vertices = [str(v) for v in puzzle["vertices"]]
    out: list[tuple[str, Any]] = [("valid", valid)]
    v = rng.choice(vertices)
    out.append(("missing_vertex", {k: c for k, c in valid.items() if k != v}))
    out.append(("colour_out_of_palette", {**valid, v: puzzle["num_colors"] + 1}))
    out.append(("colour_zero", {**valid, v: 0}))
    out.append(("colour_as_string", {**valid, v: str(valid[v])}))
    out.append(("colour_as_float", {**valid, v: float(valid[v])}))
    out.append(("colour_as_bool", {**valid, v: True}))
    out.append(("colour_null", {**valid, v: None}))
    out.append(("colour_list", {**valid, v: [valid[v]]}))
    out.append(("extra_key", {**valid, "99": 1}))
    out.append(
        ("key_with_space", {**{k: c for k, c in valid.items() if k != v}, f" {v}": valid[v]})
    )
    if puzzle["edges"]:
        a, b = rng.choice(puzzle["edges"])
        out.append(("same_colour_edge", {**valid, str(b): valid[str(a)]}))
    out.append(("list_of_colours", [valid[k] for k in vertices]))
    out.append(("list_with_vertices", [valid[k] for k in vertices] + [int(k) for k in vertices]))
    out.append(("empty_object", {}))
    out.append(("empty_list", []))
    out.append(("number", 3))
    out.append(("string", "0: 1"))
    out.append(("null", None))
    return out


def _check(dataset: Any, entry: dict[str, Any], text: str, label: str) -> None:
    expected = theirs(dataset, entry, text)
    judged = ours(entry, text)
    assert 0.0 <= judged.score <= 1.0
    if expected is not None:
        assert judged.score == expected, (label, text, judged.details)
        assert judged.success == (expected == 1.0), (label, text)


@pytest.mark.parametrize("vertices", [*PROR_SIZES, 6, 25])
def test_score_equals_reasoning_gym(vertices: int) -> None:
    rng = random.Random(vertices)
    checked = 0
    for seed in range(4):
        colours = (3, 4, 5)[seed % 3]
        dataset = _dataset(vertices, colours, (0.1, 0.2, 0.3)[seed % 3], seed)
        for index in range(0, 60):
            entry = json.loads(json.dumps(dataset[index]))  # as a trainer would send it
            for label, answer in _mutations(entry, rng):
                text = json.dumps(answer, separators=rng.choice([(",", ":"), (", ", ": ")]))
                _check(dataset, entry, text, label)
                for bad_label, bad in malformed_variants(text, rng, 2):
                    _check(dataset, entry, bad, f"{label}/{bad_label}")
                    assert ours(entry, bad).score == 0.0, (label, bad_label, bad)
                checked += 3
    assert checked > 2000


def test_valid_colourings_score_one_and_wrong_ones_point_zero_one() -> None:
    for vertices in PROR_SIZES:
        dataset = _dataset(vertices, 3, 0.2, 7)
        entry = dataset[0]
        valid = json.dumps(entry["metadata"]["possible_answer"])
        judged = ours(entry, valid)
        assert (judged.score, judged.success, judged.parsed) == (1.0, True, True)
        assert judged.details["violations"] == []
        a, b = entry["metadata"]["puzzle"]["edges"][0]
        clash = {**entry["metadata"]["possible_answer"]}
        clash[b] = clash[a]
        judged = ours(entry, json.dumps(clash))
        assert (judged.score, judged.success, judged.parsed) == (0.01, False, True)
        assert {"rule": "same_colour_edge", "edge": [a, b], "colour": clash[a]} in judged.details[
            "violations"
        ]


_PUZZLE = {
    "vertices": [0, 1, 2, 3],
    "edges": [[0, 1], [1, 2], [2, 3]],
    "num_colors": 3,
    "color_options": [1, 2, 3],
}
_ENTRY = {"question": "(abridged)", "answer": None, "metadata": {"puzzle": _PUZZLE}}


@pytest.mark.parametrize(
    "response,score,success,strict_success,rule",
    [
        # a valid map, keys as JSON strings
        ('<answer>{"0": 1, "1": 2, "2": 1, "3": 2}</answer>', 1.0, True, True, None),
        # fenced JSON with prose after it: found, and valid
        (
            '<answer>```json\n{"0": 1, "1": 2, "2": 1, "3": 2}\n```\nDone.</answer>',
            1.0,
            True,
            True,
            None,
        ),
        # prose before and after a bare object
        (
            '<answer>Colouring: {"0": 1, "1": 2, "2": 1, "3": 2} as required</answer>',
            1.0,
            True,
            True,
            None,
        ),
        # vertex 3 has no colour: parseable but wrong
        ('<answer>{"0": 1, "1": 2, "2": 1}</answer>', 0.01, False, False, "missing_colour"),
        # colour 4 is outside the palette
        ('<answer>{"0": 1, "1": 2, "2": 1, "3": 4}</answer>', 0.01, False, False, "invalid_colour"),
        # the edge (1, 2) joins two vertices of colour 2
        (
            '<answer>{"0": 1, "1": 2, "2": 2, "3": 1}</answer>',
            0.01,
            False,
            False,
            "same_colour_edge",
        ),
        # RG's equality reads 1.0 as 1: valid for the score, not for `strict`
        (
            '<answer>{"0": 1.0, "1": 2, "2": 1, "3": 2}</answer>',
            1.0,
            True,
            False,
            "colour_not_integer",
        ),
        # an extra key does not bother RG; `strict` refuses it
        (
            '<answer>{"0": 1, "1": 2, "2": 1, "3": 2, "4": 3}</answer>',
            1.0,
            True,
            False,
            "unknown_vertex",
        ),
        # a list colour makes RG's scorer raise: 0 there, and 0 here
        (
            '<answer>{"0": [1], "1": 2, "2": 1, "3": 2}</answer>',
            0.0,
            False,
            False,
            "invalid_colour",
        ),
        # Python's dict syntax is not JSON
        ("<answer>{0: 1, 1: 2, 2: 1, 3: 2}</answer>", 0.0, False, False, None),
        # no answer tag at all
        ('{"0": 1, "1": 2, "2": 1, "3": 2}', 0.0, False, False, None),
    ],
)
def test_diagnostics(
    response: str, score: float, success: bool, strict_success: bool, rule: str | None
) -> None:
    reference = PuzzleReference.model_validate({"task": "graph_color", "entry": _ENTRY})
    judged = score_puzzle(response, reference, LENIENT, CTX)
    assert (judged.score, judged.success) == (score, success), judged.details
    assert score_puzzle(response, reference, STRICT, CTX).success == strict_success
    if rule is not None:
        assert rule in {v["rule"] for v in judged.details["violations"]}, judged.details


def test_json_fallback_without_tags() -> None:
    reference = PuzzleReference.model_validate({"task": "graph_color", "entry": _ENTRY})
    config = PuzzleConfig(fallbacks=("json",))
    judged = score_puzzle('My colouring: {"0": 1, "1": 2, "2": 1, "3": 2}.', reference, config, CTX)
    assert (judged.score, judged.details["source"]) == (1.0, "json")


# Arbitrary JSON, biased towards maps of small integers: equality wherever RG does not raise.
_keys = st.one_of(st.sampled_from(["0", "1", "2", "3", " 1", "01", "x"]), st.text(max_size=3))
_leaf = st.one_of(
    st.integers(-1, 4), st.floats(allow_nan=False), st.booleans(), st.none(), st.text(max_size=3)
)
_json = st.recursive(
    _leaf,
    lambda inner: st.one_of(st.lists(inner, max_size=6), st.dictionaries(_keys, inner, max_size=6)),
    max_leaves=12,
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(answer=_json)
def test_arbitrary_json_matches_reasoning_gym(answer: Any) -> None:
    dataset = _hypothesis_dataset()
    text = json.dumps(answer)
    _check(dataset, _ENTRY, text, "hypothesis")


_CACHE: dict[str, Any] = {}


def _hypothesis_dataset() -> Any:
    if "ds" not in _CACHE:
        _CACHE["ds"] = reasoning_gym.create_dataset("graph_color", seed=0, size=10)
    return _CACHE["ds"]
