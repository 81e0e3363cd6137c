"""Boxnet: our validator for Reasoning Gym's `boxnet` answers (a JSON list of action plans).

A plan is a JSON object mapping an agent, `"Agent[x, y]"`, to one action, `"move(box_c, dest)"`,
where `dest` is `target_c` (the box's own target, in the agent's square) or `square[x', y']` (a
square adjacent to the agent's). Plans run in order; within a plan, actions run one after another
on the current state, as in Reasoning Gym.

The score is Reasoning Gym's partial credit, for every answer its scorer handles: the fraction of
boxes matched to their targets, at least 0.05 once the answer is JSON, 0 when it is not. To get
exactly its numbers we read the answer with its grammar: an agent is the first two numbers in its
key (so keys with or without spaces are equal), an action must match `move\\((.*?),\\s(.*?)\\)`,
a destination containing "square" is the numbers in it, an agent listed twice in one plan keeps
its last action, an action that does not apply changes nothing, and a target may be moved like a
box. Every such liberty is reported as a violation in the diagnostics.

Where Reasoning Gym's scorer raises, we define the outcome: a single plan (an object) is a list of
one plan; a plan that is not an object, an action that is not a string, an agent key without
coordinates, a destination without two coordinates or off the grid: that action (or plan) is
skipped and reported; a puzzle with no boxes is solved by any plan; a JSON value that is none of
these (a number, a non-empty string, null) is not a plan.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict

__all__ = ["BoxnetState", "Verdict", "accepts", "validate_plan"]

MAX_VIOLATIONS = 25
FLOOR = 0.05
"""Reasoning Gym's credit for any JSON plan that matches no box."""

_NUMBER = re.compile(r"\d+\.?\d*")
_ACTION = re.compile(r"move\((.*?),\s(.*?)\)")


class BoxnetState(BaseModel):
    """`entry["metadata"]` of a boxnet entry: the squares ("x_y") and what each holds."""

    model_config = ConfigDict(extra="allow", frozen=True)

    initial_state: dict[str, list[str]]


@dataclass(frozen=True, slots=True)
class Verdict:
    score: float
    solved: bool
    """Every box is on its target (score 1)."""
    is_plan: bool
    """The JSON is a plan or a list of plans (False: a number, a string, null)."""
    boxes: int
    remaining: int
    steps: int
    violations: list[dict[str, Any]] = field(default_factory=list)
    violation_count: int = 0


def _coordinates(text: str) -> tuple[float, ...]:
    return tuple(float(n) for n in _NUMBER.findall(text))


def _square(x: float, y: float) -> str:
    return f"{x}_{y}"


def _count_boxes(state: dict[str, list[str]]) -> int:
    return sum(1 for items in state.values() for item in items if item.startswith("box_"))


def _adjacent(agent: tuple[float, ...], dest: tuple[float, ...]) -> bool:
    dx, dy = abs(agent[0] - dest[0]), abs(agent[1] - dest[1])
    return (dx == 0 and dy == 1) or (dx == 1 and dy == 0)


class _Run:
    """One simulation: the state, and every rule an action broke."""

    def __init__(self, initial: dict[str, list[str]]) -> None:
        self.state = copy.deepcopy(initial)
        self.violations: list[dict[str, Any]] = []

    def flag(self, step: int, rule: str, message: str, **where: Any) -> None:
        self.violations.append({"step": step, "rule": rule, **where, "message": message})

    def run_plan(self, step: int, plan: Any) -> None:
        if not isinstance(plan, dict):
            self.flag(step, "plan_not_object", f"a JSON {type(plan).__name__}, skipped")
            return
        actions: dict[tuple[float, ...], tuple[str, str, str, str]] = {}
        for key, value in plan.items():
            if not isinstance(value, str):
                self.flag(step, "action_not_string", "skipped", agent=key, action=value)
                continue
            match = _ACTION.match(value)
            if match is None:
                self.flag(
                    step,
                    "action_format",
                    "not of the form move(box_colour, destination) with ', ' after the box",
                    agent=key,
                    action=value,
                )
                continue
            coords = _coordinates(key)
            if coords in actions:
                self.flag(
                    step,
                    "two_actions_for_agent",
                    "one action per agent per step: the last one counts",
                    agent=key,
                    action=value,
                )
            actions[coords] = (key, value, match.group(1), match.group(2))
        for coords, (key, value, item, destination) in actions.items():
            self.apply(step, coords, key, value, item, destination)

    def apply(
        self, step: int, coords: tuple[float, ...], key: str, value: str, item: str, dest: str
    ) -> None:
        where = {"agent": key, "action": value, "box": item}
        if len(coords) < 2:
            self.flag(step, "agent_key", "the agent key has no coordinates", **where)
            return
        position = _square(coords[0], coords[1])
        square = self.state.get(position)
        if square is None:
            self.flag(step, "agent_not_on_grid", f"no square {position}", **where)
            return
        if item not in square:
            elsewhere = [p for p, items in self.state.items() if item in items]
            if elsewhere:
                message = f"{item} is not in this agent's square (it is in {elsewhere[0]})"
                self.flag(step, "box_not_in_square", message, **where)
            else:
                self.flag(step, "box_gone", f"no {item} is left on the grid", **where)
            return
        if "square" not in dest:
            self._match(step, square, item, dest, where)
            return
        target = _coordinates(dest)
        if len(target) < 2:
            self.flag(step, "destination", f"{dest!r} has no coordinates", **where)
            return
        if not _adjacent(coords, target):
            self.flag(step, "not_adjacent", f"{dest} is not next to the agent", **where)
            return
        destination = _square(target[0], target[1])
        if destination not in self.state:
            self.flag(step, "off_grid", f"{dest} is off the grid, skipped", **where)
            return
        if not item.startswith("box_"):
            self.flag(step, "not_a_box", f"{item} is not a box (moved anyway, as RG does)", **where)
        square.remove(item)
        self.state[destination].append(item)

    def _match(
        self, step: int, square: list[str], item: str, dest: str, where: dict[str, Any]
    ) -> None:
        if not item.startswith("box_"):
            self.flag(step, "not_a_box", f"{item} is not a box", **where)
        elif not dest.startswith("target_"):
            self.flag(step, "destination", f"{dest!r} is neither a target nor a square", **where)
        elif item[4:] != dest[7:]:
            self.flag(step, "wrong_target", f"{item} cannot go to {dest}", **where)
        elif dest not in square:
            self.flag(step, "target_not_in_square", f"{dest} is not in this square", **where)
        else:
            square.remove(item)
            square.remove(dest)


def _plans(answer: Any) -> list[Any] | None:
    if isinstance(answer, list):
        return answer
    if isinstance(answer, dict):
        return [answer] if answer else []
    if answer == "":
        return []  # Reasoning Gym iterates the empty string: no plans
    return None


def validate_plan(initial_state: dict[str, list[str]], answer: Any) -> Verdict:
    """Run a parsed JSON answer on the puzzle; see the module docstring for the rules."""
    boxes = _count_boxes(initial_state)
    plans = _plans(answer)
    if plans is None:
        message = f"a JSON {type(answer).__name__}, not a list of plans"
        return Verdict(
            score=0.0,
            solved=False,
            is_plan=False,
            boxes=boxes,
            remaining=boxes,
            steps=0,
            violations=[{"rule": "not_a_plan", "message": message}],
            violation_count=1,
        )
    run = _Run(initial_state)
    if isinstance(answer, dict) and answer:
        run.flag(1, "single_plan", "a single plan, not a list of plans: read as a list of one")
    for step, plan in enumerate(plans, start=1):
        run.run_plan(step, plan)
    remaining = _count_boxes(run.state)
    # Reasoning Gym divides by the number of boxes; with none, any plan has nothing left to do.
    lifted = (boxes - remaining) / boxes if boxes else 1.0
    return Verdict(
        score=max(FLOOR, lifted),
        solved=remaining == 0,
        is_plan=True,
        boxes=boxes,
        remaining=remaining,
        steps=len(plans),
        violations=run.violations[:MAX_VIOLATIONS],
        violation_count=len(run.violations),
    )


def accepts(value: Any) -> bool:
    """What `locate_json` may take for an answer embedded in prose: a list or an object."""
    return isinstance(value, list | dict)
