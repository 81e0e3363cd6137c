"""Graph colouring: our validator for Reasoning Gym's `graph_color` answers (a JSON vertex->colour
map).

The score is Reasoning Gym's, for every answer its scorer handles: 1 for a valid colouring, 0.01
for JSON that is not one, 0 when the answer is not JSON at all (or when its scorer would raise on
it, e.g. a colour that is a list). Reasoning Gym stops at the first problem it meets (a vertex
without a colour, then a colour outside the palette, then an edge whose ends share a colour, in
that order); we reproduce that order for the score and report every problem in the diagnostics.

A vertex's colour is looked up as Reasoning Gym does: the key as is, else its string form (JSON
keys are strings), else its integer form. Colours compare by Python equality, so `1.0` and `true`
count as colour 1 there; the `strict` verdict does not accept them (nor unknown keys, nor a JSON
value other than an object).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["GraphPuzzle", "Verdict", "accepts", "validate_colouring"]

SCORE_VALID = 1.0
SCORE_WRONG = 0.01
SCORE_UNUSABLE = 0.0
MAX_VIOLATIONS = 25


class GraphPuzzle(BaseModel):
    """`entry["metadata"]["puzzle"]` of a graph_color entry."""

    model_config = ConfigDict(extra="allow", frozen=True)

    vertices: list[int | str]
    edges: list[tuple[int | str, int | str]]
    color_options: list[int] = Field(..., min_length=1)

    @model_validator(mode="after")
    def _edges_join_vertices(self) -> GraphPuzzle:
        known = set(self.vertices)
        for u, v in self.edges:
            if u not in known or v not in known:
                raise ValueError(f"edge ({u}, {v}) joins a vertex that is not in `vertices`")
        return self


@dataclass(frozen=True, slots=True)
class Verdict:
    score: float
    valid: bool
    """The colouring is valid for Reasoning Gym (score 1)."""
    strict_valid: bool
    """Valid, and written exactly as asked: a JSON object keyed by every vertex, integer colours."""
    violations: list[dict[str, Any]] = field(default_factory=list)
    violation_count: int = 0


class _Crash(Exception):
    """Reasoning Gym's scorer would raise here (and so score 0)."""


_MISSING = object()


def _colour_of(colouring: Any, vertex: int | str) -> Any:
    """Reasoning Gym's lookup, on any JSON value; `_MISSING` if absent, `_Crash` where it raises."""
    try:
        if vertex in colouring:
            return colouring[vertex]
        if isinstance(vertex, int) and str(vertex) in colouring:
            return colouring[str(vertex)]
        if isinstance(vertex, str):
            try:
                as_int = int(vertex)
            except ValueError:
                return _MISSING
            if as_int in colouring:
                return colouring[as_int]
    except (TypeError, IndexError, KeyError) as exc:
        raise _Crash(f"{type(exc).__name__}: {exc}") from None
    return _MISSING


def _hashable(value: Any) -> bool:
    return isinstance(value, Hashable)


def validate_colouring(puzzle: GraphPuzzle, answer: Any) -> Verdict:
    """Judge a parsed JSON answer against the puzzle; see the module docstring for the rules."""
    violations: list[dict[str, Any]] = []
    allowed = set(puzzle.color_options)
    palette = sorted(allowed)

    colours: dict[int | str, Any] = {}
    score: float | None = None
    crash: str | None = None
    for vertex in puzzle.vertices:
        try:
            colour = _colour_of(answer, vertex)
        except _Crash as exc:
            crash = str(exc)
            break
        if colour is _MISSING:
            violations.append({"rule": "missing_colour", "vertex": vertex})
            if score is None:
                score = SCORE_WRONG
        else:
            colours[vertex] = colour
    if crash is not None:
        # Reasoning Gym's scorer raises while looking colours up: it scores 0, unless it already
        # stopped at an earlier vertex without a colour.
        if score is None:
            score = SCORE_UNUSABLE
        shape = type(answer).__name__
        violations.append({"rule": "not_a_colouring", "message": f"a JSON {shape}: {crash}"})

    for vertex, colour in colours.items():
        if _hashable(colour) and colour in allowed:
            continue
        violations.append(
            {"rule": "invalid_colour", "vertex": vertex, "colour": colour, "allowed": palette}
        )
        if score is None:
            # The first colour outside the palette decides, in vertex order; Reasoning Gym's
            # `colour in allowed` raises on an unhashable colour (a list, an object): 0 then.
            score = SCORE_WRONG if _hashable(colour) else SCORE_UNUSABLE

    conflicts = 0
    for u, v in puzzle.edges:
        if u in colours and v in colours and colours[u] == colours[v]:
            conflicts += 1
            violations.append({"rule": "same_colour_edge", "edge": [u, v], "colour": colours[u]})
    if score is None:
        score = SCORE_WRONG if conflicts else SCORE_VALID

    strict_problems = _strict_problems(puzzle, answer, colours)
    violations.extend(strict_problems)
    return Verdict(
        score=score,
        valid=score == SCORE_VALID,
        strict_valid=score == SCORE_VALID and not strict_problems,
        violations=violations[:MAX_VIOLATIONS],
        violation_count=len(violations),
    )


def _strict_problems(
    puzzle: GraphPuzzle, answer: Any, colours: dict[int | str, Any]
) -> list[dict[str, Any]]:
    if not isinstance(answer, dict):
        return [{"rule": "not_an_object", "message": f"a JSON {type(answer).__name__}"}]
    problems: list[dict[str, Any]] = []
    keys = {str(v) for v in puzzle.vertices}
    for key in answer:
        if key not in keys:
            problems.append({"rule": "unknown_vertex", "key": key})
    palette = set(puzzle.color_options)
    for vertex, colour in colours.items():
        not_int = isinstance(colour, bool) or not isinstance(colour, int)
        if not_int and _hashable(colour) and colour in palette:
            problems.append({"rule": "colour_not_integer", "vertex": vertex, "colour": colour})
    return problems


def accepts(value: Any) -> bool:
    """What `locate_json` may take for an answer embedded in prose: a JSON object."""
    return isinstance(value, dict)
