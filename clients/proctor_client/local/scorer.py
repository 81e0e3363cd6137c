"""In-process scoring through the service's own `LocalDispatcher`: the same worker pool, sandbox
threads, fair scheduling and outcome ledger as `proctor serve`, so a worker that dies is replaced,
an item that kills a worker twice is judged 0 as a poison item, an item past `item_timeout_s`
is judged 0 (`timeout`), and results have the fields and values `proctor score` writes for the
same item and spec. Rows that score identically (equal `reward_specs.item_keyer` keys: the same
answer to the same reference) are scored once.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from proctor_client.evaluation.rows import Generation
from proctor_client.evaluation.scoring import DEFAULT_SPEC, Progress, Result, SpecSummary
from reward_specs import Item, Outcome, Spec, canonical_json
from reward_specs.batch import UniqueItems
from sandboxes import SandboxSettings
from service.core.loading import LoadedSpecs, load_registry
from service.dispatch.base import Work
from service.dispatch.local import LocalDispatcher
from service.settings import Settings

__all__ = ["DEFAULT_REGISTRY", "LocalScorer", "outcome_result"]

DEADLINE_S = 86400.0
"""How long one `score` call may take: an evaluation has no request deadline of its own."""


def outcome_result(outcome: Outcome) -> Result:
    """An engine outcome as the service's result object (see `service.work.scoring.to_result`)."""
    return {
        "id": None,
        "status": outcome.status,
        "reward": outcome.reward,
        "score": outcome.score,
        "success": outcome.success,
        "parsed": outcome.parsed,
        "penalties": outcome.penalties,
        "details": outcome.details,
        "error": outcome.error,
        "elapsed_ms": outcome.elapsed_ms,
        "meta": None,
    }


DEFAULT_REGISTRY = "reward_specs.domains:default_registry"
"""Where the scorers come from: a `module:function` returning a `Registry` (as the service's
`registry` setting)."""


class LocalScorer:
    """Scores in this machine's processes under a spec loaded from reward_specs' spec files."""

    def __init__(
        self,
        spec_name: str = DEFAULT_SPEC,
        spec_dirs: Sequence[Path] = (),
        workers: int | None = None,
        sandbox: SandboxSettings | None = None,
        registry: str = DEFAULT_REGISTRY,
    ) -> None:
        self._registry = load_registry(registry)
        self._loaded = LoadedSpecs(self._registry, tuple(spec_dirs))
        specs = self._loaded.under({})
        if spec_name not in specs:
            raise ValueError(f"unknown spec {spec_name!r}; known: {', '.join(sorted(specs))}")
        self._spec_name = spec_name
        self._resolved: Spec | None = None
        # With no `sandbox`, the service's own (`PROCTOR_SANDBOX__*`, as `proctor serve` and
        # `proctor score` read them): the sandbox, and so the hash, a server here would have.
        values: dict[str, Any] = {
            "workers": workers or multiprocessing.cpu_count(),
            "registry": registry,
            "spec_dirs": tuple(spec_dirs),
            "request_deadline_s": DEADLINE_S,
        }
        if sandbox is not None:
            values["sandbox"] = sandbox
        self._settings = Settings(**values)
        self._loop = asyncio.new_event_loop()
        self._dispatcher: LocalDispatcher | None = None

    @classmethod
    def with_sandbox(
        cls,
        spec_name: str,
        spec_dirs: Sequence[Path],
        workers: int | None,
        backend: str,
        registry: str = DEFAULT_REGISTRY,
    ) -> LocalScorer:
        """A scorer whose code answers run on sandbox `backend` (`local`, `docker`, `unsafe`)."""
        sandbox = SandboxSettings.model_validate({"backend": backend})
        return cls(spec_name, spec_dirs, workers, sandbox, registry)

    @property
    def spec(self) -> SpecSummary:
        spec = self._current_spec()
        return SpecSummary(spec.name, spec.version, spec.hash, spec.parameters())

    def _current_spec(self) -> Spec:
        """The spec under the sandbox's environment digest, so its hash is the one a server on
        the same sandbox reports; the digest is probed when the dispatcher opens its sandbox
        (once: the spec stays known after `close`)."""
        if self._resolved is None:
            environments = self._started().environments()
            self._resolved = self._loaded.under(environments)[self._spec_name]
        return self._resolved

    def _started(self) -> LocalDispatcher:
        if self._dispatcher is None:
            dispatcher = LocalDispatcher(self._settings, self._registry)
            self._loop.run_until_complete(dispatcher.start())
            self._dispatcher = dispatcher
        return self._dispatcher

    def score(self, rows: Sequence[Generation], progress: Progress) -> list[Result]:
        unique = UniqueItems(self._current_spec(), self._registry)
        for position, row in enumerate(rows):
            unique.add(position, row, row.reference, canonical_json(row.reference))
        sizes = unique.sizes
        outcomes = self._score_items(unique.items, lambda index: progress(sizes[index]))
        results: list[Result | None] = [None] * len(rows)
        for position, outcome in unique.spread(outcomes):
            results[position] = outcome_result(outcome)
        return [r for r in results if r is not None]

    def _score_items(self, items: Sequence[Item], done: Callable[[int], None]) -> list[Outcome]:
        """Outcomes in order; `done(i)` as item i finishes (from the pool's thread)."""
        if not items:
            return []
        spec = self._current_spec()
        dispatcher = self._started()
        deadline = time.monotonic() + DEADLINE_S
        work = Work(spec, items, deadline, done)
        return self._loop.run_until_complete(dispatcher.run(work))

    def close(self) -> None:
        if self._dispatcher is not None:
            self._loop.run_until_complete(self._dispatcher.stop())
            self._dispatcher = None
        self._loop.close()
