"""The pre-registered review sample: successful responses drawn for a reading of their reasoning,
and the reviewers' labels read back.

A lucky guess on a short answer passes the verifier; only reading the reasoning tells. The draw is
fixed before anyone looks: per model, `size` successful rows uniformly without replacement, from a
seeded generator over the rows sorted by key (so file order cannot change it); optionally
(`--review-stratify only-one`) first from prompts solved only by some models, where the claim
rests. The sample is blinded: models appear as codes, lines in an opaque order, and the key
(code -> model, review id -> row) is in DIR/review_key.json, to be kept from the reviewers. Each
line shows the question (`prompt`) when the rows carry it. The first export
writes DIR/review_protocol.json (the seed, the size, how many successes each model had, the spec
hash and a SHA-256 of the sample file); later runs keep that sample and refuse other parameters,
so the sample cannot be redrawn until it looks better. Labels come back as the same JSONL with
`label` set to "correct" or "incorrect" (true/false); a label for a row outside the registered
sample is refused.

Unless every success was reviewed, verified pass@k is bracketed: the low end counts only successes
judged correct, the high end all successes but those judged incorrect.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from proctor_client.evaluation.rows import RowKey
from proctor_client.evaluation.scoring import SpecSummary
from proctor_client.evaluation.store import ScoredRow

__all__ = [
    "KEY_FILE",
    "PROTOCOL_FILE",
    "SAMPLE_FILE",
    "Labels",
    "ReviewError",
    "draw",
    "export",
    "read_labels",
]

SAMPLE_FILE = "review_sample.jsonl"
PROTOCOL_FILE = "review_protocol.json"
KEY_FILE = "review_key.json"
"""The blinding key: which model each code stands for. Keep it from the reviewers."""


class ReviewError(ValueError):
    """The review sample or its labels do not match what was pre-registered."""


@dataclass(frozen=True)
class Labels:
    verdicts: dict[RowKey, bool]
    """Per reviewed row, whether its reasoning was judged correct."""
    sampled: dict[str, int]
    """Per model, how many rows the registered sample holds."""

    def low(self, key: RowKey, success: bool) -> bool:
        """Counts a success only when its reasoning was judged correct."""
        return success and self.verdicts.get(key) is True

    def high(self, key: RowKey, success: bool) -> bool:
        """Counts every success but those judged incorrect."""
        return success and self.verdicts.get(key) is not False


def _review_id(key: RowKey) -> str:
    """An opaque id (a digest of the row's key): it does not name the model."""
    seed = "" if key.seed is None else str(key.seed)
    text = f"{key.model}\x00{key.prompt_id}\x00{key.sample}\x00{seed}"
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def _codes(models: Sequence[str], seed: int) -> dict[str, str]:
    """model -> "model-1", "model-2", ... in an order drawn from the review seed."""
    order = np.random.default_rng([seed, 1]).permutation(len(models))
    return {models[i]: f"model-{rank + 1}" for rank, i in enumerate(order)}


def only_one_prompts(scored: Sequence[ScoredRow], successful: Sequence[bool]) -> set[str]:
    """Prompts some model solved and another, judged on it, never did: where a claim of
    "solved only by" rests."""
    solved: dict[str, set[str]] = {}
    judged: dict[str, set[str]] = {}
    for entry, won in zip(scored, successful, strict=True):
        judged.setdefault(entry.row.prompt_id, set()).add(entry.row.model)
        if won:
            solved.setdefault(entry.row.prompt_id, set()).add(entry.row.model)
    return {p for p, models in solved.items() if models != judged[p]}


def draw(
    scored: Sequence[ScoredRow],
    size: int,
    seed: int,
    successful: Sequence[bool],
    stratify: bool = False,
) -> dict[str, list[ScoredRow]]:
    """Per model, `size` of its successful rows (all of them if it has fewer). With `stratify`,
    first from the prompts solved only by some models (`only_one_prompts`), uniformly among
    them, and only then from the rest."""
    if size < 1:
        raise ValueError("the review size must be at least 1")
    by_model: dict[str, list[ScoredRow]] = {}
    for entry, won in zip(scored, successful, strict=True):
        if won:
            by_model.setdefault(entry.row.model, []).append(entry)
    drawn: dict[str, list[ScoredRow]] = {}
    for model, rows in by_model.items():
        rows.sort(key=lambda e: (e.row.prompt_id, e.row.sample, str(e.row.seed)))
        rng = np.random.default_rng([seed, zlib.crc32(model.encode())])
        if stratify:
            aimed = only_one_prompts(scored, successful)
            first = [r for r in rows if r.row.prompt_id in aimed]
            rest = [r for r in rows if r.row.prompt_id not in aimed]
            picks_first = rng.choice(len(first), size=min(size, len(first)), replace=False)
            left = size - len(picks_first)
            picks_rest = rng.choice(len(rest), size=min(left, len(rest)), replace=False)
            drawn[model] = [first[i] for i in sorted(picks_first)] + [
                rest[i] for i in sorted(picks_rest)
            ]
            continue
        picks = rng.choice(len(rows), size=min(size, len(rows)), replace=False)
        drawn[model] = [rows[i] for i in sorted(picks)]
    return drawn


def _sample_line(entry: ScoredRow, code: str) -> dict[str, Any]:
    row = entry.row
    return {
        "review_id": _review_id(row.key),
        "model": code,
        "prompt_id": row.prompt_id,
        "sample": row.sample,
        "domain": row.domain,
        "task_family": row.family,
        "prompt": row.prompt,
        "reference": row.reference,
        "response": row.response,
        "verifier": entry.result.get("details", {}),
        "label": None,
        "note": "",
    }


def _key_json(key: RowKey) -> dict[str, Any]:
    return {"prompt_id": key.prompt_id, "sample": key.sample, "model": key.model, "seed": key.seed}


def export(
    out_dir: Path,
    drawn: dict[str, list[ScoredRow]],
    size: int,
    seed: int,
    successes: dict[str, int],
    spec: SpecSummary,
    stratify: bool = False,
) -> Path:
    """Write the blinded sample, its key and its protocol, or check them against an earlier
    registration. Lines are ordered by their opaque review id, so models do not come in blocks;
    the sample names models by code only (the seed's own tie to a model is left out too)."""
    protocol_path, sample_path = out_dir / PROTOCOL_FILE, out_dir / SAMPLE_FILE
    codes = _codes(sorted(drawn), seed)
    entries = [(_review_id(e.row.key), e, codes[m]) for m in sorted(drawn) for e in drawn[m]]
    entries.sort(key=lambda t: t[0])
    text = "".join(json.dumps(_sample_line(e, code)) + "\n" for _, e, code in entries)
    digest = hashlib.sha256(text.encode()).hexdigest()
    if protocol_path.exists():
        registered = json.loads(protocol_path.read_text(encoding="utf-8"))
        if (registered["seed"], registered["size_per_model"]) != (seed, size):
            raise ReviewError(
                f"{protocol_path} registered seed {registered['seed']} and size "
                f"{registered['size_per_model']}; a review sample is drawn once (delete the "
                "protocol to register a new one, and say so in the study)"
            )
        if registered["sample_sha256"] != digest:
            raise ReviewError(
                f"the successful rows changed since {protocol_path} was registered (another "
                "spec or other generations): the registered sample no longer describes them"
            )
        return sample_path
    sample_path.write_text(text, encoding="utf-8")
    key = {
        "codes": {code: model for model, code in codes.items()},
        "rows": {rid: _key_json(e.row.key) for rid, e, _ in entries},
    }
    (out_dir / KEY_FILE).write_text(json.dumps(key, indent=2) + "\n", encoding="utf-8")
    protocol = {
        "seed": seed,
        "size_per_model": size,
        "blinded": True,
        "stratify": "only-one" if stratify else None,
        "rule": "per model, uniform without replacement among successful rows sorted by "
        "(prompt_id, sample, seed)"
        + (
            ", first among rows of prompts some model solved and another never did"
            if stratify
            else ""
        ),
        "successes": successes,
        "sampled": {model: len(rows) for model, rows in sorted(drawn.items())},
        "spec": {"name": spec.name, "version": spec.version, "hash": spec.hash},
        "sample_sha256": digest,
        "registered_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    protocol_path.write_text(json.dumps(protocol, indent=2) + "\n", encoding="utf-8")
    return sample_path


_LABELS = {"correct": True, "incorrect": False, True: True, False: False}


def read_labels(labels_path: Path, out_dir: Path) -> Labels:
    """The labels of `labels_path`, checked against the sample registered in `out_dir`."""
    sample_path, key_path = out_dir / SAMPLE_FILE, out_dir / KEY_FILE
    if not (out_dir / PROTOCOL_FILE).exists() or not sample_path.exists():
        raise ReviewError(f"no registered review sample in {out_dir}; export one first")
    if not key_path.exists():
        raise ReviewError(f"{key_path} (the blinding key) is missing; labels cannot be unblinded")
    rows = json.loads(key_path.read_text(encoding="utf-8"))["rows"]
    registered: dict[str, RowKey] = {}
    sampled: dict[str, int] = {}
    for line in sample_path.read_text(encoding="utf-8").splitlines():
        review_id = json.loads(line)["review_id"]
        k = rows[review_id]
        key = RowKey(k["prompt_id"], k["sample"], k["model"], k["seed"])
        registered[review_id] = key
        sampled[key.model] = sampled.get(key.model, 0) + 1
    verdicts: dict[RowKey, bool] = {}
    with labels_path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            entry = json.loads(line)
            review_id, label = entry.get("review_id"), entry.get("label")
            if review_id not in registered:
                raise ReviewError(
                    f"{labels_path} line {number}: {review_id!r} is not in the registered sample"
                )
            if label is None:
                continue  # not reviewed (yet)
            if label not in _LABELS:
                raise ReviewError(
                    f"{labels_path} line {number}: label must be 'correct' or 'incorrect', "
                    f"not {label!r}"
                )
            verdicts[registered[review_id]] = _LABELS[label]
    return Labels(verdicts, sampled)
