"""Synthetic generations for the evaluator's tests: prompts whose success counts are set exactly,
so every statistic of a study has a known value."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

CHOICES = ["red", "green", "blue", "yellow"]


def math_row(prompt: str, sample: int, model: str, outcome: str, **extra: Any) -> dict[str, Any]:
    """A math row whose response is correct, wrong (parsed) or unparsed (no answer)."""
    answer = 10 + int(prompt.split("-")[-1])
    response = {
        "correct": f"<think>adding up</think> so the answer is \\boxed{{{answer}}}",
        "wrong": f"<think>adding up</think> so the answer is \\boxed{{{answer + 1}}}",
        "unparsed": "<think>adding up</think> I am not sure.",
    }[outcome]
    return {
        "prompt_id": prompt,
        "sample": sample,
        "model": model,
        "domain": "math",
        "reference": {"answer": str(answer)},
        "response": response,
        **extra,
    }


def choice_row(prompt: str, sample: int, model: str, correct: bool) -> dict[str, Any]:
    """A four-option multiple-choice STEM row; the gold answer is B."""
    letter = "B" if correct else "D"
    return {
        "prompt_id": prompt,
        "sample": sample,
        "model": model,
        "domain": "stem",
        "task_family": "colours",
        "reference": {"answer": "B", "choices": CHOICES},
        "response": f"The answer is \\boxed{{{letter}}}",
    }


def rows_with_counts(
    counts: Mapping[str, Mapping[str, int]], samples: int = 16
) -> list[dict[str, Any]]:
    """Per model and prompt ("m-3" math, "s-1" multiple choice), `c` successes out of
    `samples`; a math failure alternates between a wrong answer and no answer."""
    rows = []
    for model, prompts in counts.items():
        for prompt, c in prompts.items():
            for sample in range(samples):
                won = sample < c
                if prompt.startswith("s-"):
                    rows.append(choice_row(prompt, sample, model, won))
                else:
                    outcome = "correct" if won else ("wrong" if sample % 2 else "unparsed")
                    rows.append(math_row(prompt, sample, model, outcome))
    return rows


def two_models() -> dict[str, dict[str, int]]:
    """ "sharpened" solves easy prompts reliably and hard ones never; "expanded" is less reliable
    but reaches five hard prompts; three prompts only "sharpened" reaches; two nobody does."""
    sharpened: dict[str, int] = {}
    expanded: dict[str, int] = {}
    for i in range(10):
        sharpened[f"m-{i}"], expanded[f"m-{i}"] = 15, 8
    for i in range(10, 15):
        sharpened[f"m-{i}"], expanded[f"m-{i}"] = 0, 2
    for i in range(15, 18):
        sharpened[f"m-{i}"], expanded[f"m-{i}"] = 1, 0
    for i in range(18, 20):
        sharpened[f"m-{i}"], expanded[f"m-{i}"] = 0, 0
    for i in range(8):
        sharpened[f"s-{i}"], expanded[f"s-{i}"] = 12, 6
    return {"sharpened": sharpened, "expanded": expanded}


def write_jsonl(path: Path, rows: Iterable[Mapping[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path
