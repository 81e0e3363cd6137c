"""Scoring a study's rows against a running Proctor service, through the SDK's `ProctorClient`.

The spec's hash (what scored.jsonl reuse is keyed on) comes from the service's `GET /v1/specs`;
results are the service's own, with the fields `proctor score` writes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx

from proctor_client import ProctorClient, ProctorError
from proctor_client.evaluation.rows import Generation
from proctor_client.evaluation.scoring import Progress, Result, SpecSummary, item_fields

__all__ = ["RemoteScorer"]

CHUNK = 2048
"""Rows per `ProctorClient.score` call; the client splits them further into its own chunks."""


def fetch_spec(
    url: str, name: str, api_key: str | None, transport: httpx.BaseTransport | None = None
) -> SpecSummary:
    """The named spec as the service describes it, or `ProctorError` if it has no such spec."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    with httpx.Client(base_url=url, headers=headers, transport=transport, timeout=60.0) as http:
        response = http.get("/v1/specs")
    if response.status_code == 401:
        given = "was refused" if api_key else "is needed"
        raise ProctorError(
            f"GET {url}/v1/specs answered 401: an API key {given}; "
            "pass --api-key KEY or set PROCTOR_API_KEY",
            401,
        )
    if response.status_code != 200:
        raise ProctorError(
            f"GET {url}/v1/specs answered {response.status_code}", response.status_code
        )
    specs: list[dict[str, Any]] = response.json()["specs"]
    for spec in specs:
        if spec["name"] == name:
            return SpecSummary(spec["name"], spec["version"], spec["hash"], spec["parameters"])
    known = ", ".join(sorted(s["name"] for s in specs))
    raise ProctorError(f"the service at {url} has no spec {name!r}; it has: {known}")


class RemoteScorer:
    def __init__(
        self,
        url: str,
        spec_name: str,
        api_key: str | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._spec = fetch_spec(url, spec_name, api_key, transport)
        self._client = ProctorClient(url, api_key=api_key, transport=transport)

    @property
    def spec(self) -> SpecSummary:
        return self._spec

    def score(self, rows: Sequence[Generation], progress: Progress) -> list[Result]:
        results: list[Result] = []
        for start in range(0, len(rows), CHUNK):
            chunk = rows[start : start + CHUNK]
            scored = self._client.score([item_fields(r) for r in chunk], spec=self._spec.name)
            results += [r.model_dump(mode="json") for r in scored]
            progress(len(chunk))
        return results

    def close(self) -> None:
        self._client.close()
