"""`proctor-eval contamination`: which prompts share an n-gram with a training corpus.

    proctor-eval contamination PROMPTS.jsonl --corpus FILES... [--n 13] [--out contamination.json]

PROMPTS.jsonl is the sampler's prompt file (or a generations file): rows with `prompt_id`,
`prompt` (text, or chat turns whose `content` is read) and a `reference` whose `answer` is read
when present. Text is normalised once, the same way for prompts and corpus: lower case, every
Unicode punctuation character (categories P*) removed, split on whitespace. A prompt is flagged
when any n-gram (n = 13 unless `--n`) of its prompt or its answer occurs in the corpus.

The corpus is streamed; only the prompts' n-grams are held in memory (their hashes and owners,
`NgramIndex`, beside the prompts' tokens), so a corpus far larger than memory works. Formats by
suffix: `.jsonl` (`.jsonl.gz` too) one document a line, its `--field` (default `text`) read;
`.parquet` through pyarrow's batch reader, the same field, when pyarrow is importable (a clear
error otherwise);
anything else as plain text in 1 MiB blocks (`.gz` decompressed), an n-gram free to span lines
and blocks. Per corpus token the work is one dict look-up of its id (in C, through `map`) and a
polynomial hash of the n ids ending there (numpy, modulo 2^64); only the positions whose hash is
one of the prompts' (a bit filter on its low bits, then a binary search) are compared token by
token.

The result (`contamination.json`) lists each flagged prompt with its matched spans (maximal runs
of matched n-grams, as normalised text, per field) and where the first match was seen (file and
document or block number). `proctor-eval GENERATIONS --out DIR --exclude contamination.json`
recomputes the report's pass@k without the flagged prompts beside the full figures.
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import sys
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import IO, Any

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "DEFAULT_N",
    "PUNCTUATION_PLANES",
    "Contamination",
    "Flagged",
    "NgramIndex",
    "PromptText",
    "documents",
    "flagged_ids",
    "main",
    "normalise",
    "read_prompts",
    "scan",
    "tokens",
]

DEFAULT_N = 13
"""n-gram length (GPT-3's decontamination used 13 as well)."""
BLOCK = 1 << 20
"""Characters read at a time from a plain-text corpus."""
FIELDS = ("prompt", "answer")


PUNCTUATION_PLANES = 0x40000
"""Code points below this are searched for punctuation: planes 0-3. The others hold no P*
character (4-13 unassigned, 14 tags and variation selectors, 15-16 private use); a test checks
it against a pass over every code point."""


@cache
def _punctuation() -> dict[int, None]:
    """Every code point of a Unicode punctuation category (P*), mapped to nothing (built on
    first use, not at import)."""
    return {
        code: None
        for code in range(PUNCTUATION_PLANES)
        if unicodedata.category(chr(code)).startswith("P")
    }


def normalise(text: str) -> str:
    """Lower case, Unicode punctuation removed (whitespace kept)."""
    return text.lower().translate(_punctuation())


def tokens(text: str) -> list[str]:
    """The normalised text's whitespace tokens."""
    return normalise(text).split()


@dataclass(frozen=True)
class PromptText:
    prompt_id: str
    prompt: str
    answer: str | None


def _prompt_text(prompt: Any) -> str:
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list):
        return "\n".join(str(turn.get("content", "")) for turn in prompt if isinstance(turn, dict))
    raise ValueError("`prompt` must be text or a list of chat turns")


def read_prompts(path: Path) -> list[PromptText]:
    """One entry per prompt_id (a generations file repeats them: the first row is kept)."""
    seen: dict[str, PromptText] = {}
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                prompt_id = str(row["prompt_id"])
                text = _prompt_text(row["prompt"])
            except (ValueError, KeyError, TypeError) as exc:
                raise ValueError(f"{path}:{number}: needs prompt_id and prompt ({exc})") from exc
            reference = row.get("reference")
            answer = reference.get("answer") if isinstance(reference, dict) else None
            if prompt_id not in seen:
                seen[prompt_id] = PromptText(
                    prompt_id, text, None if answer is None else str(answer)
                )
    return list(seen.values())


_BASE = np.uint64(0x9E3779B97F4A7C15)
"""Multiplier of the n-grams' polynomial hash over token ids (arithmetic modulo 2^64)."""


def _hashes(ids: NDArray[np.uint64], n: int) -> NDArray[np.uint64]:
    """The hash of every window of n ids, `sum ids[s + i] * BASE^(n - 1 - i)` mod 2^64."""
    count = len(ids) - n + 1
    if count <= 0:
        return np.empty(0, dtype=np.uint64)
    h = np.zeros(count, dtype=np.uint64)
    for i in range(n):
        h *= _BASE
        h += ids[i : i + count]
    return h


class NgramIndex:
    """The prompts' n-grams as two parallel arrays: their hashes, sorted, and their owners
    (prompt, field and start, packed in one integer); the prompts' token ids; and a bit filter
    on the hashes' low bits. About 16 bytes an n-gram beside the prompts' own tokens."""

    def __init__(self, prompts: Sequence[PromptText], n: int) -> None:
        if n < 1:
            raise ValueError("n must be at least 1")
        self.n = n
        self.prompts = list(prompts)
        self.fields: list[tuple[list[str], list[str]]] = []
        self.ids: dict[str, int] = {}
        hashes = [np.zeros(0, dtype=np.uint64)]
        owners = [np.zeros(0, dtype=np.int64)]
        for index, p in enumerate(self.prompts):
            texts = (tokens(p.prompt), tokens(p.answer or ""))
            self.fields.append(texts)
            for number, words in enumerate(texts):
                for word in words:
                    self.ids.setdefault(word, len(self.ids) + 1)  # 0: not a prompt token
                found = self.to_hashes(words)
                hashes.append(found)
                owners.append(_owner(index, number, np.arange(len(found), dtype=np.int64)))
        every = np.concatenate(hashes)
        order = np.argsort(every, kind="stable")
        self.hashes, self.owners = every[order], np.concatenate(owners)[order]
        # a filter on the hashes' low bits: most positions are rejected by one array look-up
        size = 1 << max(16, min(26, (64 * len(self.hashes)).bit_length()))
        self.mask = np.uint64(size - 1)
        self.filter = np.zeros(size, dtype=bool)
        self.filter[self.hashes & self.mask] = True

    def to_ids(self, words: list[str]) -> NDArray[np.uint64]:
        ids = np.fromiter(
            map(self.ids.get, words, itertools.repeat(0)), dtype=np.int64, count=len(words)
        )
        return ids.view(np.uint64)

    def to_hashes(self, words: list[str]) -> NDArray[np.uint64]:
        return _hashes(self.to_ids(words), self.n)

    def words(self, owner: int) -> list[str]:
        """The n tokens of the n-gram `owner` names."""
        prompt, number, start = _unpack(owner)
        return self.fields[prompt][number][start : start + self.n]


def _owner(prompt: int, field_number: int, starts: NDArray[np.int64]) -> NDArray[np.int64]:
    packed: NDArray[np.int64] = (prompt * 2 + field_number) << 32 | starts
    return packed


def _unpack(owner: int) -> tuple[int, int, int]:
    both, start = owner >> 32, owner & 0xFFFFFFFF
    return both // 2, both % 2, start


@dataclass
class _Scanner:
    """Feeds token streams through the index; remembers where each prompt n-gram (by owner) was
    first seen."""

    index: NgramIndex
    found: dict[int, str] = field(default_factory=dict)
    tokens_read: int = 0

    def feed(self, words: list[str], carry: list[str], source: str) -> list[str]:
        """Scans `carry + words`; returns the last n - 1 tokens to carry over."""
        n, index = self.index.n, self.index
        self.tokens_read += len(words)
        stream = carry + words if carry else words
        h = index.to_hashes(stream)
        if len(h) and len(index.hashes):
            maybe = np.flatnonzero(index.filter[h & index.mask])
            low = np.searchsorted(index.hashes, h[maybe], side="left")
            high = np.searchsorted(index.hashes, h[maybe], side="right")
            hit = high > low
            for start, first, last in zip(
                maybe[hit].tolist(), low[hit].tolist(), high[hit].tolist(), strict=True
            ):
                gram = stream[start : start + n]
                for owner in index.owners[first:last].tolist():
                    if owner not in self.found and index.words(owner) == gram:  # exact check
                        self.found[owner] = source
        return stream[max(0, len(stream) - n + 1) :]


def _open_text(path: Path) -> IO[str]:
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8", errors="replace")
    return path.open(encoding="utf-8", errors="replace")


def _plain(path: Path, size: int) -> Iterator[tuple[str, str, bool]]:
    """(text, source, continues): blocks of a plain-text file, an n-gram may span them."""
    with _open_text(path) as handle:
        tail, block = "", 0
        while True:
            chunk = handle.read(size)
            if not chunk:
                if tail:
                    yield tail, f"{path}#block{block}", True
                return
            text = tail + chunk
            cut = max(text.rfind(" "), text.rfind("\n"))  # never split a token
            tail = text[cut + 1 :] if cut >= 0 else text
            if cut >= 0:
                yield text[: cut + 1], f"{path}#block{block}", True
            block += 1


def _jsonl(path: Path, key: str) -> Iterator[tuple[str, str, bool]]:
    with _open_text(path) as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                value = json.loads(line)[key]
            except (ValueError, KeyError, TypeError) as exc:
                raise ValueError(f"{path}:{number}: no text field {key!r} ({exc})") from exc
            yield str(value), f"{path}:{number}", False


def _parquet(path: Path, key: str) -> Iterator[tuple[str, str, bool]]:
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise ValueError(
            f"{path}: reading Parquet needs pyarrow (pip install pyarrow), "
            "or convert the corpus to JSONL or plain text"
        ) from exc
    number = 0
    for batch in pq.ParquetFile(path).iter_batches(columns=[key], batch_size=1024):
        for value in batch.column(0).to_pylist():
            number += 1
            if value is not None:
                yield str(value), f"{path}#row{number}", False


def documents(path: Path, key: str = "text", block: int = BLOCK) -> Iterator[tuple[str, str, bool]]:
    """(text, source, continues) per document of a corpus file; `continues`: the next text
    carries on the same stream (plain text), so n-grams may span the two."""
    name = path.name.removesuffix(".gz")
    if name.endswith(".jsonl") or name.endswith(".json"):
        return _jsonl(path, key)
    if name.endswith(".parquet"):
        return _parquet(path, key)
    return _plain(path, block)


@dataclass(frozen=True)
class Flagged:
    prompt_id: str
    spans: dict[str, list[str]]
    """Per field ("prompt", "answer"): the maximal runs of matched n-grams, normalised."""
    first_seen: str


@dataclass
class Contamination:
    n: int
    prompts: int
    corpus: list[str]
    tokens_read: int
    flagged: list[Flagged]

    def to_json(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "normalisation": "lowercase, Unicode punctuation (P*) removed, whitespace tokens",
            "prompts": self.prompts,
            "corpus": self.corpus,
            "corpus_tokens": self.tokens_read,
            "flagged": [
                {"prompt_id": f.prompt_id, "spans": f.spans, "first_seen": f.first_seen}
                for f in self.flagged
            ],
        }


def _spans(words: list[str], starts: Iterable[int], n: int) -> list[str]:
    spans: list[str] = []
    begin = end = -1
    for start in sorted(set(starts)):
        if start > end:
            if end >= 0:
                spans.append(" ".join(words[begin:end]))
            begin = start
        end = max(end, start + n)
    if end >= 0:
        spans.append(" ".join(words[begin:end]))
    return spans


def scan(
    prompts: Sequence[PromptText],
    corpus: Sequence[Path],
    n: int = DEFAULT_N,
    key: str = "text",
    block: int = BLOCK,
) -> Contamination:
    """Streams every corpus file once against the prompts' n-grams (`block`: characters read
    at a time from plain text)."""
    index = NgramIndex(prompts, n)
    scanner = _Scanner(index)
    for path in corpus:
        carry: list[str] = []
        for text, source, continues in documents(path, key, block):
            carry = scanner.feed(tokens(text), carry, source)
            if not continues:
                carry = []
    hits: dict[int, dict[str, list[int]]] = {}
    first: dict[int, str] = {}
    for owner, source in scanner.found.items():
        prompt, number, start = _unpack(owner)
        hits.setdefault(prompt, {}).setdefault(FIELDS[number], []).append(start)
        first.setdefault(prompt, source)
    flagged = [
        Flagged(
            index.prompts[i].prompt_id,
            {
                name: _spans(index.fields[i][FIELDS.index(name)], starts, n)
                for name, starts in sorted(hits[i].items())
            },
            first[i],
        )
        for i in sorted(hits)
    ]
    return Contamination(n, len(prompts), [str(p) for p in corpus], scanner.tokens_read, flagged)


def flagged_ids(path: Path) -> set[str]:
    """The flagged prompt ids of a contamination.json."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return {str(entry["prompt_id"]) for entry in data["flagged"]}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path}: not a contamination result ({exc})") from exc


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="proctor-eval contamination", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("prompts", type=Path, help="PROMPTS.jsonl (or a generations file)")
    p.add_argument("--corpus", type=Path, nargs="+", required=True, help="corpus files")
    p.add_argument("--n", type=int, default=DEFAULT_N, help=f"n-gram length ({DEFAULT_N})")
    p.add_argument("--field", default="text", help="text field of JSONL/Parquet (text)")
    p.add_argument("--out", type=Path, default=Path("contamination.json"), help="result file")
    return p


def main(argv: Sequence[str]) -> int:
    args = _parser().parse_args(argv)
    if args.n < 1:
        print("proctor-eval: --n must be at least 1", file=sys.stderr)
        return 2
    try:
        prompts = read_prompts(args.prompts)
        result = scan(prompts, args.corpus, args.n, args.field)
    except (OSError, ValueError) as exc:
        print(f"proctor-eval: {exc}", file=sys.stderr)
        return 2
    args.out.write_text(json.dumps(result.to_json(), indent=2) + "\n", encoding="utf-8")
    print(
        f"proctor-eval: {len(result.flagged)} of {result.prompts} prompts share a {args.n}-gram "
        f"with the corpus ({result.tokens_read} tokens read); see {args.out}",
        file=sys.stderr,
    )
    return 0
