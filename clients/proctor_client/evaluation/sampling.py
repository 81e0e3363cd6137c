"""What both `proctor-eval sample` backends share: the prompts file, the decoding settings, the
row they write, and the output file they append to and resume from.

A prompt is either text (`"prompt": "..."`) or a chat (`"prompt": [{"role": "user", "content":
"..."}, ...]`). The output is append-only: a re-run with the same settings skips the
`(prompt_id, sample)` keys already written and appends the rest. A line cut short by a crash
(the file's last line, without its newline) is dropped before appending; any other bad line, or
rows written under other settings, model or seed label, stop the run with the reason, since
one file must hold one sampling run.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from proctor_client.evaluation.rows import Generation

__all__ = [
    "ChatMessage",
    "Decoding",
    "Output",
    "Prompt",
    "RunFacts",
    "SampleError",
    "make_row",
    "open_output",
    "read_prompts",
]


class SampleError(Exception):
    """A problem the user can fix (a bad file, an unreachable server): one line, exit 2."""


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    role: Literal["system", "user", "assistant"]
    content: str


class Prompt(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    prompt_id: str = Field(..., min_length=1)
    prompt: str | list[ChatMessage] = Field(..., description="text, or a chat (a list of turns)")
    domain: str = Field(..., min_length=1)
    reference: dict[str, Any]
    task_family: str | None = None

    @property
    def is_chat(self) -> bool:
        return not isinstance(self.prompt, str)

    def messages(self) -> list[dict[str, str]]:
        """The prompt as chat turns (text becomes one user turn)."""
        if isinstance(self.prompt, str):
            return [{"role": "user", "content": self.prompt}]
        return [m.model_dump() for m in self.prompt]

    def shown(self) -> str | list[dict[str, str]]:
        """The row's `prompt`: the text, or the turns."""
        return self.prompt if isinstance(self.prompt, str) else self.messages()


@dataclass(frozen=True)
class Decoding:
    temperature: float = 0.6
    top_p: float = 0.95
    max_new_tokens: int = 1024
    rng_seed: int = 0
    top_k: int | None = None
    """None: no top-k (transformers' own default of 50 is switched off, as is the model's)."""
    repetition_penalty: float | None = None
    """None: no penalty (1.0), whatever the model's generation config sets."""

    def requested(self) -> dict[str, Any]:
        """What was asked for (None: not asked)."""
        return {
            "temperature": self.temperature,
            "top_p": self.top_p,
            "top_k": self.top_k,
            "repetition_penalty": self.repetition_penalty,
            "max_new_tokens": self.max_new_tokens,
            "rng_seed": self.rng_seed,
        }

    def explicit(self) -> dict[str, Any]:
        """Every sampling setting for `generate`, so nothing comes from a default."""
        return {
            "do_sample": True,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "top_k": 0 if self.top_k is None else self.top_k,  # 0 switches the warper off
            "repetition_penalty": 1.0
            if self.repetition_penalty is None
            else self.repetition_penalty,
            "max_new_tokens": self.max_new_tokens,
        }


def read_prompts(path: Path) -> list[Prompt]:
    prompts = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            prompts.append(Prompt.model_validate_json(line))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise SampleError(f"{path} line {number}: {where}: {first['msg']}") from exc
    ids = [p.prompt_id for p in prompts]
    if len(set(ids)) != len(ids):
        twice = sorted({i for i in ids if ids.count(i) > 1})
        raise SampleError(f"{path}: prompt_id given more than once: {', '.join(twice[:5])}")
    return prompts


def make_row(
    prompt: Prompt,
    sample: int,
    model_name: str,
    seed_label: str | None,
    response: str,
    **facts: Any,
) -> dict[str, Any]:
    """One GENERATIONS.jsonl row; `facts` are the generation facts (`finish_reason`, token
    counts, `decoding`), None ones left out."""
    return {
        "prompt_id": prompt.prompt_id,
        "prompt": prompt.shown(),
        "sample": sample,
        "model": model_name,
        **({"seed": seed_label} if seed_label is not None else {}),
        "domain": prompt.domain,
        **({"task_family": prompt.task_family} if prompt.task_family else {}),
        "reference": prompt.reference,
        "response": response,
        **{k: v for k, v in facts.items() if v is not None},
    }


@dataclass(frozen=True)
class RunFacts:
    """What every row of a sampling run records of it (`sampling`, `training_gpu_hours`)."""

    device: str | None
    devices: int | None
    training_gpu_hours: float | None = None


class Output:
    """The generations file opened for appending, with the keys it already holds. With `facts`,
    each row written gets `sampling` (a run id for this process, the device type and count, the
    wall time since the output was opened) and `training_gpu_hours` when given."""

    def __init__(
        self, stream: IO[str], done: set[tuple[str, int]], facts: RunFacts | None = None
    ) -> None:
        self._stream = stream
        self.done = done
        self.written = 0
        self._facts = facts
        self._run = uuid.uuid4().hex
        self._start = time.monotonic()

    def _stamped(self, row: Mapping[str, Any]) -> Mapping[str, Any]:
        if self._facts is None:
            return row
        facts = self._facts
        record = {
            "run": self._run,
            "device": facts.device,
            "devices": facts.devices,
            "elapsed_s": round(time.monotonic() - self._start, 3),
        }
        hours = facts.training_gpu_hours
        return {
            **row,
            "sampling": record,
            **({"training_gpu_hours": hours} if hours is not None else {}),
        }

    def missing(self, prompts: Iterable[Prompt], n: int) -> Iterator[tuple[Prompt, list[int]]]:
        """Each prompt with a sample still to write, and those sample numbers."""
        for prompt in prompts:
            todo = [s for s in range(n) if (prompt.prompt_id, s) not in self.done]
            if todo:
                yield prompt, todo

    def write(self, row: Mapping[str, Any]) -> None:
        """Append one row, flushed, so a crash loses at most the line being written."""
        key = (row["prompt_id"], row["sample"])
        if key in self.done:
            raise ValueError(f"row {key} written twice")
        row = self._stamped(row)
        self._stream.write(json.dumps(row, ensure_ascii=False) + "\n")
        self._stream.flush()
        self.done.add(key)
        self.written += 1

    def close(self) -> None:
        self._stream.close()


def _run_facts(row: Mapping[str, Any]) -> tuple[Any, Any, Any]:
    decoding = row.get("decoding") or {}
    return row.get("model"), row.get("seed"), decoding.get("requested")


def _existing(path: Path, expect: tuple[Any, Any, Any]) -> tuple[set[tuple[str, int]], int]:
    """The keys already in `path` and the byte length of its complete lines."""
    data = path.read_bytes()
    keep = data.rfind(b"\n") + 1  # a last line without its newline was cut short
    done: set[tuple[str, int]] = set()
    for number, line in enumerate(data[:keep].decode("utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = Generation.model_validate_json(line)
        except ValidationError as exc:
            raise SampleError(
                f"{path} line {number} is not a generation row; not resuming"
            ) from exc
        facts = _run_facts(json.loads(line))
        if facts != expect:
            raise SampleError(
                f"{path} line {number} was sampled with other settings (model, seed label or "
                f"decoding {facts} != {expect}); write to a new file"
            )
        done.add((row.prompt_id, row.sample))
    return done, keep


def open_output(
    path: Path,
    model_name: str,
    seed_label: str | None,
    decoding: Decoding,
    facts: RunFacts | None = None,
) -> Output:
    """Open `path` to append the rest of a run to it (created if absent)."""
    done: set[tuple[str, int]] = set()
    if path.exists():
        done, keep = _existing(path, (model_name, seed_label, decoding.requested()))
        if keep < path.stat().st_size:
            os.truncate(path, keep)
    return Output(path.open("a", encoding="utf-8"), done, facts)
