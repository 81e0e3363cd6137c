"""From a validated request to its results: size checks, de-duplication, dispatch, fan-out.

Shared by POST /v1/score, the jobs API and `proctor score`, so all three give the same bytes for
the same items. Identical items of a batch (same spec, domain, response, reference and length
fields) are scored once: in a GRPO group many responses are the same. Where a domain's scorer
declares an answer key, "same response" means the same answer (responses that differ only in their
reasoning), so a group of 16 costs the scorer a few calls.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from reward_specs import (
    Item,
    ItemKey,
    Outcome,
    Registry,
    Spec,
    canonical_json,
    item_keyer,
    reference_key,
)
from service.dispatch.base import Dispatcher
from service.ingest import RequestItem
from service.schemas import ErrorInfo, ScoreResponse, ScoreResult, SpecSummary

__all__ = ["score_batch", "to_result"]


def to_result(item_id: str | None, outcome: Outcome) -> ScoreResult:
    # Built without validation: an Outcome is ours and already has the result's types, and
    # validating 4,096 results' details cost more than scoring a batch of cached puzzle answers.
    error = None
    if outcome.error:
        error = ErrorInfo.model_construct(
            code=outcome.error["code"], message=outcome.error["message"]
        )
    return ScoreResult.model_construct(
        id=item_id,
        status=outcome.status,
        reward=outcome.reward,
        score=outcome.score,
        success=outcome.success,
        parsed=outcome.parsed,
        penalties=outcome.penalties,
        details=outcome.details,
        error=error,
        elapsed_ms=outcome.elapsed_ms,
    )


def _too_large(item: RequestItem, max_bytes: int) -> Outcome | None:
    size = len(item.response.encode("utf-8", "surrogatepass"))
    if size <= max_bytes:
        return None
    return Outcome.failure(
        "invalid",
        "response_too_large",
        f"response is {size} bytes; this server accepts at most {max_bytes}",
    )


def _resolve_reference(
    item: RequestItem,
    table: Sequence[dict[str, Any]] | None,
    table_json: dict[int, bytes],
) -> tuple[dict[str, Any], bytes] | Outcome:
    """The item's reference and its canonical JSON, or the `invalid` outcome saying why not.

    A table reference's JSON is computed once per request, however many items point at it.
    """
    index = item.reference_index
    if index is None:
        if item.reference is None:
            return Outcome.failure(
                "invalid", "missing_reference", "give `reference` or `reference_index`"
            )
        return item.reference, canonical_json(item.reference)
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
    if index not in table_json:
        table_json[index] = canonical_json(table[index])
    return table[index], table_json[index]


def _fan_out(items: Sequence[RequestItem], outcomes: list[Outcome | None]) -> list[ScoreResult]:
    """One result per item that has an outcome; items without an `id` that share an outcome share
    one (immutable) result object."""
    anonymous: dict[int, ScoreResult] = {}
    results = []
    for item, outcome in zip(items, outcomes, strict=True):
        if outcome is None:
            continue
        if item.id is not None:
            results.append(to_result(item.id, outcome))
            continue
        result = anonymous.get(id(outcome))
        if result is None:
            result = anonymous[id(outcome)] = to_result(None, outcome)
        results.append(result)
    return results


async def score_batch(
    dispatcher: Dispatcher,
    spec: Spec,
    items: Sequence[RequestItem],
    *,
    max_response_bytes: int,
    deadline_s: float,
    references: Sequence[dict[str, Any]] | None = None,
    registry: Registry,
) -> ScoreResponse:
    """Score `items` under `spec`: one result per item, in order. `references` is the request's
    table that items may point into with `reference_index`. `registry` is the one the dispatcher
    scores with: items are also shared by their scorers' answer keys (see `item_key`)."""
    deadline = time.monotonic() + deadline_s
    outcomes: list[Outcome | None] = [None] * len(items)
    unique: dict[ItemKey, list[int]] = {}
    unique_items: list[Item] = []
    # Equal references become one object with one key, which the worker pool then sends once per
    # chunk (pickle shares repeated objects): a GRPO group's 16 items carry one puzzle, not 16.
    interned: dict[bytes, tuple[dict[str, Any], str]] = {}
    table_json: dict[int, bytes] = {}
    key_of = item_keyer(spec, registry)
    quick_limit = max_response_bytes // 4  # no code point takes more than 4 bytes
    for position, item in enumerate(items):
        if len(item.response) > quick_limit:
            rejected = _too_large(item, max_response_bytes)
            if rejected is not None:
                outcomes[position] = rejected
                continue
        resolved = _resolve_reference(item, references, table_json)
        if isinstance(resolved, Outcome):
            outcomes[position] = resolved
            continue
        reference, reference_json = resolved
        key = key_of(item, reference_json)
        positions = unique.get(key)
        if positions is not None:
            positions.append(position)
            continue
        shared = interned.get(reference_json)
        if shared is None:
            shared = interned[reference_json] = (reference, reference_key(reference_json))
        engine_item = Item(
            domain=item.domain,
            response=item.response,
            reference=shared[0],
            reference_key=shared[1],
            finish_reason=item.finish_reason,
            response_tokens=item.response_tokens,
            max_response_tokens=item.max_response_tokens,
        )
        unique[key] = [position]
        unique_items.append(engine_item)

    scored = await dispatcher.run(spec, unique_items, deadline)
    for positions, outcome in zip(unique.values(), scored, strict=True):
        for position in positions:
            outcomes[position] = outcome
    results = _fan_out(items, outcomes)
    if len(results) != len(items):
        raise RuntimeError("an item was left without an outcome")  # a bug of ours: fail loudly
    return ScoreResponse(spec=SpecSummary(**spec.summary()), results=results)
