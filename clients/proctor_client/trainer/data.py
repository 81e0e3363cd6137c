"""Prompts: read from JSONL files, or made by a generator, and drawn by a stage's mixture.

A prompt file has one JSON object a line: `prompt` (the text the model sees), `domain` (a Proctor
domain) and `reference` (that domain's gold data, an object); `id` is optional. A bad row is
refused when the file is read, naming the file and line.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Prompt", "PromptSampler", "load_jsonl"]


@dataclass(frozen=True)
class Prompt:
    """One training or validation prompt and what Proctor needs to judge responses to it."""

    text: str
    domain: str
    reference: dict[str, Any]
    id: str


def _prompt_from_row(row: object, where: str) -> Prompt:
    if not isinstance(row, dict):
        raise ValueError(f"{where}: a row must be a JSON object, got {type(row).__name__}")
    unknown = sorted(set(row) - {"prompt", "domain", "reference", "id"})
    if unknown:
        raise ValueError(f"{where}: unknown fields {unknown}")
    text, domain, reference = row.get("prompt"), row.get("domain"), row.get("reference")
    if not isinstance(text, str) or not text:
        raise ValueError(f"{where}: `prompt` must be a non-empty string")
    if not isinstance(domain, str) or not domain:
        raise ValueError(f"{where}: `domain` must be a non-empty string")
    if not isinstance(reference, dict):
        raise ValueError(f"{where}: `reference` must be an object")
    row_id = row.get("id", where)
    if not isinstance(row_id, str | int):
        raise ValueError(f"{where}: `id` must be a string or an integer")
    return Prompt(text=text, domain=domain, reference=reference, id=str(row_id))


def load_jsonl(path: Path) -> list[Prompt]:
    """Every prompt of a JSONL file (blank lines skipped); the first bad row raises ValueError."""
    prompts: list[Prompt] = []
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{where}: not valid JSON: {exc.msg}") from exc
            prompts.append(_prompt_from_row(row, where))
    if not prompts:
        raise ValueError(f"{path}: no prompts")
    return prompts


class PromptSampler:
    """Draws prompts from named pools by a mixture's weights, with replacement.

    The only randomness is its own `random.Random`, whose state a checkpoint saves, so a resumed
    run draws the same prompts as an uninterrupted one.
    """

    def __init__(self, pools: Mapping[str, Sequence[Prompt]], seed: int) -> None:
        empty = sorted(name for name, pool in pools.items() if not pool)
        if empty:
            raise ValueError(f"data sources with no prompts: {empty}")
        self.pools = dict(pools)
        self.rng = random.Random(seed)

    def sample(self, n: int, mixture: Mapping[str, float]) -> list[Prompt]:
        names = sorted(mixture)
        weights = [mixture[name] for name in names]
        chosen = self.rng.choices(names, weights=weights, k=n)
        return [self.rng.choice(self.pools[name]) for name in chosen]

    def state(self) -> object:
        return self.rng.getstate()

    def set_state(self, state: object) -> None:
        self.rng.setstate(state)  # type: ignore[arg-type]
