"""Prometheus metrics, one registry per app (no import-time global state).

Label values come from closed sets (the registry's domains, the app's route templates, status
classes), never from what a client wrote: a request naming a thousand made-up domains cannot make
a thousand series.
"""

from __future__ import annotations

import bisect
import itertools
import re
import threading
from collections import Counter as Tally
from collections import deque
from collections.abc import Callable, Collection, Iterable, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from reward_specs import Spec
from reward_specs.judge.domain import judge_stages
from service.dispatch import DispatchStats
from service.http.asgi import HttpMiddleware
from service.schemas import ScoreResult
from service.work.runs import RunPoolStats

__all__ = ["Metrics", "StatusCounter", "plain_paths"]

UNKNOWN = "unknown"
"""The label of a domain this server does not have."""


_REASON = re.compile(r"[a-z][a-z0-9_]{0,39}")


def _reason_label(reason: object) -> str:
    """A scorer's reason as a label: our scorers' reasons are short identifiers; anything else
    is `other`, so that no text of a response can become a series."""
    return reason if isinstance(reason, str) and _REASON.fullmatch(reason) else "other"


class _ItemLatency(Collector):
    """Each item's scoring time (its `elapsed_ms`) as a histogram per domain. Counted a request
    at a time: prometheus_client's Histogram takes a lock per value, which on a 16,384-item
    request would cost more than the rest of the bookkeeping."""

    BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0)

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, list[int]] = {}
        self._sums: dict[str, float] = {}

    def observe(self, domain: str, seconds: Iterable[float]) -> None:
        counts = [0] * (len(self.BUCKETS) + 1)  # the last: over every bound (+Inf only)
        total = 0.0
        for value in seconds:
            counts[bisect.bisect_left(self.BUCKETS, value)] += 1
            total += value
        with self._lock:
            held = self._counts.setdefault(domain, [0] * len(counts))
            for i, n in enumerate(counts):
                held[i] += n
            self._sums[domain] = self._sums.get(domain, 0.0) + total

    def collect(self) -> Iterable[Metric]:
        family = HistogramMetricFamily(
            "proctor_item_seconds",
            "Time to score one judged (`ok`) item, by domain: its elapsed_ms.",
            labels=["domain"],
        )
        with self._lock:
            snapshot = {d: (list(c), self._sums[d]) for d, c in self._counts.items()}
        for domain, (counts, total) in sorted(snapshot.items()):
            cumulative = list(itertools.accumulate(counts))
            buckets = [(str(b), n) for b, n in zip(self.BUCKETS, cumulative, strict=False)]
            family.add_metric([domain], [*buckets, ("+Inf", cumulative[-1])], sum_value=total)
        yield family


ROLLING_WINDOW = 1000
"""Judged items per domain that the rolling gauges average over."""


class _Rolling(Collector):
    """Per domain, over its last `ROLLING_WINDOW` judged (`ok`) items: the mean score, the
    share that succeeded, and the share whose answer was found (of those whose scorer says):
    what someone watching a training run looks at first."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._recent: dict[str, deque[tuple[float, bool, bool | None]]] = {}

    def observe(self, domain: str, judged: Iterable[tuple[float, bool, bool | None]]) -> None:
        with self._lock:
            window = self._recent.setdefault(domain, deque(maxlen=ROLLING_WINDOW))
            window.extend(judged)

    def collect(self) -> Iterable[Metric]:
        families = {
            name: GaugeMetricFamily(f"proctor_rolling_{name}", doc, labels=["domain"])
            for name, doc in (
                ("score", f"Mean score of the domain's last {ROLLING_WINDOW} judged items."),
                (
                    "success_rate",
                    f"Share of the last {ROLLING_WINDOW} judged items that succeeded.",
                ),
                (
                    "parse_rate",
                    f"Share of the last {ROLLING_WINDOW} judged items whose answer "
                    "was found (items whose scorer reports `parsed`).",
                ),
            )
        }
        with self._lock:
            snapshot = {d: list(w) for d, w in self._recent.items() if w}
        for domain, window in sorted(snapshot.items()):
            families["score"].add_metric([domain], sum(s for s, _, _ in window) / len(window))
            families["success_rate"].add_metric(
                [domain], sum(ok for _, ok, _ in window) / len(window)
            )
            parsed = [p for _, _, p in window if p is not None]
            if parsed:
                families["parse_rate"].add_metric([domain], sum(parsed) / len(parsed))
        yield from families.values()


class _DispatchCollector(Collector):
    """The dispatcher's snapshot, read at each scrape. The metric names keep the `pool` of the
    embedded default's; a backend's extras are one gauge labelled by backend and name."""

    def __init__(self, stats: Callable[[], DispatchStats]) -> None:
        self._stats = stats

    def collect(self) -> Iterable[Metric]:
        stats = self._stats()
        for name, value, doc in (
            ("proctor_pool_workers", stats.workers, "Worker processes alive."),
            ("proctor_pool_ready_workers", stats.ready_workers, "Worker processes ready."),
            ("proctor_pool_pending_chunks", stats.pending, "Chunks waiting for a worker."),
            ("proctor_pool_broken", int(stats.broken is not None), "1 if workers cannot start."),
        ):
            yield GaugeMetricFamily(name, doc, value=value)
        for name, value, doc in (
            ("proctor_pool_restarts", stats.restarts, "Workers replaced since start."),
            ("proctor_pool_item_timeouts", stats.timeouts, "Items killed by the hard timeout."),
            ("proctor_pool_poison_items", stats.poison_items, "Items that killed two workers."),
            (
                "proctor_environment_changes",
                stats.environment_changes,
                "Code environments found changed since start (code items then infra_error).",
            ),
        ):
            yield CounterMetricFamily(name, doc, value=value)
        extras = GaugeMetricFamily(
            "proctor_dispatch_extra", "What only this backend reports.", labels=["backend", "name"]
        )
        for extra, amount in sorted(stats.extras.items()):
            extras.add_metric([stats.backend, extra], amount)
        yield extras


class _SamplingCollector(Collector):
    """Puzzle sampling calls running in their child processes, and waiting for one."""

    def __init__(self, load: Callable[[], tuple[int, int]]) -> None:
        self._load = load

    def collect(self) -> Iterable[Metric]:
        running, waiting = self._load()
        yield GaugeMetricFamily(
            "proctor_sampling_running", "Puzzle sampling calls in a child process.", value=running
        )
        yield GaugeMetricFamily(
            "proctor_sampling_waiting", "Puzzle sampling calls waiting for one.", value=waiting
        )


class _RunPoolCollector(Collector):
    """`POST /v1/run`'s pool (and the compat routes' runs): its sandboxes, the runs waiting for
    one, and the runs answered by status. On the API host in both modes."""

    def __init__(self, stats: Callable[[], RunPoolStats]) -> None:
        self._stats = stats

    def collect(self) -> Iterable[Metric]:
        stats = self._stats()
        sandboxes = stats.sandboxes
        for name, value, doc in (
            (
                "proctor_run_pool_size",
                sandboxes.size,
                "Run pool size (0: unopened).",
            ),
            (
                "proctor_run_pool_sandboxes",
                sandboxes.live,
                "Run pool sandboxes alive.",
            ),
            ("proctor_run_pool_idle_sandboxes", sandboxes.idle, "Run pool sandboxes waiting."),
            ("proctor_run_pool_pending", stats.pending, "Runs waiting for a run pool sandbox."),
        ):
            yield GaugeMetricFamily(name, doc, value=value)
        yield CounterMetricFamily(
            "proctor_run_pool_replacements",
            "Run pool sandboxes retired (recycled, or after an error).",
            value=sandboxes.retired,
        )
        answered = CounterMetricFamily(
            "proctor_runs", "Runs answered, by status.", labels=["status"]
        )
        for status, count in sorted(stats.answered.items()):
            answered.add_metric([status], count)
        yield answered


class Metrics:
    def __init__(
        self,
        dispatch_stats: Callable[[], DispatchStats],
        domains: Collection[str] = (),
        sampling: Callable[[], tuple[int, int]] | None = None,
        runs: Callable[[], RunPoolStats] | None = None,
    ) -> None:
        self.domains = frozenset(domains)
        self.registry = CollectorRegistry()
        self.items = self._counter(
            "proctor_items", "Items answered, by domain and status.", "domain", "status"
        )
        self.requests = Histogram(
            "proctor_score_request_seconds",
            "Time to answer a scoring request.",
            ["endpoint"],
            buckets=(0.01, 0.05, 0.1, 0.5, 1, 2, 5, 10, 30, 60, 300),
            registry=self.registry,
        )
        self.responses = self._counter(
            "proctor_http_responses",
            "HTTP responses by route template and status class (2xx, 4xx, 5xx, ...).",
            "route",
            "status",
        )
        self.scorer_exceptions = self._counter(
            "proctor_scorer_exceptions",
            "Answers judged 0 because a task's own scorer raised on them, by domain "
            "(`details.scorer_exception` says what was raised).",
            "domain",
        )
        self.judged_zero = self._counter(
            "proctor_judged_zero",
            "Judged answers that earned nothing for a stated reason (details.reason: timeout, "
            "parse_error, response_too_large, poison, ...), by domain and reason.",
            "domain",
            "reason",
        )
        self.judge_calls = Counter(
            "proctor_judge_calls",
            "Calls made to a judge endpoint for judged items (each order asked is one), by "
            "endpoint.",
            ["endpoint"],
            registry=self.registry,
        )
        self.judge_cache_hits = Counter(
            "proctor_judge_cache_hits",
            "Judged items whose replies came from a worker's judge cache, by endpoint.",
            ["endpoint"],
            registry=self.registry,
        )
        self.judge_tokens = Counter(
            "proctor_judge_tokens",
            "Tokens a judge endpoint read (prompt) and wrote (completion), by endpoint.",
            ["endpoint", "kind"],
            registry=self.registry,
        )
        self.judge_failures = Counter(
            "proctor_judge_failures",
            "Judge items a judge endpoint failed (judge_unavailable, judge_timeout: infra_error) "
            "or refused (judge_rejected_input: a judged 0), by endpoint and code.",
            ["endpoint", "code"],
            registry=self.registry,
        )
        self.judge_infra_errors = Counter(
            "proctor_judge_infra_errors",
            "Judge items that were infra_error, by spec: a share rising in training is a sign "
            "that responses have learnt to make their judge fail.",
            ["spec"],
            registry=self.registry,
        )
        self.item_seconds = _ItemLatency()
        self.registry.register(self.item_seconds)
        self.rolling = _Rolling()
        self.registry.register(self.rolling)
        self.registry.register(_DispatchCollector(dispatch_stats))
        if sampling is not None:
            self.registry.register(_SamplingCollector(sampling))
        if runs is not None:
            self.registry.register(_RunPoolCollector(runs))

    def _counter(self, name: str, documentation: str, *labels: str) -> Counter:
        return Counter(name, documentation, labels, registry=self.registry)

    def observe(self, domains: Sequence[str], results: Sequence[ScoreResult]) -> None:
        known = self.domains
        labelled = list(zip((d if d in known else UNKNOWN for d in domains), results, strict=True))
        for (domain, status), n in Tally((d, r.status) for d, r in labelled).items():
            self.items.labels(domain=domain, status=status).inc(n)
        by_domain: dict[str, list[float]] = {}
        verdicts: dict[str, list[tuple[float, bool, bool | None]]] = {}
        for domain, result in labelled:
            if result.status == "ok":
                by_domain.setdefault(domain, []).append(result.elapsed_ms / 1000)
                verdict = (result.score or 0.0, bool(result.success), result.parsed)
                verdicts.setdefault(domain, []).append(verdict)
        for domain, seconds in by_domain.items():
            self.item_seconds.observe(domain, seconds)
        for domain, judged in verdicts.items():
            self.rolling.observe(domain, judged)
        raised = Tally(d for d, r in labelled if "scorer_exception" in r.details)
        for domain, n in raised.items():
            self.scorer_exceptions.labels(domain=domain).inc(n)
        reasons = Tally(
            (d, _reason_label(r.details["reason"]))
            for d, r in labelled
            if r.status == "ok" and not r.reward and "reason" in r.details
        )
        for (domain, reason), n in reasons.items():
            self.judged_zero.labels(domain=domain, reason=reason).inc(n)

    def observe_judge(
        self, spec: Spec, domains: Sequence[str], results: Sequence[ScoreResult]
    ) -> None:
        """The judge's counters for one request's results under `spec` (each scored item once:
        the results of a shared answer share one `details` object)."""
        judged = judge_stages(spec)  # the judge domain, and math's or STEM's judge stage
        if not judged:
            return
        seen: set[int] = set()
        for domain, result in zip(domains, results, strict=True):
            if domain not in judged or id(result.details) in seen:
                continue
            endpoint = judged[domain]
            seen.add(id(result.details))
            if result.status == "infra_error":
                code = result.error.code if result.error is not None else "unknown"
                if domain == "judge" or code.startswith("judge_"):  # a stage's own failures
                    self.judge_infra_errors.labels(spec=spec.name).inc()
                if code.startswith("judge_"):
                    self.judge_failures.labels(endpoint=endpoint, code=code).inc()
                continue
            if result.details.get("reason") == "judge_rejected_input":
                self.judge_failures.labels(endpoint=endpoint, code="judge_rejected_input").inc()
            judge = result.details.get("judge")
            if result.status != "ok" or not isinstance(judge, dict) or "orders" not in judge:
                continue
            if judge["cached"]:
                self.judge_cache_hits.labels(endpoint=endpoint).inc()
                continue
            self.judge_calls.labels(endpoint=endpoint).inc(judge["orders"])
            for kind in ("prompt", "completion"):
                tokens = judge[f"{kind}_tokens"]
                self.judge_tokens.labels(endpoint=endpoint, kind=kind).inc(tokens)


def plain_paths(routes: Iterable[BaseRoute]) -> frozenset[str]:
    """The paths of `routes` that are plain Starlette routes (FastAPI's are `APIRoute`s)."""
    return frozenset(r.path for r in routes if type(r) is Route)


@dataclass(eq=False)
class StatusCounter(HttpMiddleware):
    """Counts every response in `Metrics.responses`, by the template of the route that answered
    (`/v1/jobs/{job_id}`, not the path) or `unmatched`, and by status class; an exception that
    escapes the app counts as a 5xx. The app's plain routes (`plain_paths`: /docs, /redoc,
    /openapi.json) put no route in the scope and are counted by their path."""

    app: ASGIApp
    metrics: Metrics
    plain_paths: frozenset[str] = frozenset()

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        status = 500

        async def send_status(message: MutableMapping[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        except BaseException:
            status = 500
            raise
        finally:
            route = scope.get("route")
            template = (
                route.path if isinstance(route, BaseRoute) and hasattr(route, "path") else None
            )
            if template is None and scope["path"] in self.plain_paths:
                template = scope["path"]
            self.metrics.responses.labels(
                route=template or "unmatched", status=f"{status // 100}xx"
            ).inc()
