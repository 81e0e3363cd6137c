"""Cost-aware scheduling: the pool starts the costliest items first, learned from outcomes.

Ordering never changes a verdict; it only decides which worker scores what, and when.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from reward_specs import Outcome, default_registry
from reward_specs.puzzles import puzzle_workload
from service.dispatch.costs import CostModel
from service.dispatch.ledger import plan_chunks
from tests.helpers import Server, score

REGISTRY = "tests.pool_scorers:registry"


def _flatten(chunks: list[list[int]]) -> list[int]:
    return [p for chunk in chunks for p in chunk]


def test_without_costs_chunks_keep_request_order() -> None:
    assert plan_chunks(10, 4, 2) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert plan_chunks(0, 4, 2) == []


@pytest.mark.parametrize("seed", range(20))
def test_with_costs_every_position_is_planned_once_costliest_first(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.randint(1, 500)
    costs = [rng.choice([0.01, 0.02, 0.5, 30.0]) * rng.random() for _ in range(n)]
    size = rng.randint(1, 64)
    chunks = plan_chunks(n, size, rng.randint(1, 8), costs)
    order = _flatten(chunks)
    assert sorted(order) == list(range(n))
    assert all(1 <= len(c) <= size for c in chunks)
    assert [costs[p] for p in order] == sorted(costs, reverse=True)


def test_a_costly_item_travels_alone_and_cheap_ones_fill_chunks() -> None:
    costs = [0.01] * 100
    costs[97] = 40.0  # the one slow item, last in the request
    chunks = plan_chunks(100, 64, 2, costs)
    assert chunks[0] == [97]
    assert len(chunks[1]) == 64  # cheap items still travel 64 at a time


def test_equal_costs_keep_request_order() -> None:
    assert _flatten(plan_chunks(50, 8, 2, [1.0] * 50)) == list(range(50))


def _outcome(ms: float, status: str = "ok") -> Outcome:
    if status == "ok":
        return Outcome(status="ok", reward=1.0, score=1.0, success=True, parsed=True, elapsed_ms=ms)
    return Outcome.failure("infra_error", "deadline_exceeded", "late", ms)


def test_the_cost_model_learns_per_label_and_ignores_our_failures() -> None:
    model = CostModel(default_registry(), weight=0.5)
    slow, fast = ("puzzle", "intermediate_integration"), ("puzzle", "leg_counting")
    assert model.estimates([slow, fast]) == [1.0, 1.0]  # nothing known yet
    model.observe([slow, slow, fast], [_outcome(30.0), _outcome(10.0), _outcome(0.1)])
    assert model.estimates([slow, fast]) == [20.0, 0.1]
    model.observe([slow], [_outcome(40.0)])
    assert model.estimates([slow]) == [30.0]  # a moving average, not the last figure
    model.observe([fast], [_outcome(500.0, "infra_error")])
    assert model.estimates([fast]) == [0.1]
    assert model.estimates([("puzzle", "never_seen")]) == [30.0]  # as costly as the worst known


def test_one_item_paying_a_one_off_cost_does_not_make_its_label_look_slow() -> None:
    model = CostModel(default_registry())
    label = ("puzzle", "codeio")  # its first item in a worker loads the task's data
    model.observe([label] * 3, [_outcome(300.0), _outcome(0.2), _outcome(0.3)])
    assert model.estimates([label]) == [0.3]


def test_the_cost_model_keeps_a_bounded_table() -> None:
    model = CostModel(default_registry(), max_labels=3)
    labels = [("puzzle", f"task{i}") for i in range(10)]
    model.observe(labels, [_outcome(float(i)) for i in range(10)])
    assert model.estimates([labels[9]]) == [9.0]
    assert model.estimates([labels[0]]) == [9.0]  # forgotten: unseen again


def test_puzzle_items_are_labelled_by_task_whatever_the_reference_holds() -> None:
    assert puzzle_workload({"task": "boxnet", "entry": {}}) == "boxnet"
    assert puzzle_workload({"task": 3}) is None
    assert puzzle_workload({}) is None


def _ordered_items(kinds: list[str], seconds: dict[str, float], tag: str) -> list[dict[str, Any]]:
    return [
        {
            "id": f"{tag}{i}",
            "domain": "ordered",
            "response": "ok",
            "reference": {"kind": kind, "seconds": seconds[kind], "n": f"{tag}{i}"},
        }
        for i, kind in enumerate(kinds)
    ]


def test_the_service_schedules_items_it_has_learned_are_slow_first(
    make_server: Callable[..., Server],
) -> None:
    server = make_server(registry=REGISTRY, workers=1)
    seconds = {"slow": 0.05, "fast": 0.0}
    with httpx.Client(base_url=server.url, timeout=120) as client:
        # First batch: nothing is known, so request order.
        first = score(client, _ordered_items(["fast"] * 6 + ["slow"] * 2, seconds, "a"))
        calls = [r["details"]["call"] for r in first]
        assert calls == sorted(calls)
        # Now the slow kind is known: it goes first though it comes last in the request.
        second = score(client, _ordered_items(["fast"] * 6 + ["slow"] * 2, seconds, "b"))
    assert all(r["status"] == "ok" and r["score"] == 1.0 for r in first + second)
    slow_calls = [r["details"]["call"] for r in second[6:]]
    fast_calls = [r["details"]["call"] for r in second[:6]]
    assert max(slow_calls) < min(fast_calls)
