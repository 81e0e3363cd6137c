"""The in-process scorer when a worker dies: its items in flight are scored again one at a time,
an item that kills a worker twice is judged 0 as a poison item (the service's verdict), and no
other row is lost. The misbehaving scorers are tests/pool_scorers.py's, through the registry
seam."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from proctor_client.evaluation.rows import Generation
from proctor_client.local import LocalScorer, outcome_result
from reward_specs import Outcome
from tests.eval_synthetic import math_row

REGISTRY = "tests.pool_scorers:registry"


def _rows(extra: list[dict[str, Any]]) -> list[Generation]:
    rows = [math_row(f"m-{i}", s, "default", "correct") for i in range(40) for s in range(4)]
    rows[100:100] = extra  # in the middle of a chunk, with chunks before and after it
    return [Generation.model_validate(r) for r in rows]


def test_a_poison_row_is_judged_zero_and_no_other_row_is_lost() -> None:
    crash = {"prompt_id": "c", "sample": 0, "domain": "crash", "reference": {}, "response": "x"}
    rows = _rows([crash])
    scorer = LocalScorer(workers=2, registry=REGISTRY)
    try:
        results = scorer.score(rows, lambda _: None)
        again = scorer.score(rows[:3], lambda _: None)  # the pool was replaced and still works
    finally:
        scorer.close()
    expected = outcome_result(
        Outcome.judged_zero("poison", message="scoring this item killed a worker twice")
    )
    assert {k: v for k, v in results[100].items() if k != "elapsed_ms"} == {
        k: v for k, v in expected.items() if k != "elapsed_ms"
    }
    others = results[:100] + results[101:]
    assert all(r["status"] == "ok" and r["success"] for r in others)
    assert all(r["status"] == "ok" and r["success"] for r in again)


def test_a_row_in_flight_when_a_worker_died_is_scored_again(tmp_path: Path) -> None:
    marker = tmp_path / "crashed"
    once = {
        "prompt_id": "o",
        "sample": 0,
        "domain": "crash_once",
        "reference": {"marker": str(marker)},
        "response": "ok",
    }
    rows = _rows([once])
    scorer = LocalScorer(workers=2, registry=REGISTRY)
    try:
        results = scorer.score(rows, lambda _: None)
    finally:
        scorer.close()
    assert marker.exists()  # it did kill a worker
    assert results[100]["status"] == "ok" and results[100]["score"] == 1.0
    assert all(r["status"] == "ok" and r["success"] for r in results)
