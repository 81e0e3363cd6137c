"""The judge endpoints while a service runs: what they serve, probed at start and watched after.

A spec's judge hash names the models its verdicts come from: each configured endpoint's `GET
/models` (`id`, `root`, `max_model_len` of each model), digested with `models_digest`, enters the
judge domain's part of every spec hash that names the domain (`Dispatcher.environments`), so two
servers serving other weights under one model id do not share a hash. `JudgeWatch.check` probes
again every `environment_probe_interval_s`; a report other than the first is a change for good,
as the code sandbox's is (`service.dispatch.environment`): judge items are `infra_error`
(`environment_changed`) and `/readyz` names `judge_environment` until a restart. An endpoint that
does not answer its probe is reported as such (its items fail `judge_unavailable` anyway) and is
no change; `/readyz` names it (`judge_endpoint_<name>`, not ready). An endpoint a loaded spec asks
for that the settings do not configure leaves the service ready (a built-in judge spec must not
take a server without a judge out of service); `/readyz` lists it (`wanted_endpoints`).

`setup` is what each worker process gets to open its own `Judges`: the endpoints, the cache's
bytes and the budget of one item (below `item_timeout_s`, so that a slow judge is a
`judge_timeout`, never a killed worker's 0).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from reward_specs.judge.client import Judges, JudgeSetup, models_digest
from reward_specs.scorer import NotJudged
from service.settings import Settings

__all__ = ["JudgeWatch", "judge_setup"]

log = logging.getLogger(__name__)

BUDGET_SHARE = 0.8
"""The share of `item_timeout_s` one judge item may spend on its calls and waits."""


def judge_setup(settings: Settings) -> JudgeSetup | None:
    """What a worker process needs to open its `Judges`; None when no endpoint is configured."""
    if not settings.judge_endpoints:
        return None
    return JudgeSetup(
        endpoints=dict(settings.judge_endpoints),
        cache_bytes=settings.judge_cache_bytes,
        budget_s=settings.item_timeout_s * BUDGET_SHARE,
    )


class JudgeWatch:
    """The configured endpoints' models: `digest` (None before the first probe or with none
    configured), `changed` (why, once changed), `readiness`. `check` may be called from any
    thread; it blocks for a probe when one is due."""

    def __init__(self, setup: JudgeSetup | None, interval_s: float) -> None:
        self._judges = Judges.open(setup) if setup is not None else None
        self._interval_s = interval_s
        self._lock = threading.Lock()
        self._probed_at = float("-inf")
        self.reports: dict[str, Any] = {}
        self.digest: str | None = None
        self.changed: str | None = None

    def _probe(self) -> dict[str, Any]:
        reports: dict[str, Any] = {}
        if self._judges is None:
            return reports
        for name in sorted(self._judges.endpoints):
            try:
                reports[name] = self._judges.models(name)
            except NotJudged as exc:
                log.warning("judge endpoint %s: its models could not be read: %s", name, exc)
                reports[name] = None
        return reports

    def check(self) -> None:
        """Probe when due (at once the first time); a report that differs from the first, for an
        endpoint that answered both times, is a change."""
        with self._lock:
            if self.changed is not None or self._judges is None:
                return
            if time.monotonic() - self._probed_at < self._interval_s and self.digest is not None:
                return
            self._probed_at = time.monotonic()
            reports = self._probe()
            if self.digest is None:
                self.reports = reports
                self.digest = models_digest(reports)
                log.info("judge endpoints: models %s", self.digest)
                return
            moved = [
                name
                for name, report in reports.items()
                if report is not None
                and self.reports.get(name) is not None
                and report != self.reports[name]
            ]
            # An endpoint that answers now and did not at start: its hash would change too.
            moved += [
                n for n, r in reports.items() if r is not None and self.reports.get(n) is None
            ]
            if moved:
                self.changed = f"judge endpoint(s) {', '.join(sorted(moved))} serve other models"
                log.error(
                    "%s; judge items are infra_error (environment_changed) until a restart",
                    self.changed,
                )
            else:  # an endpoint down now: its items fail by themselves; its report stays
                self.reports.update({n: r for n, r in reports.items() if r is not None})

    @property
    def changes(self) -> int:
        return int(self.changed is not None)

    def readiness(self) -> dict[str, bool]:
        ready: dict[str, bool] = {}
        if self._judges is None:
            return ready
        for name in sorted(self._judges.endpoints):
            ready[f"judge_endpoint_{name}"] = self.reports.get(name) is not None
        ready["judge_environment"] = self.changed is None
        return ready

    def close(self) -> None:
        if self._judges is not None:
            self._judges.close()
