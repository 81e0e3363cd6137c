"""DIR/scored.jsonl: every scored row with the spec that judged it, so statistics can be re-run
without re-scoring.

A line holds the row's key, a digest of what the scorer read of the row (domain, response,
reference, length fields), the spec's name, version and hash, and the result. A stored result is
reused only for a row with the same key and digest under a spec with the same hash (the hash
covers every parameter and verifier library version that can change a reward); `infra_error`
results are never reused, so a re-run retries them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from proctor_client.evaluation.rows import Generation, RowKey
from proctor_client.evaluation.scoring import Result, SpecSummary, item_fields

__all__ = ["SCORED_FILE", "ScoredRow", "load_reusable", "row_digest", "split_reuse", "write_scored"]

SCORED_FILE = "scored.jsonl"


@dataclass(frozen=True, slots=True)
class ScoredRow:
    row: Generation
    result: Result


def row_digest(row: Generation) -> str:
    text = json.dumps(item_fields(row), sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def _key_json(key: RowKey) -> dict[str, Any]:
    return {"prompt_id": key.prompt_id, "sample": key.sample, "model": key.model, "seed": key.seed}


def load_reusable(path: Path, spec_hash: str) -> dict[tuple[RowKey, str], Result]:
    """Stored results under `spec_hash` that may stand for a fresh scoring, by (key, digest).
    A missing file is an empty store; an unreadable line is ignored (it is re-scored)."""
    reusable: dict[tuple[RowKey, str], Result] = {}
    if not path.exists():
        return reusable
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            try:
                entry = json.loads(line)
                if entry["spec"]["hash"] != spec_hash or entry["result"]["status"] == "infra_error":
                    continue
                k = entry["key"]
                key = RowKey(k["prompt_id"], k["sample"], k["model"], k["seed"])
                reusable[(key, entry["digest"])] = entry["result"]
            except (json.JSONDecodeError, KeyError, TypeError):
                continue
    return reusable


def write_scored(path: Path, spec: SpecSummary, scored: Iterable[ScoredRow]) -> None:
    """Write every scored row (replacing the file, through a temporary one)."""
    summary = {"name": spec.name, "version": spec.version, "hash": spec.hash}
    partial = path.with_suffix(".jsonl.partial")
    with partial.open("w", encoding="utf-8") as out:
        for entry in scored:
            line = {
                "key": _key_json(entry.row.key),
                "digest": row_digest(entry.row),
                "spec": summary,
                "result": entry.result,
            }
            out.write(json.dumps(line, separators=(",", ":")) + "\n")
    partial.replace(path)


def split_reuse(
    rows: Sequence[Generation], reusable: dict[tuple[RowKey, str], Result]
) -> tuple[list[Result | None], list[int]]:
    """Per row its stored result (or None), and the positions still to be scored."""
    results: list[Result | None] = []
    missing: list[int] = []
    for position, row in enumerate(rows):
        result = reusable.get((row.key, row_digest(row)))
        results.append(result)
        if result is None:
            missing.append(position)
    return results, missing
