"""What /metrics counts from results: statuses by domain (closed label set) and answers judged 0
because a task's own scorer raised on them, which only the results carry back from the workers."""

from __future__ import annotations

from prometheus_client import generate_latest

from service.dispatch import DispatchStats
from service.http.metrics import Metrics
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


def test_judged_zeros_are_counted_by_their_reason() -> None:
    metrics = Metrics(lambda: DispatchStats(backend="test"), domains=["math", "code"])
    zero = {"status": "ok", "score": 0.0, "reward": 0.0}
    results = [
        ScoreResult(**zero, details={"reason": "parse_error", "error": "ValueError"}),
        ScoreResult(**zero, details={"reason": "parse_error"}),
        ScoreResult(**zero, details={"reason": "timeout", "limit_s": 30}),
        ScoreResult(**zero, details={"reason": "Free text from a response!"}),
        ScoreResult(status="ok", score=1.0, reward=1.0, details={"reason": "ignored"}),
    ]
    metrics.observe(["math", "math", "code", "math", "math"], results)
    text = generate_latest(metrics.registry).decode()
    assert 'proctor_judged_zero_total{domain="math",reason="parse_error"} 2.0' in text
    assert 'proctor_judged_zero_total{domain="code",reason="timeout"} 1.0' in text
    assert 'proctor_judged_zero_total{domain="math",reason="other"} 1.0' in text
    assert "ignored" not in text and "Free text" not in text


def test_judged_items_scoring_times_are_a_histogram_per_domain() -> None:
    metrics = Metrics(lambda: DispatchStats(backend="test"), domains=["math", "code"])
    ms = [0.5, 3.0, 3.0, 40.0, 90_000.0]
    results = [ScoreResult(status="ok", score=1.0, elapsed_ms=t) for t in ms]
    metrics.observe(["math"] * 4 + ["code"], results)
    metrics.observe(["math", "code"], [ScoreResult(status="invalid", elapsed_ms=1.0)] * 2)
    text = generate_latest(metrics.registry).decode()
    math = 'proctor_item_seconds_bucket{domain="math",le="%s"} %s'
    assert math % ("0.001", "1.0") in text  # 0.5 ms
    assert math % ("0.005", "3.0") in text  # and the two 3 ms
    assert math % ("0.05", "4.0") in text and math % ("+Inf", "4.0") in text
    assert 'proctor_item_seconds_count{domain="math"} 4.0' in text  # `invalid` is not timed
    assert 'proctor_item_seconds_bucket{domain="code",le="30.0"} 0.0' in text  # 90 s: +Inf only
    assert 'proctor_item_seconds_bucket{domain="code",le="+Inf"} 1.0' in text
    assert 'proctor_item_seconds_sum{domain="code"} 90.0' in text
