"""In-process scoring through `reward_specs`, the code path of the service's own workers.

`score_item` runs in worker processes of our own (math-verify's timeouts use `signal.alarm`, which
works only on a process's main thread; processes also give the cores), and code items run in
threads beside a sandbox backend, as in the service. Rows that score identically (equal
`reward_specs.item_keyer` keys: the same answer to the same reference) are scored once. Results
have the fields and values `proctor score` writes for the same item and spec.

Unlike the service's pool, a worker that dies takes its unfinished items with it: they are
`infra_error` (`worker_lost`), kept out of the statistics and scored again on the next run; and
no hard per-item time limit backs up the verifiers' own timeouts.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

from proctor_client.evaluation.rows import Generation
from proctor_client.evaluation.scoring import DEFAULT_SPEC, Progress, Result, SpecSummary
from reward_specs import (
    BUILTIN_SPEC_DIR,
    Item,
    ItemKey,
    Outcome,
    Registry,
    ScoreContext,
    Spec,
    canonical_json,
    default_registry,
    item_keyer,
    load_specs,
    reference_key,
    score_item,
)
from sandboxes import SandboxBackend, SandboxError, SandboxSettings, open_backend

__all__ = ["LocalScorer", "outcome_result"]

CHUNK = 64
"""Distinct items per task sent to a worker: small enough for a smooth progress bar."""


def outcome_result(outcome: Outcome) -> Result:
    """An engine outcome as the service's result object (see `service.scoring.to_result`)."""
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
    }


_WORKER: dict[str, Any] = {}


def _start_worker(spec_dirs: tuple[Path, ...], spec_name: str) -> None:
    registry = default_registry()
    _WORKER["registry"] = registry
    _WORKER["spec"] = load_specs(registry, (BUILTIN_SPEC_DIR, *spec_dirs))[spec_name]


def _score_chunk(items: list[Item]) -> list[Outcome]:
    registry, spec = _WORKER["registry"], _WORKER["spec"]
    ctx = ScoreContext()
    return [score_item(registry, spec, item, ctx) for item in items]


def _lost(message: str) -> Outcome:
    return Outcome.failure("infra_error", "worker_lost", message)


class LocalScorer:
    """Scores in this machine's processes under a spec loaded from reward_specs' spec files."""

    def __init__(
        self,
        spec_name: str = DEFAULT_SPEC,
        spec_dirs: Sequence[Path] = (),
        workers: int | None = None,
        sandbox: SandboxSettings | None = None,
    ) -> None:
        self._registry: Registry = default_registry()
        self._spec_dirs = tuple(spec_dirs)
        specs = load_specs(self._registry, (BUILTIN_SPEC_DIR, *self._spec_dirs))
        if spec_name not in specs:
            raise ValueError(f"unknown spec {spec_name!r}; known: {', '.join(sorted(specs))}")
        self._spec = specs[spec_name]
        self._workers = workers or multiprocessing.cpu_count()
        self._sandbox_settings = sandbox or SandboxSettings()
        self._sandbox: SandboxBackend | None = None
        self._sandbox_error: str | None = None
        self._pool: ProcessPoolExecutor | None = None

    @property
    def spec(self) -> SpecSummary:
        spec = self._spec
        return SpecSummary(spec.name, spec.version, spec.hash, spec.parameters())

    def _process_pool(self) -> ProcessPoolExecutor:
        if self._pool is None:
            # A fork server imports the scorers once; each worker then starts as a fork of it
            # (no parent threads inherited, no per-worker import of sympy and reasoning-gym).
            context = multiprocessing.get_context("forkserver")
            context.set_forkserver_preload(["proctor_client.evaluation.local"])
            self._pool = ProcessPoolExecutor(
                self._workers,
                mp_context=context,
                initializer=_start_worker,
                initargs=(self._spec_dirs, self._spec.name),
            )
        return self._pool

    def _sandbox_backend(self) -> SandboxBackend | None:
        if self._sandbox is None and self._sandbox_error is None:
            try:
                self._sandbox = open_backend(self._sandbox_settings)
            except SandboxError as exc:
                self._sandbox_error = str(exc)
        return self._sandbox

    def score(self, rows: Sequence[Generation], progress: Progress) -> list[Result]:
        spec: Spec = self._spec
        key_of = item_keyer(spec, self._registry)
        unique: dict[ItemKey, list[int]] = {}
        items: list[Item] = []
        interned: dict[bytes, str] = {}
        for position, row in enumerate(rows):
            reference_json = canonical_json(row.reference)
            key = key_of(row, reference_json)
            if key in unique:
                unique[key].append(position)
                continue
            unique[key] = [position]
            ref_key = interned.get(reference_json)
            if ref_key is None:
                ref_key = interned[reference_json] = reference_key(reference_json)
            items.append(
                Item(
                    domain=row.domain,
                    response=row.response,
                    reference=row.reference,
                    reference_key=ref_key,
                    finish_reason=row.finish_reason,
                    response_tokens=row.response_tokens,
                    max_response_tokens=row.max_response_tokens,
                )
            )
        groups = list(unique.values())
        outcomes = self._score_items(items, lambda index: progress(len(groups[index])))
        results: list[Result | None] = [None] * len(rows)
        for positions, outcome in zip(groups, outcomes, strict=True):
            result = outcome_result(outcome)
            for position in positions:
                results[position] = result
        return [r for r in results if r is not None]

    def _score_items(self, items: Sequence[Item], done: Callable[[int], None]) -> list[Outcome]:
        """Outcomes in order; `done(i)` as item i finishes."""
        outcomes: list[Outcome | None] = [None] * len(items)
        threaded = [i for i, item in enumerate(items) if self._threaded(item.domain)]
        in_pool = sorted(set(range(len(items))) - set(threaded))
        futures: dict[Future[list[Outcome]], list[int]] = {}
        if in_pool:
            pool = self._process_pool()
            for start in range(0, len(in_pool), CHUNK):
                chunk = in_pool[start : start + CHUNK]
                futures[pool.submit(_score_chunk, [items[i] for i in chunk])] = chunk
        threads = None
        if threaded:
            sandbox = self._sandbox_backend()
            threads = ThreadPoolExecutor(max(4, self._workers), thread_name_prefix="eval-score")
            for i in threaded:
                futures[threads.submit(self._score_threaded, sandbox, items[i])] = [i]
        try:
            for future in as_completed(futures):
                positions = futures[future]
                try:
                    chunk_outcomes = future.result()
                except BrokenProcessPool as exc:
                    message = f"a scoring worker died ({exc}); re-run to score this row again"
                    chunk_outcomes = [_lost(message)] * len(positions)
                    self._pool = None  # the next call starts a fresh pool
                for position, outcome in zip(positions, chunk_outcomes, strict=True):
                    outcomes[position] = outcome
                    done(position)
        finally:
            if threads is not None:
                threads.shutdown(wait=True)
        return [o if o is not None else _lost("no outcome") for o in outcomes]

    def _threaded(self, domain: str) -> bool:
        """Whether `domain`'s scorer runs in threads beside a sandbox (unknown domains go to the
        processes, where the engine answers `invalid`)."""
        return domain in self._registry and self._registry.get(domain).executor == "thread"

    def _score_threaded(self, sandbox: SandboxBackend | None, item: Item) -> list[Outcome]:
        if sandbox is None:
            message = self._sandbox_error or "no sandbox backend is running"
            return [Outcome.failure("infra_error", "sandbox_unavailable", message)]
        return [score_item(self._registry, self._spec, item, ScoreContext(sandbox=sandbox))]

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        if self._sandbox is not None:
            self._sandbox.close()
            self._sandbox = None
