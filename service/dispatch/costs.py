"""What items cost to score, learned from the outcomes, so the pool can start the costly ones first.

A batch of puzzles holds a few items that take tens of milliseconds (Reasoning Gym's sympy-backed
tasks) among hundreds that take microseconds. Handed out in request order, one of the slow ones
often lands in the last chunk and keeps one worker busy while the others idle. The dispatcher asks
each item's scorer for a workload label (`Scorer.workload`: the puzzle's task), keeps a moving
average of the typical scoring time per (domain, label), and gives the pool an estimate per item;
the pool then schedules the costliest first (`WorkerPool.submit`). Estimates only order work: a
wrong one costs some balance, never a verdict.
"""

from __future__ import annotations

import logging
import statistics
from collections.abc import Mapping, Sequence

from reward_specs import Item, Outcome, Registry

__all__ = ["CostModel"]

log = logging.getLogger(__name__)

_Label = tuple[str, str | None]


class CostModel:
    """Moving averages of scoring time (ms) per (domain, workload label). Event-loop thread only."""

    def __init__(self, registry: Registry, *, weight: float = 0.5, max_labels: int = 4096) -> None:
        self._workloads = {scorer.domain: scorer.workload for scorer in registry}
        self._weight = weight
        self._max_labels = max_labels
        self._ms: dict[_Label, float] = {}

    def label(self, item: Item) -> _Label:
        workload = self._workloads.get(item.domain)
        if workload is None or not isinstance(item.reference, Mapping):
            return (item.domain, None)
        try:
            return (item.domain, workload(item.reference))
        except Exception:  # a bug in a label function: the item is scheduled as typical
            log.exception("workload of domain %s failed", item.domain)
            return (item.domain, None)

    def estimates(self, labels: Sequence[_Label]) -> list[float]:
        """Per label, its average so far; a label never seen counts as the costliest one known,
        so that new work is started early and its cost learned."""
        unseen = max(self._ms.values(), default=1.0)
        return [self._ms.get(label, unseen) for label in labels]

    def observe(self, labels: Sequence[_Label], outcomes: Sequence[Outcome]) -> None:
        """Fold a batch's scoring times in: per label, the batch's median (one item that paid a
        one-off cost, a worker loading a task's data, does not make its label look slow), then a
        moving average across batches."""
        times: dict[_Label, list[float]] = {}
        for label, outcome in zip(labels, outcomes, strict=True):
            if outcome.status == "infra_error":
                continue  # a deadline or a lost worker says nothing about the item's cost
            times.setdefault(label, []).append(outcome.elapsed_ms)
        for label, batch in times.items():
            typical = statistics.median(batch)
            old = self._ms.pop(label, None)  # re-inserted last: the dict's order is recency
            self._ms[label] = typical if old is None else old + self._weight * (typical - old)
        while len(self._ms) > self._max_labels:
            del self._ms[next(iter(self._ms))]
