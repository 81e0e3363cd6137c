"""What /metrics counts from results: statuses by domain (closed label set) and answers judged 0
because a task's own scorer raised on them, which only the results carry back from the workers."""

from __future__ import annotations

from prometheus_client import generate_latest

from service.dispatch import DispatchStats
from service.metrics import Metrics
from service.schemas import ScoreResult


def test_scorer_exceptions_and_statuses_are_counted_from_results() -> None:
    metrics = Metrics(lambda: DispatchStats(backend="test"), domains=["puzzle", "math"])
    results = [
        ScoreResult(status="ok", score=0.0, details={"scorer_exception": "RuntimeError: bug"}),
        ScoreResult(status="ok", score=1.0),
        ScoreResult(status="invalid"),
        ScoreResult(status="ok", score=0.0, details={"scorer_exception": "KeyError: 'x'"}),
    ]
    metrics.observe(["puzzle", "puzzle", "made-up", "made-up"], results)
    text = generate_latest(metrics.registry).decode()
    assert 'proctor_scorer_exceptions_total{domain="puzzle"} 1.0' in text
    assert 'proctor_scorer_exceptions_total{domain="unknown"} 1.0' in text
    assert 'proctor_items_total{domain="puzzle",status="ok"} 2.0' in text
    assert 'proctor_items_total{domain="unknown",status="invalid"} 1.0' in text
    assert "made-up" not in text
