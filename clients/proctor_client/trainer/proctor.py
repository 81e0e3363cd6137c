"""The trainer's one seam to Proctor: scoring in the background, and puzzle prompts.

`BackgroundScorer` runs an `AsyncProctorClient` on an event loop in its own thread, so that the
training loop submits a batch, runs the old-policy and reference forward passes meanwhile (torch
releases the GIL), then collects the results.

An item Proctor never answered (the SDK's client-side `infra_error` codes: connection refused
through all its retries, a timeout, a 5xx) pauses the step: it is sent again after a pause, with a
log line saying so, until `max_pauses` is spent, and then the run stops with `ProctorUnreachable`.
A Proctor the client has never reached raises `ProctorUnreachable` at once (the SDK's rule);
`preflight` finds that, an unready server and an unknown spec before the model is built.
An item Proctor answered as `infra_error` (a sandbox crash, a worker lost) is returned as it is;
the loop masks it out of the loss. Neither is ever turned into a reward of 0.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import httpx

from proctor_client import (
    AsyncProctorClient,
    ProctorUnreachable,
    ScoreItem,
    ScoreResult,
    _defaults,
    codes,
)
from proctor_client._loops import LoopThread
from proctor_client.trainer.data import Prompt

__all__ = [
    "UNANSWERED_CODES",
    "BackgroundScorer",
    "PreflightFailed",
    "ProctorUnreachable",
    "Scored",
    "preflight",
    "puzzle_prompts",
]

log = logging.getLogger("proctor_client.trainer")

UNANSWERED_CODES = codes.UNANSWERED_CODES
"""The SDK's codes for an item whose request got no usable answer from the server."""


class PreflightFailed(ValueError):
    """Proctor cannot serve this run (not reachable, not ready, or without a configured spec),
    found before the model is built."""


def preflight(url: str, api_key: str | None, specs: Sequence[str | None]) -> None:
    """Refuse, in seconds and naming the reason, a Proctor that is not reachable at `url`, not
    ready (`/readyz`), or does not know one of `specs` (None: the server's default spec)."""
    headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        with httpx.Client(base_url=url, timeout=10, headers=headers) as http:
            ready = http.get("/readyz")
            if ready.status_code != 200:
                raise PreflightFailed(
                    f"Proctor at {url} is not ready (/readyz answered {ready.status_code}: "
                    f"{ready.text[:300]})"
                )
            listed = http.get("/v1/specs")
    except httpx.HTTPError as exc:
        raise PreflightFailed(
            f"cannot reach Proctor at {url} ({type(exc).__name__}: {exc}); check --url"
        ) from exc
    if listed.status_code != 200:
        raise PreflightFailed(
            f"Proctor at {url} refused /v1/specs with {listed.status_code}: {listed.text[:300]}"
            + (" (set PROCTOR_API_KEY)" if listed.status_code == 401 else "")
        )
    known = {s["name"] for s in listed.json()["specs"]}
    unknown = sorted({s for s in specs if s is not None} - known)
    if unknown:
        raise PreflightFailed(f"Proctor at {url} has no spec {unknown}; it has {sorted(known)}")


@dataclass(frozen=True)
class Scored:
    """One scoring call's results (one per item, in order) and its wall time, pauses included."""

    results: list[ScoreResult]
    seconds: float


class BackgroundScorer:
    """Scores batches on a private event loop thread; `submit` returns a Future of the results."""

    def __init__(
        self,
        url: str,
        *,
        api_key: str | None = None,
        pause_s: float = 10.0,
        max_pauses: int = 30,
        client_retries: int = 5,
        chunk_size: int = _defaults.CHUNK_SIZE,
        max_concurrency: int = _defaults.MAX_CONCURRENCY,
        reached: bool = False,
    ) -> None:
        """`reached`: the server has answered this run already (its preflight), so connection
        failures from the first call on pause the step instead of raising ProctorUnreachable."""
        self.url = url
        self.pause_s = pause_s
        self.max_pauses = max_pauses
        self._loop = LoopThread("scorer")
        opened = self._open(url, api_key, client_retries, chunk_size, max_concurrency)
        self._client = self._loop.run(opened)
        self._client.reached = reached

    async def _open(
        self, url: str, api_key: str | None, retries: int, chunk_size: int, concurrency: int
    ) -> AsyncProctorClient:
        """The client, made on the loop it will run on."""
        return AsyncProctorClient(
            url,
            api_key=api_key,
            max_retries=retries,
            chunk_size=chunk_size,
            max_concurrency=concurrency,
        )

    def submit(self, items: Sequence[ScoreItem], spec: str | None) -> Future[Scored]:
        """Start scoring `items` under `spec` (None: the server's default spec)."""
        return self._loop.submit(self._timed(list(items), spec))

    async def _timed(self, items: list[ScoreItem], spec: str | None) -> Scored:
        began = time.perf_counter()
        results = await self._score(items, spec)
        return Scored(results, time.perf_counter() - began)

    async def _score(self, items: list[ScoreItem], spec: str | None) -> list[ScoreResult]:
        results = await self._client.score(items, spec=spec)
        for pause in range(1, self.max_pauses + 1):
            unanswered = [i for i, r in enumerate(results) if _unanswered(r)]
            if not unanswered:
                return results
            first = results[unanswered[0]].error
            log.warning(
                "Proctor at %s did not answer %d of %d items (%s); the step is paused, "
                "retry %d of %d in %.0f s",
                self.url,
                len(unanswered),
                len(items),
                f"{first.code}: {first.message}" if first else "no error",
                pause,
                self.max_pauses,
                self.pause_s,
            )
            await asyncio.sleep(self.pause_s)
            again = await self._client.score([items[i] for i in unanswered], spec=spec)
            for i, result in zip(unanswered, again, strict=True):
                results[i] = result
        if any(_unanswered(r) for r in results):
            raise ProctorUnreachable(
                f"Proctor at {self.url} did not answer after {self.max_pauses} pauses of "
                f"{self.pause_s} s; the run stops here and resumes from its last checkpoint"
            )
        return results

    def close(self) -> None:
        self._loop.run(self._client.aclose())
        self._loop.stop(timeout_s=30)


def _unanswered(result: ScoreResult) -> bool:
    return (
        result.status == "infra_error"
        and result.error is not None
        and result.error.code in UNANSWERED_CODES
    )


def puzzle_prompts(
    url: str, task: str, config: dict[str, Any] | None, count: int, seed: int
) -> list[Prompt]:
    """`count` entries of a Reasoning Gym task from Proctor's `/v1/puzzles/{task}/sample`.

    The SDK has no call for this route yet; this is its only direct HTTP request. A config
    without `size` gets `count`: a Reasoning Gym dataset holds its `size` entries (500 unless
    said), and an index past it is refused.
    """
    prompts: list[Prompt] = []
    config = {"size": count, **(config or {})}
    with httpx.Client(base_url=url, timeout=120) as http:
        while len(prompts) < count:
            body = {"config": config, "seed": seed, "count": min(256, count - len(prompts))}
            body["start"] = len(prompts)
            reply = http.post(f"/v1/puzzles/{task}/sample", json=body)
            if reply.status_code != 200:
                raise ValueError(
                    f"puzzle task {task!r}: Proctor answered {reply.status_code}: "
                    f"{reply.text[:500]}"
                )
            for entry in reply.json()["entries"]:
                prompts.append(
                    Prompt(
                        text=entry["question"],
                        domain="puzzle",
                        reference=entry["reference"],
                        id=f"{task}-{seed}-{entry['index']}",
                    )
                )
    return prompts
