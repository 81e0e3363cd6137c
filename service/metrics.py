"""Prometheus metrics, one registry per app (no import-time global state)."""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Callable, Iterable, Sequence

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from service.dispatch.pool import PoolStats
from service.schemas import ScoreResult

__all__ = ["Metrics"]


class _PoolCollector(Collector):
    def __init__(self, stats: Callable[[], PoolStats | None]) -> None:
        self._stats = stats

    def collect(self) -> Iterable[Metric]:
        stats = self._stats()
        if stats is None:
            return
        for name, value, doc in (
            ("proctor_pool_workers", stats.workers, "Worker processes alive."),
            ("proctor_pool_ready_workers", stats.ready_workers, "Worker processes ready."),
            ("proctor_pool_pending_chunks", stats.pending_chunks, "Chunks waiting for a worker."),
            ("proctor_pool_broken", int(stats.broken is not None), "1 if workers cannot start."),
        ):
            yield GaugeMetricFamily(name, doc, value=value)
        for name, value, doc in (
            ("proctor_pool_restarts", stats.restarts, "Workers replaced since start."),
            ("proctor_pool_item_timeouts", stats.timeouts, "Items killed by the hard timeout."),
            ("proctor_pool_poison_items", stats.poison_items, "Items that killed two workers."),
        ):
            yield CounterMetricFamily(name, doc, value=value)


class Metrics:
    def __init__(self, pool_stats: Callable[[], PoolStats | None]) -> None:
        self.registry = CollectorRegistry()
        self.items = Counter(
            "proctor_items",
            "Items answered, by domain and status.",
            ["domain", "status"],
            registry=self.registry,
        )
        self.requests = Histogram(
            "proctor_score_request_seconds",
            "Time to answer a scoring request.",
            ["endpoint"],
            buckets=(0.01, 0.05, 0.1, 0.5, 1, 2, 5, 10, 30, 60, 300),
            registry=self.registry,
        )
        self.registry.register(_PoolCollector(pool_stats))

    def observe(self, domains: Sequence[str], results: Sequence[ScoreResult]) -> None:
        counts = Tally(
            (domain, result.status) for domain, result in zip(domains, results, strict=True)
        )
        for (domain, status), n in counts.items():
            self.items.labels(domain=domain, status=status).inc(n)
