"""In-process scoring through `reward_specs`, the code path of the service's own workers.

`score_item` runs in worker processes of our own (math-verify's timeouts use `signal.alarm`, which
works only on a process's main thread; processes also give the cores), and code items run in
threads beside a sandbox backend, as in the service. Rows that score identically (equal
`reward_specs.item_keyer` keys: the same answer to the same reference) are scored once. Results
have the fields and values `proctor score` writes for the same item and spec.

As in the service, a worker that dies is replaced and the items it had in flight are scored again,
one at a time; an item that kills a worker again is judged 0 as a poison item. Unlike the
service's pool, no hard per-item time limit backs up the verifiers' own timeouts.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Sequence
from concurrent.futures import (
    FIRST_COMPLETED,
    Future,
    ProcessPoolExecutor,
    ThreadPoolExecutor,
    as_completed,
    wait,
)
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import forkserver
from pathlib import Path
from typing import Any

from proctor_client.evaluation.rows import Generation
from proctor_client.evaluation.scoring import DEFAULT_SPEC, Progress, Result, SpecSummary
from reward_specs import (
    BUILTIN_SPEC_DIR,
    Item,
    ItemKey,
    Outcome,
    ScoreContext,
    Spec,
    canonical_json,
    item_keyer,
    load_specs,
    reference_key,
    score_item,
)
from reward_specs.hash_seed import pinned_hash_seed
from reward_specs.registry import load_registry
from sandboxes import SandboxBackend, SandboxError, SandboxSettings, open_backend
from sandboxes.checkers import open_checker_backend

__all__ = ["DEFAULT_REGISTRY", "LocalScorer", "outcome_result"]

CHUNK = 64
"""Distinct items per task sent to a worker: small enough for a smooth progress bar."""
IN_FLIGHT = 2
"""Chunks per worker submitted at a time: a dying worker fails every submitted chunk, so fewer
in flight means fewer items to score again."""


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
        "meta": None,
    }


_WORKER: dict[str, Any] = {}


DEFAULT_REGISTRY = "reward_specs.domains:default_registry"
"""Where the scorers come from: a `module:function` returning a `Registry` (as the service's
`registry` setting)."""


def _start_worker(registry_path: str, spec_dirs: tuple[Path, ...], spec_name: str) -> None:
    registry = load_registry(registry_path)
    _WORKER["registry"] = registry
    _WORKER["spec"] = load_specs(registry, (BUILTIN_SPEC_DIR, *spec_dirs))[spec_name]


def _score_chunk(items: list[Item]) -> list[Outcome]:
    registry, spec = _WORKER["registry"], _WORKER["spec"]
    ctx = ScoreContext()
    return [score_item(registry, spec, item, ctx) for item in items]


def _poison() -> Outcome:
    """The service's verdict on an item that killed a worker twice."""
    return Outcome.judged_zero("poison", message="scoring this item killed a worker twice")


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
        self._registry_path = registry
        self._registry = load_registry(registry)
        self._spec_dirs = tuple(spec_dirs)
        specs = load_specs(self._registry, (BUILTIN_SPEC_DIR, *self._spec_dirs))
        if spec_name not in specs:
            raise ValueError(f"unknown spec {spec_name!r}; known: {', '.join(sorted(specs))}")
        self._spec = specs[spec_name]
        self._workers = workers or multiprocessing.cpu_count()
        self._sandbox_settings = sandbox or SandboxSettings()
        self._sandbox: SandboxBackend | None = None
        self._checkers = open_checker_backend(self._sandbox_settings)  # opened on first use
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
            with pinned_hash_seed():  # as the service's workers: every puzzle regenerates
                forkserver.ensure_running()
            self._pool = ProcessPoolExecutor(
                self._workers,
                mp_context=context,
                initializer=_start_worker,
                initargs=(self._registry_path, self._spec_dirs, self._spec.name),
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

        def record(position: int, outcome: Outcome) -> None:
            outcomes[position] = outcome
            done(position)

        threaded = [i for i, item in enumerate(items) if self._threaded(item.domain)]
        in_pool = sorted(set(range(len(items))) - set(threaded))
        threads = None
        thread_futures: dict[Future[list[Outcome]], int] = {}
        if threaded:
            sandbox = self._sandbox_backend()
            threads = ThreadPoolExecutor(max(4, self._workers), thread_name_prefix="eval-score")
            for i in threaded:
                thread_futures[threads.submit(self._score_threaded, sandbox, items[i])] = i
        try:
            chunks = [in_pool[start : start + CHUNK] for start in range(0, len(in_pool), CHUNK)]
            lost = self._run_chunks(items, chunks, record)
            for position in lost:  # alone, so that a second death names its culprit
                record(position, self._run_alone(items[position]))
            for future in as_completed(thread_futures):
                record(thread_futures[future], future.result()[0])
        finally:
            if threads is not None:
                threads.shutdown(wait=True)
        if any(o is None for o in outcomes):
            raise RuntimeError("an item was left without an outcome")  # a bug of ours: loudly
        return [o for o in outcomes if o is not None]

    def _run_chunks(
        self,
        items: Sequence[Item],
        chunks: Sequence[list[int]],
        record: Callable[[int, Outcome], None],
    ) -> list[int]:
        """Score `chunks` (lists of positions) with a bounded number in flight; returns the
        positions whose chunk was lost because a worker died (the pool is then replaced)."""
        pending = list(reversed(chunks))
        running: dict[Future[list[Outcome]], list[int]] = {}
        lost: list[int] = []
        broken = False
        while pending or running:
            if broken and not running:
                self._replace_pool()
                broken = False
            while pending and not broken and len(running) < IN_FLIGHT * self._workers:
                chunk = pending.pop()
                future = self._process_pool().submit(_score_chunk, [items[i] for i in chunk])
                running[future] = chunk
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                chunk = running.pop(future)
                try:
                    chunk_outcomes = future.result()
                except BrokenProcessPool:
                    lost += chunk
                    broken = True
                    continue
                for position, outcome in zip(chunk, chunk_outcomes, strict=True):
                    record(position, outcome)
        if broken:
            self._replace_pool()
        return lost

    def _run_alone(self, item: Item) -> Outcome:
        """Score one item that was in flight when a worker died; if it kills a worker again it is
        judged 0 as a poison item, as the service does."""
        try:
            return self._process_pool().submit(_score_chunk, [item]).result()[0]
        except BrokenProcessPool:
            self._replace_pool()
            return _poison()

    def _replace_pool(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def _threaded(self, domain: str) -> bool:
        """Whether `domain`'s scorer runs in threads beside a sandbox (unknown domains go to the
        processes, where the engine answers `invalid`)."""
        return domain in self._registry and self._registry.get(domain).executor == "thread"

    def _score_threaded(self, sandbox: SandboxBackend | None, item: Item) -> list[Outcome]:
        if sandbox is None:
            message = self._sandbox_error or "no sandbox backend is running"
            return [Outcome.failure("infra_error", "sandbox_unavailable", message)]
        ctx = ScoreContext(sandbox=sandbox, checker_sandbox=self._checkers)
        return [score_item(self._registry, self._spec, item, ctx)]

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        if self._sandbox is not None:
            self._sandbox.close()
            self._sandbox = None
        self._checkers.close()
