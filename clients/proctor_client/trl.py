"""Proctor as a TRL 1.x `GRPOTrainer` reward function.

    from proctor_client.trl import reward_func
    trainer = GRPOTrainer(..., reward_funcs=[reward_func("http://proctor:8000", domain="math",
                                                          reference="answer",
                                                          max_completion_length=1024)])

The function is async, so TRL awaits it on its reward event loop next to other async rewards
instead of blocking the step. TRL calls it with `prompts`, `completions` (strings, or
conversational message lists), `completion_ids`, every other dataset column as a list, and
`trainer_state`, `log_metric`, `log_extra`. Each sample becomes one item: its domain from
`domain` (or `domain_column`), its reference from `reference` (a column or a function of the
sample's columns), its `finish_reason` from the completion ids (`length` when no EOS came before
`max_completion_length`), so that termination penalties apply. An item Proctor did not judge
(`infra_error`, including the call's deadline) or cannot judge (`invalid`) gets `None`.

What TRL 1.16 (`GRPOTrainer._generate_and_score_completions`) does with that `None`: it becomes
NaN, and the reward functions are summed with `nansum`, so beside another reward function the
sample gets that function's reward alone. With Proctor as the only reward function, the sample
is "unscorable": its reward stays NaN, so it is left out of its group's mean and std (`nanmean`,
`nanstd`), and its advantage is set to 0; it is not masked, so its tokens still count in the
loss's normalisation (and in the KL term when `beta` > 0). TRL logs a warning for it. It is not
scored as a wrong answer. `proctor-train --engine trl` (proctor_client.trainer.trl_engine) masks
such samples out of the loss entirely.

Until the function has had one answer from the server, a call that cannot connect at all raises
`ProctorUnreachable` (a wrong URL stops the run at its first step); after that, refusals are
`None` rewards, so a redeployed Proctor does not crash a run.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from proctor_client._async_client import AsyncProctorClient
from proctor_client._loops import PerLoop
from proctor_client._models import ScoreResult
from proctor_client._rows import ReferenceFrom, pick_reference, reward_or_none

__all__ = ["ProctorRewardFunc", "completion_text", "finish_reason", "reward_func"]

_TRAINER_KWARGS = frozenset({"trainer_state", "log_metric", "log_extra", "environments"})
"""Keyword arguments TRL adds that are not dataset columns."""


def completion_text(completion: str | Sequence[Mapping[str, Any]]) -> str:
    """The text to judge: a plain completion as it is; for a conversational one, the assistant
    messages' text (string content, or the text parts of a content list), in order."""
    if isinstance(completion, str):
        return completion
    parts: list[str] = []
    for message in completion:
        if message.get("role", "assistant") != "assistant":
            continue
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts.extend(p["text"] for p in content if p.get("type") == "text" and "text" in p)
    return "\n".join(parts)


def finish_reason(
    ids: Sequence[int], max_completion_length: int, eos_token_ids: frozenset[int]
) -> str:
    """`stop` when generation ended by itself, `length` when it was cut at the limit.

    TRL's completion ids end at the first EOS (kept). Fewer ids than the limit means generation
    stopped (EOS or a stop string); at the limit, it stopped only if the last id is an EOS.
    """
    if len(ids) < max_completion_length:
        return "stop"
    return "stop" if ids and ids[-1] in eos_token_ids else "length"


class ProctorRewardFunc:
    """The callable `reward_func` returns (a class, so that it pickles without its client and
    TRL names it by `__name__`)."""

    def __init__(
        self,
        url: str,
        *,
        domain: str,
        reference: ReferenceFrom,
        domain_column: str | None,
        max_completion_length: int | None,
        eos_token_id: int | Sequence[int] | None,
        spec: str | None,
        api_key: str | None,
        deadline_s: float | None,
        name: str,
        client_options: Mapping[str, Any],
    ) -> None:
        self.url = url
        self.domain = domain
        self.reference = reference
        self.domain_column = domain_column
        self.max_completion_length = max_completion_length
        eos = () if eos_token_id is None else eos_token_id
        self.eos_token_ids = frozenset([eos] if isinstance(eos, int) else eos)
        self.spec = spec
        self.api_key = api_key
        self.deadline_s = deadline_s
        self.__name__ = name
        self.client_options = dict(client_options)
        self._clients: PerLoop[AsyncProctorClient] = PerLoop()
        self.reached = False
        """Whether any call of this function has had an answer from the server (carried over
        to the client of a new event loop, so the unreachable rule holds across loops)."""

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_clients"] = PerLoop()
        return state

    def _new_client(self) -> AsyncProctorClient:
        client = AsyncProctorClient(self.url, api_key=self.api_key, **self.client_options)
        client.reached = self.reached
        return client

    async def aclose(self) -> None:
        """Close this function's connections on the running event loop (TRL's reward loop lives
        as long as the trainer; call this before closing a loop of your own)."""
        client = self._clients.pop()
        if client is not None:
            await client.aclose()

    def items(
        self,
        completions: Sequence[Any],
        completion_ids: Sequence[Sequence[int]] | None,
        columns: Mapping[str, Sequence[Any]],
        step: int | None,
    ) -> list[dict[str, Any]]:
        """One `/v1/score` item per sample (a plain dict: `ScoreItem`'s fields)."""
        items = []
        for i, completion in enumerate(completions):
            row = {key: values[i] for key, values in columns.items()}
            fields: dict[str, Any] = {
                "id": f"{i}" if step is None else f"step{step}-{i}",
                "domain": row[self.domain_column] if self.domain_column else self.domain,
                "response": completion_text(completion),
                "reference": pick_reference(self.reference, row),
            }
            if completion_ids is not None and self.max_completion_length is not None:
                ids = completion_ids[i]
                fields["finish_reason"] = finish_reason(
                    ids, self.max_completion_length, self.eos_token_ids
                )
                fields["response_tokens"] = len(ids)
                fields["max_response_tokens"] = self.max_completion_length
            items.append(fields)
        return items

    async def __call__(
        self,
        prompts: Sequence[Any],
        completions: Sequence[Any],
        completion_ids: Sequence[Sequence[int]] | None = None,
        **kwargs: Any,
    ) -> list[float | None]:
        columns = {k: v for k, v in kwargs.items() if k not in _TRAINER_KWARGS}
        state = kwargs.get("trainer_state")
        step = getattr(state, "global_step", None)
        items = self.items(completions, completion_ids, columns, step)
        client = self._clients.get(self._new_client)
        try:
            results = await client.score(items, spec=self.spec, deadline_s=self.deadline_s)
        finally:
            self.reached = self.reached or client.reached
        _log(results, items, kwargs.get("log_metric"), kwargs.get("log_extra"))
        return [reward_or_none(r) for r in results]


def _log(
    results: Sequence[ScoreResult],
    items: Sequence[dict[str, Any]],
    log_metric: Callable[[str, float], None] | None,
    log_extra: Callable[[str, list[Any]], None] | None,
) -> None:
    """Batch figures to `log_metric` (TRL averages them per logging step), per-sample columns to
    `log_extra` (TRL's completions table)."""
    if log_metric is not None and results:
        ok = [r for r in results if r.status == "ok"]
        n = len(results)
        log_metric("proctor/infra_error_frac", sum(r.status == "infra_error" for r in results) / n)
        log_metric("proctor/invalid_frac", sum(r.status == "invalid" for r in results) / n)
        if ok:
            log_metric("proctor/parse_rate", sum(bool(r.parsed) for r in ok) / len(ok))
            log_metric("proctor/success_rate", sum(bool(r.success) for r in ok) / len(ok))
            for penalty in sorted({p for r in ok for p in r.penalties}):
                log_metric(f"proctor/penalty/{penalty}", sum(penalty in r.penalties for r in ok))
    if log_extra is not None:
        log_extra("proctor_status", [r.status for r in results])
        log_extra("proctor_finish_reason", [i.get("finish_reason") for i in items])
        log_extra(
            "proctor_details",
            [json.dumps(r.error.model_dump() if r.error else r.details) for r in results],
        )


def reward_func(
    url: str,
    *,
    domain: str = "math",
    reference: ReferenceFrom = "answer",
    domain_column: str | None = None,
    max_completion_length: int | None = None,
    eos_token_id: int | Sequence[int] | None = None,
    spec: str | None = None,
    api_key: str | None = None,
    deadline_s: float | None = 600.0,
    name: str = "proctor",
    **client_options: Any,
) -> ProctorRewardFunc:
    """An async TRL reward function scoring each completion on the Proctor server at `url`.

    - `domain`: every sample's domain, unless `domain_column` names a column holding it.
    - `reference`: the column holding the gold data (a mapping is the reference; a plain answer
      becomes `{"answer": value}`), or a function of the sample's columns returning it.
    - `max_completion_length`: the trainer's; with it, each item carries `finish_reason`,
      `response_tokens` and `max_response_tokens`. `eos_token_id` (the tokenizer's, one or
      several) tells a stop on the very last token from a cut.
    - `deadline_s`: how long one call may take; items not back by then get `None`, so a slow
      sandbox never stalls the step.
    - `name`: what TRL calls it in its logs (`rewards/proctor/mean`).
    - `client_options`: passed to `AsyncProctorClient` (`chunk_size`, `max_retries`, ...).
    """
    return ProctorRewardFunc(
        url,
        domain=domain,
        reference=reference,
        domain_column=domain_column,
        max_completion_length=max_completion_length,
        eos_token_id=eos_token_id,
        spec=spec,
        api_key=api_key,
        deadline_s=deadline_s,
        name=name,
        client_options=client_options,
    )
