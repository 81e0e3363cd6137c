"""Scoring one item under a spec: the single code path shared by the service and `proctor score`.

`score_item` validates the reference against the domain's schema, strips reasoning when the spec
says so, calls the domain's scorer and applies the termination penalties. Its result is an
`Outcome` with exactly one of three statuses, decided by who caused what happened:

- `ok`: the response was judged (a verifier timeout caused by the response is a judged 0);
- `invalid`: the item's reference or domain is unusable (`InvalidReference`, schema errors);
- `infra_error`: anything else, i.e. a failure of ours; the item was not judged.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol

from pydantic import ValidationError

from reward_specs import codes
from reward_specs.caches import Cache
from reward_specs.canonical import canonical_json
from reward_specs.json_bounds import HARD_MAX_DEPTH, json_problem
from reward_specs.registry import Registry, UnknownDomain
from reward_specs.scorer import InvalidReference, NotJudged, ReferenceModel, ScoreContext
from reward_specs.spec import Spec
from reward_specs.termination import TerminationFields, apply_termination, trailing_loop

__all__ = [
    "Item",
    "ItemFields",
    "ItemKey",
    "Outcome",
    "Status",
    "item_keyer",
    "reference_key",
    "score_item",
    "strip_reasoning",
]

log = logging.getLogger(__name__)

Status = Literal["ok", "infra_error", "invalid"]


@dataclass(frozen=True, slots=True)
class Item:
    domain: str
    response: str
    reference: Mapping[str, Any]
    finish_reason: str | None = None
    response_tokens: int | None = None
    max_response_tokens: int | None = None
    reference_key: str | None = None
    """A hash of the reference's canonical JSON (`reference_key`), when the caller has one (the
    service does, `UniqueItems`): items with equal keys have equal references, so their
    validation and per-reference work can be shared. Without one, `score_item` makes it."""


_VALIDATED: Cache[tuple[str, str], ReferenceModel] = Cache("engine.references", 4096)


@dataclass(frozen=True, slots=True)
class Outcome:
    status: Status
    reward: float | None = None
    score: float | None = None
    success: bool | None = None
    parsed: bool | None = None
    penalties: dict[str, float] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)
    error: dict[str, str] | None = None
    elapsed_ms: float = 0.0

    @classmethod
    def failure(cls, status: Status, code: str, message: str, elapsed_ms: float = 0.0) -> Outcome:
        return cls(status=status, error={"code": code, "message": message}, elapsed_ms=elapsed_ms)

    @classmethod
    def judged_zero(cls, reason: str, **details: Any) -> Outcome:
        """A judged outcome with no credit, for what the response itself caused (a worker it
        killed, a timeout, a size over the limit), the reason first in `details`."""
        return cls(
            status="ok",
            reward=0.0,
            score=0.0,
            success=False,
            parsed=False,
            details={"reason": reason, **details},
        )

    def __reduce__(self) -> tuple[type[Outcome], tuple[Any, ...]]:
        # A plain tuple pickles faster than a slotted dataclass's default state.
        return (Outcome, tuple(getattr(self, name) for name in Outcome.__slots__))


def strip_reasoning(response: str) -> str:
    """The answer part of a response: after the last `</think>`; nothing if thinking never ended."""
    if response.rfind("think>") == -1:
        return response  # neither tag: one pass over the text instead of two
    _, sep, tail = response.rpartition("</think>")
    if sep:
        return tail
    if "<think>" in response:
        return ""
    return response


def reference_key(reference_json: bytes) -> str:
    """The `Item.reference_key` of a reference, from its `canonical_json`."""
    return hashlib.blake2b(reference_json, digest_size=16).hexdigest()


ItemKey = tuple[object, ...]


class ItemFields(TerminationFields, Protocol):
    """What `item_keyer` reads of an item: an `Item`, or a request's item before one is built
    (what the termination treatments read, and the domain)."""

    @property
    def domain(self) -> str: ...


def item_keyer(
    spec: Spec, registry: Registry | None = None
) -> Callable[[ItemFields, bytes], ItemKey]:
    """A key function for items scored under `spec`: equal keys score identically. A key is
    everything `score_item` reads, as a hashable tuple (it holds the response itself, not a
    digest: Python caches a string's hash, so keying costs no pass over the text beyond the one
    that hashes it).

    The function takes an item and `canonical_json` of its reference. With `registry`, a domain's
    `Scorer.answer_key` stands in for the response text (together with the one thing the
    termination treatments read from the text, the trailing loop), so responses that differ only
    in their reasoning share a key. Each domain's scorer, config and key function are looked up
    once per key function, not once per item.
    """
    texts: dict[str, Callable[[str], object]] = {}

    def key(item: ItemFields, reference_json: bytes) -> ItemKey:
        scored_text = texts.get(item.domain)
        if scored_text is None:
            scored_text = texts[item.domain] = _text_keyer(spec, item.domain, registry)
        return (
            spec.hash,
            item.domain,
            scored_text(item.response),
            item.finish_reason,
            item.response_tokens,
            item.max_response_tokens,
            reference_json,
        )

    return key


def _whole(response: str) -> object:
    return response


def _text_keyer(spec: Spec, domain: str, registry: Registry | None) -> Callable[[str], object]:
    """What of a response of `domain` enters its key: the response, or ("answer", trailing loop,
    answer key) when the domain's scorer declares a key and it applies."""
    if registry is None or domain not in registry or domain not in spec.domains:
        return _whole
    answer_key = registry.get(domain).answer_key
    if answer_key is None:
        return _whole
    config = spec.config(domain)
    strip = spec.response.strip_reasoning
    repetition = spec.termination.repetition

    def scored_text(response: str) -> object:
        text = strip_reasoning(response) if strip else response
        try:
            key = answer_key(text, config)
        except Exception:  # a bug in a key function: lose the sharing, never the item
            log.exception("answer_key of domain %s failed", domain)
            return response
        if key is None:
            return response
        loop = trailing_loop(response, repetition) if repetition is not None else None
        return ("answer", loop, key)

    return scored_text


def _validation_message(exc: ValidationError) -> str:
    """The first errors, each with its location; a union's tag that repeats the key it is named
    after (`tests.asserts.asserts`) is said once."""
    parts = []
    for error in exc.errors()[:5]:
        loc = [str(p) for p in ("reference", *error["loc"])]
        where = ".".join(p for i, p in enumerate(loc) if i + 1 == len(loc) or p != loc[i + 1])
        parts.append(f"{where}: {error['msg']}")
    return "; ".join(parts)


def score_item(registry: Registry, spec: Spec, item: Item, ctx: ScoreContext) -> Outcome:
    started = time.perf_counter()

    def elapsed() -> float:
        return round((time.perf_counter() - started) * 1000.0, 3)

    try:
        scorer = registry.get(item.domain)
    except UnknownDomain:
        known = ", ".join(registry.domains())
        message = f"unknown domain {item.domain!r}; the domains are: {known}"
        return Outcome.failure("invalid", codes.UNKNOWN_DOMAIN, message, elapsed())
    if item.domain not in spec.domains:  # an opt-in domain this spec does not name
        message = f"spec {spec.name!r} has no [domains.{item.domain}] section"
        return Outcome.failure("invalid", codes.DOMAIN_NOT_IN_SPEC, message, elapsed())
    key = item.reference_key
    reference = _VALIDATED.get((item.domain, key)) if key else None
    if reference is None:
        problem = json_problem(item.reference, HARD_MAX_DEPTH)
        if problem is not None:
            return Outcome.failure(
                "invalid", "reference_out_of_bounds", f"`reference` {problem}", elapsed()
            )
        try:
            reference = scorer.reference_type.model_validate(item.reference)
        except ValidationError as exc:
            return Outcome.failure(
                "invalid", "invalid_reference", _validation_message(exc), elapsed()
            )
        # A caller without a key (a library call, a test): the reference is made canonical
        # here, once, so every scorer sees a key (the service and `UniqueItems` give one).
        key = key or reference_key(canonical_json(item.reference))
        _VALIDATED.put((item.domain, key), reference)
    ctx = replace(ctx, reference_key=key, domain_hash=spec.domain_hashes.get(item.domain))

    text = strip_reasoning(item.response) if spec.response.strip_reasoning else item.response
    try:
        judgement = scorer.score(text, reference, spec.config(item.domain), ctx)
    except InvalidReference as exc:
        return Outcome.failure("invalid", exc.code, str(exc), elapsed())
    except NotJudged as exc:  # a service the scorer calls failed: ours, not the response's
        return Outcome.failure("infra_error", exc.code, str(exc)[:500], elapsed())
    except Exception as exc:  # a bug or a broken dependency of ours: never a wrong answer
        log.exception("scorer %s failed", item.domain)
        return Outcome.failure(
            "infra_error", codes.SCORER_ERROR, f"{type(exc).__name__}: {exc}"[:500], elapsed()
        )

    reward, penalties, diagnostics = apply_termination(judgement.score, item, spec.termination)
    details = dict(judgement.details)
    if diagnostics:
        details["termination"] = diagnostics
    return Outcome(
        status="ok",
        reward=reward,
        score=judgement.score,
        success=judgement.success,
        parsed=judgement.parsed,
        penalties=penalties,
        details=details,
        elapsed_ms=elapsed(),
    )
