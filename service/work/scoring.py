"""From a validated request to its results: size checks, de-duplication, dispatch, fan-out.

Shared by POST /v1/score, the jobs API and `proctor score`, so all three give the same bytes for
the same items. Identical items of a batch (same spec, domain, response, reference and length
fields) are scored once: in a GRPO group many responses are the same. Where a domain's scorer
declares an answer key, "same response" means the same answer (responses that differ only in their
reasoning), so a group of 16 costs the scorer a few calls.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from reward_specs import Outcome, Registry, Spec, canonical_json, codes
from reward_specs.batch import UniqueItems
from reward_specs.json_bounds import json_problem
from service.dispatch.base import Dispatcher, MappedOnDone, Work
from service.schemas import ErrorInfo, ScoreResponse, ScoreResult, SpecSummary
from service.settings import Settings
from service.work.ingest import RequestItem, ScoreBody

__all__ = ["ItemLimits", "Scoring", "score_batch", "to_result"]


@dataclass(frozen=True, slots=True)
class ItemLimits:
    """What one item may hold (`service.settings` documents each bound)."""

    max_response_bytes: int
    max_depth: int
    max_reference_bytes: int
    max_meta_bytes: int

    @classmethod
    def of(cls, settings: Settings) -> ItemLimits:
        return cls(
            max_response_bytes=settings.max_response_bytes,
            max_depth=settings.max_reference_depth,
            max_reference_bytes=settings.max_reference_bytes,
            max_meta_bytes=settings.max_meta_bytes,
        )


def to_result(
    item_id: str | None, outcome: Outcome, meta: dict[str, Any] | None = None
) -> ScoreResult:
    # Built without validation: an Outcome is ours and already has the result's types, and
    # validating every result's details would cost more than scoring cached answers.
    fields = {name: getattr(outcome, name) for name in Outcome.__slots__}
    if error := outcome.error:
        fields["error"] = ErrorInfo.model_construct(code=error["code"], message=error["message"])
    else:
        fields["error"] = None
    return ScoreResult.model_construct(id=item_id, meta=meta, **fields)


def _too_large(item: RequestItem, max_bytes: int) -> Outcome | None:
    """A judged 0 for a response over the limit: were it `invalid`, it would be masked from
    training, and a policy could learn to run long to escape a zero."""
    size = len(item.response.encode("utf-8", "surrogatepass"))
    if size <= max_bytes:
        return None
    return Outcome.judged_zero("response_too_large", bytes=size, limit_bytes=max_bytes)


class _Bounds:
    """A batch's JSON values (references, `meta`) checked against the limits, each distinct value
    once, and encoded as canonical JSON.

    Values the strict reader decoded hold no NaN and no integer too long to print (msgspec refuses
    both), so two with equal canonical JSON are equal and the walk runs once per distinct value:
    once per GRPO group rather than once per sample. Values the lenient reader decoded are walked
    one by one, since a NaN and a null write the same JSON."""

    def __init__(self, limits: ItemLimits, strict: bool) -> None:
        self.limits = limits
        self.strict = strict
        self._seen: dict[bytes, str | None] = {}
        self.table: dict[int, bytes | Outcome] = {}
        """The request's `references` entries, checked once however many items point at one."""

    def encode(self, value: dict[str, Any], what: str, max_bytes: int) -> bytes | Outcome:
        """`value`'s canonical JSON, or the `invalid` outcome naming the bound it breaks."""
        try:
            encoded = canonical_json(value)
        except (RecursionError, ValueError):  # too deep, or a number too long, to write
            encoded = b""
        problem: str | None
        if not encoded:
            problem = json_problem(value, self.limits.max_depth) or "cannot be written as JSON"
        elif not self.strict:
            problem = json_problem(value, self.limits.max_depth)
        elif encoded in self._seen:
            problem = self._seen[encoded]
        else:
            problem = self._seen[encoded] = json_problem(value, self.limits.max_depth)
        if problem is None and len(encoded) > max_bytes:
            problem = f"is {len(encoded)} bytes of JSON; this server accepts at most {max_bytes}"
        if problem is None:
            return encoded
        return Outcome.failure("invalid", f"{what}_out_of_bounds", f"`{what}` {problem}")


def _resolve_reference(
    item: RequestItem, table: Sequence[dict[str, Any]] | None, bounds: _Bounds
) -> tuple[dict[str, Any], bytes] | Outcome:
    """The item's reference and its canonical JSON, or the `invalid` outcome saying why not."""
    index = item.reference_index
    max_bytes = bounds.limits.max_reference_bytes
    if index is None:
        if item.reference is None:
            return Outcome.failure(
                "invalid", "missing_reference", "give `reference` or `reference_index`"
            )
        encoded = bounds.encode(item.reference, "reference", max_bytes)
        return encoded if isinstance(encoded, Outcome) else (item.reference, encoded)
    if item.reference is not None:
        return Outcome.failure(
            "invalid", "ambiguous_reference", "give `reference` or `reference_index`, not both"
        )
    if table is None or index >= len(table):
        size = 0 if table is None else len(table)
        return Outcome.failure(
            "invalid",
            "unknown_reference_index",
            f"reference_index {index} is outside the request's {size} `references`",
        )
    if index not in bounds.table:
        bounds.table[index] = bounds.encode(table[index], "reference", max_bytes)
    encoded = bounds.table[index]
    return encoded if isinstance(encoded, Outcome) else (table[index], encoded)


def _refusal(item: RequestItem, why: str | None, bounds: _Bounds) -> Outcome | None:
    """The `invalid` outcome of an item refused before scoring (an unknown field, a `meta` out of
    bounds), or None."""
    if why is not None:
        return Outcome.failure("invalid", codes.MALFORMED_ITEM, why)
    if item.meta is not None:
        checked = bounds.encode(item.meta, "meta", bounds.limits.max_meta_bytes)
        if isinstance(checked, Outcome):
            return checked
    return None


def _fan_out(
    items: Sequence[RequestItem], outcomes: list[Outcome | None], unechoed: set[int]
) -> list[ScoreResult]:
    """One result per item that has an outcome, with its `meta` unless its position is in
    `unechoed` (a `meta` out of bounds); items without an `id` or `meta` that share an outcome
    share one (immutable) result object."""
    anonymous: dict[int, ScoreResult] = {}
    results = []
    for position, (item, outcome) in enumerate(zip(items, outcomes, strict=True)):
        if outcome is None:
            continue
        if item.id is not None or item.meta is not None:
            meta = None if position in unechoed else item.meta
            results.append(to_result(item.id, outcome, meta))
            continue
        result = anonymous.get(id(outcome))
        if result is None:
            result = anonymous[id(outcome)] = to_result(None, outcome)
        results.append(result)
    return results


@dataclass(frozen=True, slots=True)
class Scoring:
    """What scoring a batch needs of the service, made once (`AppState.scoring`): the dispatcher,
    the registry it scores with (items are also shared by their scorers' answer keys, see
    `item_keyer`), what one item may hold, and how long a batch may take."""

    dispatcher: Dispatcher
    registry: Registry
    limits: ItemLimits
    deadline_s: float

    @classmethod
    def of(cls, settings: Settings, dispatcher: Dispatcher, registry: Registry) -> Scoring:
        return cls(dispatcher, registry, ItemLimits.of(settings), settings.request_deadline_s)


async def score_batch(
    scoring: Scoring,
    spec: Spec,
    body: ScoreBody,
    on_progress: Callable[[int], None] | None = None,
) -> ScoreResponse:
    """Score `body`'s items under `spec`: one result per item, in order. Items may point into
    the body's `references` with `reference_index`; an item the reader refused
    (`body.rejected`) is `invalid`. `on_progress(n)` is told, from any thread, each time `n`
    more items have their outcome."""
    deadline = time.monotonic() + scoring.deadline_s
    items = body.items
    outcomes: list[Outcome | None] = [None] * len(items)
    unique = UniqueItems(spec, scoring.registry)
    limits = scoring.limits
    bounds = _Bounds(limits, body.strict)
    quick_limit = limits.max_response_bytes // 4  # no code point takes more than 4 bytes
    unechoed: set[int] = set()
    for position, item in enumerate(items):
        refusal = _refusal(item, body.rejected.get(position), bounds)
        if refusal is not None:
            outcomes[position] = refusal
            if item.meta is not None:
                unechoed.add(position)
            continue
        if len(item.response) > quick_limit:
            too_large = _too_large(item, limits.max_response_bytes)
            if too_large is not None:
                outcomes[position] = too_large
                continue
        resolved = _resolve_reference(item, body.references, bounds)
        if isinstance(resolved, Outcome):
            outcomes[position] = resolved
            continue
        unique.add(position, item, *resolved)

    on_done = None
    if on_progress is not None:
        on_progress(len(items) - sum(unique.sizes))  # refused before scoring
        on_done = MappedOnDone(on_progress, unique.sizes)
    scored = await scoring.dispatcher.run(Work(spec, unique.items, deadline, on_done))
    for position, outcome in unique.spread(scored):
        outcomes[position] = outcome
    results = _fan_out(items, outcomes, unechoed)
    if len(results) != len(items):
        raise RuntimeError("an item was left without an outcome")  # a bug of ours: fail loudly
    return ScoreResponse(spec=SpecSummary(**spec.summary()), results=results)
