"""Boxnet: our plan validator against Reasoning Gym's `score_answer`.

The property: on generated puzzles across the grid sizes the curriculum spans (1-9 rows and
columns) and plans that are valid, broken one rule at a time, or malformed JSON, our score equals
the library's wherever the library does not raise; where it raises, ours is defined. Every answer
goes through the whole scorer (`<answer>` extraction, JSON location, simulation).
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

Square = tuple[float, float]


def ours(entry: dict[str, Any], text: str, config: PuzzleConfig = LENIENT) -> Judgement:
    reference = PuzzleReference.model_validate({"task": "boxnet", "entry": entry})
    return score_puzzle(f"<answer>{text}</answer>", reference, config, CTX)


def theirs(dataset: Any, entry: dict[str, Any], text: str) -> float | None:
    try:
        return float(dataset.score_answer(text, entry))
    except Exception:
        return None


def _agent(square: Square, rng: random.Random) -> str:
    x, y = square
    return rng.choice([f"Agent[{x}, {y}]", f"Agent[{x},{y}]", f"agent [{x}, {y}]"])


def solve(state: dict[str, list[str]], rng: random.Random) -> list[list[tuple[Square, str]]]:
    """A valid plan: each box walked to a target of its colour, one square at a time, then matched.

    Returns steps of (agent square, action); actions of different agents are sometimes packed
    into one step (they run in order, as in Reasoning Gym).
    """
    squares = {tuple(map(float, k.split("_"))): list(v) for k, v in state.items()}
    targets = {s: [i for i in items if i.startswith("target_")] for s, items in squares.items()}
    actions: list[tuple[Square, str]] = []
    for square, items in squares.items():
        for box in [i for i in items if i.startswith("box_")]:
            goal = next(t for t, ts in targets.items() if "target_" + box[4:] in ts)
            targets[goal].remove("target_" + box[4:])
            x, y = square
            while (x, y) != goal:
                nx = x + (1 if goal[0] > x else -1) if x != goal[0] else x
                ny = y if nx != x else y + (1 if goal[1] > y else -1)
                actions.append(((x, y), f"move({box}, square[{nx}, {ny}])"))
                x, y = nx, ny
            actions.append(((x, y), f"move({box}, target_{box[4:]})"))
    steps: list[list[tuple[Square, str]]] = []
    for agent, action in actions:
        if steps and rng.random() < 0.5 and agent not in {a for a, _ in steps[-1]}:
            steps[-1].append((agent, action))
        else:
            steps.append([(agent, action)])
    return steps


def render(steps: list[list[tuple[str, Any]]]) -> str:
    """JSON text of a list of plans; duplicate keys in one plan are kept (json.dumps would not)."""
    return (
        "["
        + ", ".join(
            "{" + ", ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in step) + "}"
            for step in steps
        )
        + "]"
    )


def _mutations(
    state: dict[str, list[str]], rows: int, cols: int, rng: random.Random
) -> list[tuple[str, str]]:
    plan = solve(state, rng)
    keyed = [[(_agent(a, rng), act) for a, act in step] for step in plan]
    out = [("valid", render(keyed))]
    if not plan:
        return out
    flat = [(i, j) for i, step in enumerate(plan) for j in range(len(step))]

    def edit(fn: Any) -> list[list[tuple[str, Any]]]:
        i, j = rng.choice(flat)
        steps = [list(s) for s in keyed]
        agent, action = plan[i][j]
        steps[i][j] = fn(agent, action)
        return steps

    def other_square(agent: Square) -> Square:
        choices = [(r + 0.5, c + 0.5) for r in range(rows) for c in range(cols)]
        choices = [s for s in choices if s != agent] or [agent]
        return rng.choice(choices)

    out.append(("wrong_agent", render(edit(lambda a, act: (_agent(other_square(a), rng), act)))))
    out.append(
        (
            "not_adjacent",
            render(
                edit(
                    lambda a, act: (
                        _agent(a, rng),
                        act.split(",")[0] + f", square[{a[0] + 1}, {a[1] + 1}])",
                    )
                )
            ),
        )
    )
    out.append(
        (
            "off_grid",
            render(
                edit(
                    lambda a, act: (
                        _agent(a, rng),
                        act.split(",")[0] + f", square[{rows + 0.5}, {a[1]}])",
                    )
                )
            ),
        )
    )
    out.append(
        (
            "wrong_target",
            render(edit(lambda a, act: (_agent(a, rng), act.split(",")[0] + ", target_purple)"))),
        )
    )
    out.append(
        ("no_space", render(edit(lambda a, act: (_agent(a, rng), act.replace(", ", ",", 1)))))
    )
    out.append(
        (
            "not_a_string",
            render(edit(lambda a, act: (_agent(a, rng), rng.choice([None, 3, [act]])))),
        )
    )
    out.append(
        (
            "key_without_coordinates",
            render(edit(lambda a, act: (rng.choice(["Agent", "Agent[1]"]), act))),
        )
    )
    out.append(
        (
            "short_destination",
            render(edit(lambda a, act: (_agent(a, rng), act.split(",")[0] + ", square[1.5])"))),
        )
    )
    out.append(
        (
            "move_a_target",
            render(edit(lambda a, act: (_agent(a, rng), act.replace("box_", "target_", 1)))),
        )
    )
    # one action per agent per step: a second action for the same agent, differently spelled
    i, j = rng.choice(flat)
    dup = [list(s) for s in keyed]
    agent, action = plan[i][j]
    dup[i].append((f"Agent[{agent[0]},{agent[1]}]", action))
    dup[i].insert(0, (f"Agent[{agent[0]}, {agent[1]}]", "move(box_red, square[0.5, 0.5])"))
    out.append(("two_actions_for_agent", render(dup)))
    # a box that no longer exists: the last match repeated
    out.append(("box_gone", render([*keyed, [keyed[-1][-1]]])))
    out.append(
        ("step_dropped", render([s for k, s in enumerate(keyed) if k != rng.randrange(len(keyed))]))
    )
    out.append(("step_not_object", render(keyed)[:-1] + ', "noop"]'))
    out.append(("nested_list", "[" + render(keyed) + "]"))
    out.append(("single_plan", json.dumps(dict(keyed[0]))))
    out.append(("empty_list", "[]"))
    out.append(("empty_object", "{}"))
    out.append(("empty_string", '""'))
    out.append(("a_number", "7"))
    return out


GRIDS = [(r, c) for r in range(1, 10) for c in range(1, 10)]


@pytest.mark.parametrize("rows", range(1, 10))
def test_score_equals_reasoning_gym(rows: int) -> None:
    rng = random.Random(rows)
    checked = raised = 0
    for cols in range(1, 10):
        dataset = reasoning_gym.create_dataset(
            "boxnet",
            min_row_num=rows,
            max_row_num=rows,
            min_column_num=cols,
            max_column_num=cols,
            min_box_num=1,
            max_box_num=(cols + rows) // 3 + 1,
            seed=rows * 100 + cols,
            size=100,
        )
        for index in range(6):
            entry = json.loads(json.dumps(dataset[index]))
            state = entry["metadata"]["initial_state"]
            for label, text in _mutations(state, rows, cols, rng):
                variants = [(label, text)] + [
                    (f"{label}/{b}", bad) for b, bad in malformed_variants(text, rng, 1)
                ]
                for name, candidate in variants:
                    expected = theirs(dataset, entry, candidate)
                    judged = ours(entry, candidate)
                    assert 0.0 <= judged.score <= 1.0
                    checked += 1
                    if expected is None:
                        raised += 1
                        continue
                    assert judged.score == expected, (name, candidate, judged.details)
                    assert judged.success == (expected == 1.0), name
                    if name == "valid":
                        assert judged.success and judged.details["violations"] == []
                        assert score_puzzle_strict(entry, candidate).success
    assert checked > 1500 and raised > 0


def score_puzzle_strict(entry: dict[str, Any], text: str) -> Judgement:
    return ours(entry, text, STRICT)


def plan(*steps: dict[str, str]) -> str:
    return json.dumps(list(steps))


_STATE = {
    "0.5_0.5": ["box_red"],
    "0.5_1.5": ["target_red", "box_blue"],
    "1.5_0.5": [],
    "1.5_1.5": ["target_blue"],
}
_ENTRY = {"question": "(abridged)", "answer": None, "metadata": {"initial_state": _STATE}}
_SOLVED = (
    '[{"Agent[0.5, 0.5]": "move(box_red, square[0.5, 1.5])", '
    '"Agent[0.5, 1.5]": "move(box_blue, square[1.5, 1.5])"}, '
    '{"Agent[0.5, 1.5]": "move(box_red, target_red)", '
    '"Agent[1.5, 1.5]": "move(box_blue, target_blue)"}]'
)


@pytest.mark.parametrize(
    "answer,score,solved,strict_ok,rule,where",
    [
        # the reference plan: both boxes matched
        (_SOLVED, 1.0, True, True, None, {}),
        # fenced, with prose after it
        (f"```json\n{_SOLVED}\n```\nThat is all.", 1.0, True, True, None, {}),
        # keys without spaces are the same agents
        (
            _SOLVED.replace(", ", ",")
            .replace("move(box_red,", "move(box_red, ")
            .replace("move(box_blue,", "move(box_blue, "),
            1.0,
            True,
            True,
            None,
            {},
        ),
        # a single plan (an object): RG's scorer raises; we read a list of one plan
        (
            '{"Agent[0.5, 1.5]": "move(box_blue, square[1.5, 1.5])"}',
            0.05,
            False,
            False,
            "single_plan",
            {},
        ),
        # the agent at [0.5, 0.5] has no blue box
        (
            '[{"Agent[0.5, 0.5]": "move(box_blue, square[1.5, 0.5])"}]',
            0.05,
            False,
            False,
            "box_not_in_square",
            {"step": 1, "agent": "Agent[0.5, 0.5]", "box": "box_blue"},
        ),
        # diagonal move
        (
            '[{"Agent[0.5, 0.5]": "move(box_red, square[1.5, 1.5])"}]',
            0.05,
            False,
            False,
            "not_adjacent",
            {"step": 1},
        ),
        # off the grid: RG's scorer raises (KeyError); we skip the move
        (
            plan(
                {"Agent[0.5, 1.5]": "move(box_blue, square[1.5, 1.5])"},
                {"Agent[1.5, 1.5]": "move(box_blue, square[2.5, 1.5])"},
                {"Agent[1.5, 1.5]": "move(box_blue, target_blue)"},
            ),
            0.5,
            False,
            False,
            "off_grid",
            {"step": 2},
        ),
        # a box matched to the wrong colour
        (
            '[{"Agent[0.5, 1.5]": "move(box_blue, target_red)"}]',
            0.05,
            False,
            False,
            "wrong_target",
            {"box": "box_blue"},
        ),
        # two actions for one agent in a step: RG keeps the last
        (
            plan(
                {
                    "Agent[0.5, 1.5]": "move(box_blue, square[1.5, 1.5])",
                    "Agent[0.5,1.5]": "move(box_blue, square[0.5, 0.5])",
                }
            ),
            0.05,
            False,
            False,
            "two_actions_for_agent",
            {"step": 1},
        ),
        # a box that no longer exists
        (
            plan(
                {"Agent[0.5, 1.5]": "move(box_blue, square[1.5, 1.5])"},
                {"Agent[1.5, 1.5]": "move(box_blue, target_blue)"},
                {"Agent[1.5, 1.5]": "move(box_blue, target_blue)"},
            ),
            0.5,
            False,
            False,
            "box_gone",
            {"step": 3},
        ),
        # missing space after the comma: not an action for RG, so not for us
        (
            '[{"Agent[0.5, 1.5]": "move(box_blue,target_blue)"}]',
            0.05,
            False,
            False,
            "action_format",
            {},
        ),
        # JSON but not a plan
        ("42", 0.0, False, False, "not_a_plan", {}),
        # not JSON
        ("move box_red to its target", 0.0, False, False, None, {}),
    ],
)
def test_diagnostics(
    answer: str,
    score: float,
    solved: bool,
    strict_ok: bool,
    rule: str | None,
    where: dict[str, Any],
) -> None:
    judged = ours(_ENTRY, answer)
    assert (judged.score, judged.success) == (score, solved), judged.details
    assert ours(_ENTRY, answer, STRICT).success == strict_ok
    if rule is not None:
        found = [v for v in judged.details["violations"] if v["rule"] == rule]
        assert found, judged.details
        assert any(all(v.get(k) == w for k, w in where.items()) for v in found), found


def test_zero_boxes_is_defined() -> None:
    entry = {
        "question": "",
        "answer": None,
        "metadata": {"initial_state": {"0.5_0.5": ["target_red"]}},
    }
    dataset = reasoning_gym.create_dataset("boxnet", seed=0, size=1)
    assert theirs(dataset, entry, "[]") is None  # ZeroDivisionError in Reasoning Gym
    judged = ours(entry, "[]")
    assert (judged.score, judged.success, judged.parsed) == (1.0, True, True)
    assert ours(entry, "not json").score == 0.0


# Arbitrary plans built from the grammar's pieces: equality wherever RG does not raise.
_coord = st.sampled_from(["0.5", "1.5", "2.5", "1", "-0.5", "0.50", "9.5"])
_key = st.builds(
    lambda x, y, sep: f"Agent[{x}{sep}{y}]", _coord, _coord, st.sampled_from([", ", ","])
)
_item = st.sampled_from(["box_red", "box_blue", "target_red", "target_blue", "box_green"])
_dest = st.one_of(
    st.sampled_from(["target_red", "target_blue", "target_green", "square", "square[1.5]"]),
    st.builds(lambda x, y: f"square[{x}, {y}]", _coord, _coord),
)
_action = st.one_of(
    st.builds(lambda i, d, sep: f"move({i}{sep}{d})", _item, _dest, st.sampled_from([", ", ","])),
    st.sampled_from(["", "wait", "move()"]),
)
_plan = st.dictionaries(_key, _action, max_size=4)
_answer = st.one_of(st.lists(_plan, max_size=5), _plan)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(answer=_answer)
def test_arbitrary_plans_match_reasoning_gym(answer: Any) -> None:
    dataset = reasoning_gym.create_dataset("boxnet", seed=0, size=1)
    entry = {
        "question": "",
        "answer": None,
        "metadata": {
            "initial_state": {
                "0.5_0.5": ["box_red"],
                "0.5_1.5": ["target_red", "box_blue"],
                "1.5_0.5": ["box_green"],
                "1.5_1.5": ["target_blue", "target_green"],
            }
        },
    }
    text = json.dumps(answer)
    expected = theirs(dataset, entry, text)
    judged = ours(entry, text)
    assert 0.0 <= judged.score <= 1.0
    if expected is not None:
        assert judged.score == expected, (text, judged.details)
