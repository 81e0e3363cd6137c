"""POST /v1/openrlhf: OpenRLHF's remote reward protocol (`--reward.remote_url`), on the same
scoring path as /v1/score.

OpenRLHF 0.11's agent executor posts `{"query": [...], "prompts": [...], "labels": [...]}`, where
each query is the prompt and the response decoded with their special tokens, and reads
`{"rewards": [...], "scores": [...], "extra_logs": {...}}`. The response judged is what follows
the prompt in the query, with trailing end-of-sequence tokens stripped; one that does not end in
one was cut at the length limit (`finish_reason: length`), so termination penalties apply.

Labels carry the domain and reference: a JSON object `{"domain": ..., "reference": {...}}` (or
its JSON text), or a plain gold answer for the route's `domain` (`{"answer": label}`). Query
parameters: `domain` (default `math`), `spec`, and `api_key`, since OpenRLHF sends no header.
An item Proctor could not judge makes the answer a 503, which OpenRLHF retries; an unusable label
or reference is a 422. Never a reward of 0.
"""

from __future__ import annotations

import contextlib
import json
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query
from pydantic import BaseModel, ConfigDict, model_validator

from service.http.deps import StateDep, check_item_count, field_error, spec_named
from service.http.key_limits import KeyLease
from service.http.routes.score import score_body
from service.schemas import ScoreItem, ScoreResult
from service.work.ingest import ScoreBody

router = APIRouter(tags=["integrations"])

END_TOKENS = (
    "<|im_end|>",
    "<|endoftext|>",
    "<|eot_id|>",
    "<|end_of_text|>",
    "<|end|>",
    "<｜end▁of▁sentence｜>",
    "<end_of_turn>",
    "</s>",
    "<eos>",
)
"""End-of-sequence tokens of common chat models, as they decode with their special tokens; a
trailing run of them (and of padding) is what OpenRLHF's query has after a finished response."""


class OpenRLHFRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    query: list[str]
    prompts: list[str]
    labels: list[Any]

    @model_validator(mode="after")
    def _aligned(self) -> OpenRLHFRequest:
        if not len(self.query) == len(self.prompts) == len(self.labels):
            raise ValueError(
                f"query, prompts and labels differ in length "
                f"({len(self.query)}, {len(self.prompts)}, {len(self.labels)})"
            )
        return self


class OpenRLHFResponse(BaseModel):
    rewards: list[float]
    scores: list[float]
    extra_logs: dict[str, list[float]]


def split_response(query: str, prompt: str, end_tokens: tuple[str, ...]) -> tuple[str, bool]:
    """The response after `prompt` in `query`, without its trailing end tokens, and whether it
    had one (stopped by itself) or not (cut at the length limit)."""
    if query.startswith(prompt):
        response = query[len(prompt) :]
    else:
        # The tokenizer need not round-trip the prompt exactly; the response follows its last
        # occurrence, and a query that does not hold it is taken whole.
        at = query.rfind(prompt) if prompt else -1
        response = query[at + len(prompt) :] if at >= 0 else query
    stopped = False
    trimmed = response.rstrip()
    while True:
        for token in end_tokens:
            if token and trimmed.endswith(token):
                trimmed = trimmed[: -len(token)].rstrip()
                stopped = True
                break
        else:
            return trimmed, stopped


def label_item(label: Any, default_domain: str) -> tuple[str, dict[str, Any]]:
    """(domain, reference) from an OpenRLHF label."""
    if isinstance(label, str) and label.lstrip().startswith("{"):
        # A gold answer may start with a brace too (a set): then it stays a string.
        with contextlib.suppress(json.JSONDecodeError):
            label = json.loads(label)
    if isinstance(label, dict):
        reference = label.get("reference")
        domain = label.get("domain", default_domain)
        if not isinstance(reference, dict) or not isinstance(domain, str):
            raise ValueError('a label object needs "reference" (an object) and "domain" (a string)')
        return domain, reference
    if isinstance(label, str | int | float) and not isinstance(label, bool):
        return default_domain, {"answer": str(label)}
    raise ValueError(f"a label is a JSON object or a gold answer, not {type(label).__name__}")


def _refuse_unjudged(results: list[ScoreResult]) -> None:
    infra = [(i, r) for i, r in enumerate(results) if r.status == "infra_error"]
    if infra:
        index, first = infra[0]
        reason = first.error.message if first.error else "not judged"
        raise HTTPException(
            status_code=503,
            detail=f"{len(infra)} of {len(results)} items were not judged (item {index}: {reason})",
            headers={"Retry-After": "1"},
        )
    for index, result in enumerate(results):
        if result.status == "invalid":
            reason = result.error.message if result.error else "invalid"
            field_error(["body", "labels", index], reason, "invalid_item")


def _judged(value: float | None) -> float:
    """A number of an `ok` result (the contract says it has one)."""
    if value is None:
        raise RuntimeError("an ok result without a reward or score breaks the contract")
    return value


@router.post(
    "/v1/openrlhf",
    response_model=OpenRLHFResponse,
    summary="Score in OpenRLHF's remote reward protocol",
    responses={
        422: {
            "description": "A malformed request (more than `max_items_per_request` items, an "
            "unknown spec), or an unusable label or reference."
        },
        429: {"description": "A per-key or byte limit, as for /v1/score; retry."},
        503: {"description": "An item could not be judged now; retry."},
    },
)
async def openrlhf(
    body: OpenRLHFRequest,
    state: StateDep,
    lease: KeyLease,
    domain: Annotated[str, Query(min_length=1, max_length=64)] = "math",
    spec: str | None = None,
) -> OpenRLHFResponse:
    chosen = spec_named(state, spec, ["query", "spec"])
    check_item_count(state, len(body.query), ["body", "query"])
    await lease.take_items(len(body.query))
    items = []
    for index, (query, prompt, label) in enumerate(
        zip(body.query, body.prompts, body.labels, strict=True)
    ):
        try:
            item_domain, reference = label_item(label, domain)
        except ValueError as exc:
            field_error(["body", "labels", index], str(exc), "invalid_label")
        response, stopped = split_response(query, prompt, END_TOKENS)
        items.append(
            ScoreItem(
                domain=item_domain,
                response=response,
                reference=reference,
                finish_reason="stop" if stopped else "length",
            )
        )
    scored = await score_body(state, chosen, ScoreBody(items=items), "openrlhf")
    _refuse_unjudged(scored.results)
    ok = scored.results
    return OpenRLHFResponse(
        rewards=[_judged(r.reward) for r in ok],
        scores=[_judged(r.score) for r in ok],
        extra_logs={
            "proctor_success": [float(bool(r.success)) for r in ok],
            "proctor_parsed": [float(bool(r.parsed)) for r in ok],
            "proctor_penalty": [sum(r.penalties.values()) for r in ok],
        },
    )
