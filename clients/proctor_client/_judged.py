"""What the integrations whose framework cannot leave a sample out share (verl, SkyRL-gym,
verifiers): samples scored one at a time but sent together (`coalescer`), a sample tried again
on `infra_error`, and an exception, never a 0, for one Proctor did not or could not judge."""

from __future__ import annotations

from typing import Any

from proctor_client._async_client import AsyncProctorClient
from proctor_client._coalesce import Coalescer
from proctor_client._errors import ProctorError
from proctor_client._loops import PerLoop
from proctor_client._models import ScoreItem, ScoreResult

__all__ = ["UnjudgedSample", "aclose", "coalescer", "judged", "numbers"]


class UnjudgedSample(ProctorError):
    """Proctor could not judge a sample, even after `infra_retries` more tries."""


_coalescers: dict[tuple[Any, ...], PerLoop[Coalescer]] = {}


def coalescer(
    url: str, api_key: str | None, spec: str | None, linger_s: float, deadline_s: float | None
) -> Coalescer:
    """One per configuration and event loop (verl's reward workers each run their own loop)."""

    def make() -> Coalescer:
        return Coalescer(AsyncProctorClient(url, api_key=api_key), spec, linger_s, 4096, deadline_s)

    per_loop = _coalescers.setdefault((url, api_key, spec, linger_s, deadline_s), PerLoop())
    return per_loop.get(make)


async def aclose() -> None:
    """Close the connections the coalescers opened on the running event loop."""
    for per_loop in list(_coalescers.values()):
        batcher = per_loop.pop()
        if batcher is not None:
            await batcher.client.aclose()


async def judged(
    batcher: Coalescer, item: ScoreItem, infra_retries: int, what: str, framework: str
) -> tuple[ScoreResult, float]:
    """`item`'s result and reward, sent again up to `infra_retries` times while it is
    `infra_error`; `UnjudgedSample` if it is still not `ok` (`what` names the sample)."""
    result = await batcher.score_one(item)
    for _ in range(infra_retries):
        if result.status != "infra_error":
            break
        result = await batcher.score_one(item)
    if result.status != "ok" or result.reward is None:
        code = result.error.code if result.error else result.status
        reason = result.error.message if result.error else ""
        raise UnjudgedSample(
            f"Proctor did not judge {what} ({result.status}: {code}: {reason}); {framework} "
            "cannot leave it out, and a 0 would bias its group's advantages",
            detail=result.error,
        )
    return result, result.reward


def numbers(result: ScoreResult) -> dict[str, float]:
    """Proctor's figures for a judged sample, for a framework's metrics or extra info."""
    return {
        "proctor_score": result.score if result.score is not None else (result.reward or 0.0),
        "proctor_success": float(bool(result.success)),
        "proctor_parsed": float(bool(result.parsed)),
        "proctor_penalty": sum(result.penalties.values()),
    }
