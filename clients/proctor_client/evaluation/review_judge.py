"""Model-assisted review: the registered review sample labelled by a judge model.

`proctor-eval --review-judge SPEC` sends each line of the registered, blinded sample
(review.SAMPLE_FILE: models as codes, no key) through the service's judge path under SPEC, as a
judge *review* item: `{"domain": "judge", "response": RESPONSE, "reference": {"question":
PROMPT, "answer": REFERENCE, "reasoning": RESPONSE}}`. The spec's `review_template` asks whether
the reasoning supports the response's final answer (reward_specs.judge.domain); the reasoning
travels in the reference because the spec's `strip_reasoning` would remove a `<think>` block from
the response. Against `--url` the service scores them, in-process the same judge domain does
(its endpoints from `PROCTOR_JUDGE_ENDPOINTS`).

A judge's yes labels a line "correct", its no "incorrect"; a line the judge did not label (no
extractable answer, an `infra_error`, an invalid item) stays unlabelled, counted by reason, never
read as either. The labels are written as review_judge_labels.jsonl in the labels format, read
back by `review.read_labels` like a reviewer's, and the judge spec's name, version and hash are
recorded in review_protocol.json: one judge per registered sample, as one seed (delete its
`judge` entry to register another, and say so in the study).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from proctor_client.evaluation.review import (
    PROTOCOL_FILE,
    SAMPLE_FILE,
    Labels,
    ReviewError,
    read_labels,
)
from proctor_client.evaluation.rows import Generation
from proctor_client.evaluation.scoring import Result, RowScorer, SpecSummary

__all__ = [
    "JUDGE_LABELS_FILE",
    "Agreement",
    "JudgeLabels",
    "agreement",
    "cohens_kappa",
    "judge_rows",
    "label_sample",
]

JUDGE_LABELS_FILE = "review_judge_labels.jsonl"


@dataclass(frozen=True)
class JudgeLabels:
    spec: SpecSummary
    labels: Labels
    unlabelled: dict[str, int]
    """Lines the judge did not label, by reason (`no_answer`, an error code)."""


@dataclass(frozen=True)
class Agreement:
    """Human and judge labels on the rows both labelled."""

    table: tuple[tuple[int, int], tuple[int, int]]
    """[[both correct, human correct / judge incorrect], [human incorrect / judge correct,
    both incorrect]]."""
    kappa: float | None
    """Cohen's kappa; None when it is undefined (both raters gave one label only, alike)."""

    @property
    def rows(self) -> int:
        return sum(map(sum, self.table))


def cohens_kappa(table: Sequence[Sequence[int]]) -> float | None:
    """Cohen's kappa of a square agreement table (rows: rater A's labels, columns: rater B's):
    (p_o - p_e) / (1 - p_e); None when p_e is 1 (no disagreement is possible by chance either)."""
    n = sum(sum(r) for r in table)
    if n == 0:
        return None
    observed = sum(table[i][i] for i in range(len(table))) / n
    rows = [sum(r) / n for r in table]
    columns = [sum(r[j] for r in table) / n for j in range(len(table))]
    expected = sum(a * b for a, b in zip(rows, columns, strict=True))
    if expected >= 1.0:
        return None
    return (observed - expected) / (1.0 - expected)


def agreement(human: Labels, judge: Labels) -> Agreement | None:
    """The agreement table and kappa over rows both labelled; None when there are none."""
    both = [k for k in human.verdicts if k in judge.verdicts]
    if not both:
        return None
    cell = [[0, 0], [0, 0]]
    for key in both:
        cell[0 if human.verdicts[key] else 1][0 if judge.verdicts[key] else 1] += 1
    table = ((cell[0][0], cell[0][1]), (cell[1][0], cell[1][1]))
    return Agreement(table, cohens_kappa(table))


def _question(prompt: Any) -> str:
    if isinstance(prompt, str) and prompt.strip():
        return prompt
    if isinstance(prompt, list) and prompt:
        return "\n\n".join(
            f"{turn.get('role', 'user')}: {turn.get('content', '')}" for turn in prompt
        )
    raise ReviewError(
        "--review-judge needs the question: the review sample's rows carry no `prompt`"
    )


def _reference_text(reference: Any) -> str:
    answer = reference.get("answer") if isinstance(reference, dict) else None
    if isinstance(answer, str | int | float) and str(answer).strip():
        return str(answer)
    return json.dumps(reference, sort_keys=True)


def judge_rows(out_dir: Path) -> tuple[list[str], list[Generation]]:
    """The registered sample's review ids, and each line as a judge review row (blinded: the
    model is its code)."""
    sample_path = out_dir / SAMPLE_FILE
    if not (out_dir / PROTOCOL_FILE).exists() or not sample_path.exists():
        raise ReviewError(f"no registered review sample in {out_dir}; export one first")
    ids: list[str] = []
    rows: list[Generation] = []
    for line in sample_path.read_text(encoding="utf-8").splitlines():
        entry = json.loads(line)
        ids.append(entry["review_id"])
        reference = {
            "question": _question(entry.get("prompt")),
            "answer": _reference_text(entry.get("reference")),
            "reasoning": entry["response"],
        }
        rows.append(
            Generation(
                prompt_id=entry["prompt_id"],
                sample=entry["sample"],
                domain="judge",
                reference=reference,
                response=entry["response"],
                model=entry["model"],
            )
        )
    return ids, rows


def _label(result: Result) -> tuple[bool | None, str]:
    if result.get("status") != "ok":
        error = result.get("error") or {}
        return None, str(error.get("code") or result.get("status"))
    if not result.get("parsed"):
        return None, str((result.get("details") or {}).get("reason") or "not_parsed")
    return bool(result.get("success")), ""


def _register(out_dir: Path, spec: SpecSummary) -> None:
    path = out_dir / PROTOCOL_FILE
    protocol = json.loads(path.read_text(encoding="utf-8"))
    judge = {"name": spec.name, "version": spec.version, "hash": spec.hash}
    registered = protocol.get("judge")
    if registered is not None and registered["hash"] != spec.hash:
        raise ReviewError(
            f"{path} registered the judge spec {registered['name']} ({registered['hash']}); "
            "a sample is judged by one judge (delete its `judge` entry to register another, "
            "and say so in the study)"
        )
    if registered is None:
        protocol["judge"] = judge
        path.write_text(json.dumps(protocol, indent=2) + "\n", encoding="utf-8")


def label_sample(out_dir: Path, scorer: RowScorer, spec: SpecSummary) -> JudgeLabels:
    """Label the registered sample by the judge spec `spec` through `scorer`, record the spec in
    the protocol, write the labels file and read it back as a reviewer's."""
    ids, rows = judge_rows(out_dir)
    _register(out_dir, spec)
    results = scorer.score(rows, lambda _: None)
    unlabelled: dict[str, int] = {}
    lines = []
    for review_id, result in zip(ids, results, strict=True):
        label, reason = _label(result)
        if label is None:
            unlabelled[reason] = unlabelled.get(reason, 0) + 1
        judge = (result.get("details") or {}).get("judge")
        lines.append(
            {
                "review_id": review_id,
                "label": None if label is None else ("correct" if label else "incorrect"),
                "unlabelled": reason or None,
                "verdict": judge.get("verdict") if isinstance(judge, dict) else None,
                "reply": judge.get("reply") if isinstance(judge, dict) else None,
            }
        )
    path = out_dir / JUDGE_LABELS_FILE
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return JudgeLabels(spec, read_labels(path, out_dir), unlabelled)
