"""Scoring a study's rows: one small protocol, two implementations.

`proctor_client.local.LocalScorer` scores in-process through the service (the server package,
installed beside it); `remote.RemoteScorer` asks a running service. Both give, for every row, the
result object the service gives for the same item and spec.

A result is a plain JSON object (what scored.jsonl stores): `status`, `reward`, `score`,
`success`, `parsed`, `penalties`, `details`, `error`, `elapsed_ms`, and `id` (always null here).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from proctor_client import _defaults
from proctor_client.evaluation.rows import Generation

__all__ = [
    "DEFAULT_SPEC",
    "Progress",
    "Result",
    "RowScorer",
    "SpecSummary",
    "item_fields",
]

DEFAULT_SPEC = _defaults.DEFAULT_SPEC
"""The spec used when none is named: the trainer's default too (`proctor_client._defaults`)."""

Result = dict[str, Any]
Progress = Callable[[int], None]


@dataclass(frozen=True)
class SpecSummary:
    name: str
    version: str
    hash: str
    parameters: dict[str, Any]


class RowScorer(Protocol):
    """What the evaluator needs of a scorer: the spec it judges under, and results in order."""

    @property
    def spec(self) -> SpecSummary: ...

    def score(self, rows: Sequence[Generation], progress: Progress) -> list[Result]:
        """One result per row, in order; `progress(m)` after each m more rows are done."""
        ...

    def close(self) -> None: ...


def item_fields(row: Generation) -> dict[str, Any]:
    """The `/v1/score` item of a row: everything a scorer reads, nothing else."""
    item: dict[str, Any] = {"domain": row.domain, "response": row.response}
    item["reference"] = row.reference
    for name in ("finish_reason", "response_tokens", "max_response_tokens"):
        value = getattr(row, name)
        if value is not None:
            item[name] = value
    return item
