"""Proctor as a verl 0.9 custom reward function, for its reward loop.

    reward.custom_reward_function.path=pkg://proctor_client.verl
    reward.custom_reward_function.name=compute_score
    +reward.custom_reward_function.reward_kwargs.url=http://proctor:8000

verl calls the async `compute_score(data_source, solution_str, ground_truth, extra_info)` once per
sample, with the config's `reward_kwargs` as further keyword arguments, and awaits many at once;
the calls of one event loop within `linger_s` go to Proctor as one request. The domain comes from
`data_source` (`domains`, then `DATA_SOURCE_DOMAINS`, then `default_domain`); the reference from
`ground_truth` (an object, its JSON text, or a plain gold answer: `{"answer": ...}`).

verl has no way to leave a sample out, so a sample Proctor did not judge (`infra_error`) or could
not judge (`invalid`) is never turned into a number: it is scored again up to `infra_retries`
times, then `compute_score` raises `UnjudgedSample` and the step fails, to be re-run from a
checkpoint. verl's reward loop does not pass the response's length or finish reason, so
termination penalties do not apply here.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Mapping
from typing import Any

from proctor_client._async_client import AsyncProctorClient
from proctor_client._coalesce import Coalescer
from proctor_client._errors import ProctorError
from proctor_client._loops import PerLoop
from proctor_client._models import ScoreItem, ScoreResult
from proctor_client._rows import as_reference

__all__ = ["DATA_SOURCE_DOMAINS", "UnjudgedSample", "aclose", "compute_score", "domain_of"]

DATA_SOURCE_DOMAINS: Mapping[str, str] = {
    "openai/gsm8k": "math",
    "lighteval/MATH": "math",
    "DigitalLearningGmbH/MATH-lighteval": "math",
    "HuggingFaceH4/MATH-500": "math",
    "math_dapo": "math",
    "aime24": "math",
    "aime25": "math",
    "numina_aops_forum": "math",
    "numina_synthetic_math": "math",
    "numina_amc_aime": "math",
    "numina_olympiads": "math",
    "codecontests": "code",
    "apps": "code",
    "codeforces": "code",
    "taco": "code",
    "google/IFEval": "ifeval",
}
"""verl's usual `data_source` names; a data source named after a Proctor domain maps to it."""

PROCTOR_DOMAINS = frozenset({"math", "stem", "code", "puzzle", "ifeval"})


class UnjudgedSample(ProctorError):
    """Proctor could not judge a sample, even after `infra_retries` more tries."""


def domain_of(
    data_source: str, domains: Mapping[str, str] | None, default_domain: str | None
) -> str:
    if domains and data_source in domains:
        return domains[data_source]
    if data_source in DATA_SOURCE_DOMAINS:
        return DATA_SOURCE_DOMAINS[data_source]
    if data_source in PROCTOR_DOMAINS:
        return data_source
    if default_domain is not None:
        return default_domain
    raise ValueError(
        f"no Proctor domain for data_source {data_source!r}: pass "
        "reward_kwargs.domains={data_source: domain} or reward_kwargs.default_domain"
    )


def _reference(ground_truth: Any) -> dict[str, Any] | None:
    if isinstance(ground_truth, str) and ground_truth.lstrip().startswith("{"):
        # A gold answer may start with a brace too (a set): then it stays a string.
        with contextlib.suppress(json.JSONDecodeError):
            ground_truth = json.loads(ground_truth)
    return as_reference(ground_truth)


_coalescers: dict[tuple[Any, ...], PerLoop[Coalescer]] = {}


def _coalescer(
    url: str, api_key: str | None, spec: str | None, linger_s: float, deadline_s: float | None
) -> Coalescer:
    """One per configuration and event loop (verl's reward workers each run their own loop)."""

    def make() -> Coalescer:
        return Coalescer(AsyncProctorClient(url, api_key=api_key), spec, linger_s, 4096, deadline_s)

    per_loop = _coalescers.setdefault((url, api_key, spec, linger_s, deadline_s), PerLoop())
    return per_loop.get(make)


async def aclose() -> None:
    """Close the connections `compute_score` opened on the running event loop (verl's loop
    lives as long as its worker; call this before closing a loop of your own)."""
    for per_loop in list(_coalescers.values()):
        batcher = per_loop.pop()
        if batcher is not None:
            await batcher.client.aclose()


async def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: Mapping[str, Any] | None = None,
    *,
    url: str | None = None,
    api_key: str | None = None,
    spec: str | None = None,
    domains: Mapping[str, str] | None = None,
    default_domain: str | None = None,
    infra_retries: int = 2,
    linger_s: float = 0.02,
    deadline_s: float | None = 600.0,
    **kwargs: Any,
) -> dict[str, float]:
    """`{"score": reward, ...}` for one sample, with Proctor's numbers as extra info
    (`proctor_score`, `proctor_success`, `proctor_parsed`, `proctor_penalty`).

    `url` and `api_key` default to `PROCTOR_URL` and `PROCTOR_API_KEY`. Other keyword arguments
    verl passes (a reward router's address, ...) are accepted and ignored.
    """
    url = url or os.environ.get("PROCTOR_URL")
    if not url:
        raise ValueError("no Proctor URL: set reward_kwargs.url or PROCTOR_URL")
    item = ScoreItem(
        domain=domain_of(data_source, domains, default_domain),
        response=solution_str,
        reference=_reference(ground_truth),
    )
    batcher = _coalescer(
        url, api_key or os.environ.get("PROCTOR_API_KEY"), spec, linger_s, deadline_s
    )
    result: ScoreResult = await batcher.score_one(item)
    for _ in range(infra_retries):
        if result.status != "infra_error":
            break
        result = await batcher.score_one(item)
    if result.status != "ok" or result.reward is None:
        code = result.error.code if result.error else result.status
        reason = result.error.message if result.error else ""
        raise UnjudgedSample(
            f"Proctor did not judge a {item.domain} sample of {data_source!r} "
            f"({result.status}: {code}: {reason}); verl cannot leave it out, and a 0 would bias "
            "its group's advantages",
            detail=result.error,
        )
    return {
        "score": result.reward,
        "proctor_score": result.score if result.score is not None else result.reward,
        "proctor_success": float(bool(result.success)),
        "proctor_parsed": float(bool(result.parsed)),
        "proctor_penalty": sum(result.penalties.values()),
    }
