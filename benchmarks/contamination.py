"""proctor-eval contamination: time and peak memory against prompts x corpus size.

Builds prompts of 120 tokens with 16-token answers and a plain-text corpus on disk, both drawn from
one Zipf-distributed vocabulary of 30,000 words (so most corpus tokens are also prompt tokens: the
scan's worst case, every position hashed). Every tenth prompt has a 20-token window of its prompt
(every thirtieth: its answer) planted in the corpus, upper-cased and punctuated. Each
(prompts, corpus) cell runs `contamination.scan` in a fresh process and reports its wall time,
throughput and peak resident memory (the process's own `ru_maxrss`, the interpreter included).
On the smallest corpus two baselines run the same question in the same way:

  naive  the corpus normalised into one string in memory, then `" " + ngram + " " in corpus` for
         every n-gram of every prompt;
  set    the set of all the corpus's n-grams built in memory, then each prompt's looked up.

Exits non-zero unless every run flags exactly the planted prompts. `--short` (or PROCTOR_SHORT=1;
the default for CI-sized runs): 100 and 1,000 prompts x 1 and 8 MB. `--full`: 1,000 and 10,000
prompts x 2 MB (for the baselines), 64 MB and 1 GB (written to a temporary directory; `--dir`
chooses one).
Timings are printed, never judged.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from proctor_client.evaluation.contamination import DEFAULT_N, PromptText, scan, tokens

VOCABULARY = 30_000
PROMPT_TOKENS, ANSWER_TOKENS, PLANTED = 120, 16, 20
LINE_TOKENS = 60


def _vocabulary(rng: random.Random) -> tuple[list[str], list[float]]:
    """Words, and their cumulative Zipf weights (exponent 1)."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = sorted({"".join(rng.choices(letters, k=rng.randint(2, 9))) for _ in range(VOCABULARY)})
    rng.shuffle(words)
    return words, list(itertools.accumulate(1.0 / (rank + 1) for rank in range(len(words))))


def _prompts(count: int) -> list[PromptText]:
    """The first `count` prompts of one fixed sequence: a smaller set is a prefix of a larger."""
    rng = random.Random(1)
    words, weights = _vocabulary(random.Random(0))
    return [
        PromptText(
            f"p{i}",
            " ".join(rng.choices(words, cum_weights=weights, k=PROMPT_TOKENS)),
            " ".join(rng.choices(words, cum_weights=weights, k=ANSWER_TOKENS)),
        )
        for i in range(count)
    ]


def _planted(prompts: list[PromptText]) -> dict[int, str]:
    """Prompt index -> the window planted for it (shouted and punctuated)."""
    planted = {}
    for i, p in enumerate(prompts):
        if i % 30 == 0 and p.answer:
            window = p.answer.split()
        elif i % 10 == 0:
            start = (i * 7) % (PROMPT_TOKENS - PLANTED)
            window = p.prompt.split()[start : start + PLANTED]
        else:
            continue
        planted[i] = ", ".join(w.upper() for w in window) + "!"
    return planted


def _write_corpus(path: Path, size: int, prompts: list[PromptText], seed: int) -> None:
    rng = random.Random(seed)
    words, weights = _vocabulary(random.Random(0))
    planted = list(_planted(prompts).values())
    lines_total = max(len(planted), size // (LINE_TOKENS * 6))
    at = dict(zip(rng.sample(range(lines_total), len(planted)), planted, strict=True))
    written = line = 0
    with path.open("w", encoding="utf-8") as handle:
        while written < size:
            drawn = rng.choices(words, cum_weights=weights, k=LINE_TOKENS * 1000)
            chunk = []
            for start in range(0, len(drawn), LINE_TOKENS):
                text = " ".join(drawn[start : start + LINE_TOKENS])
                if line in at:
                    text = f"{text} ({at.pop(line)}) {text[:20]}"
                chunk.append(text + ".\n")
                line += 1
            block = "".join(chunk)
            handle.write(block)
            written += len(block)
        for text in at.values():  # lines past the end of a short corpus
            handle.write(text + "\n")


def _expected(prompts: list[PromptText]) -> set[str]:
    return {prompts[i].prompt_id for i in _planted(prompts)}


def _ngrams(prompt: PromptText, n: int) -> list[str]:
    out = []
    for text in (prompt.prompt, prompt.answer or ""):
        words = tokens(text)
        out += [" ".join(words[s : s + n]) for s in range(len(words) - n + 1)]
    return out


def _naive(prompts: list[PromptText], corpus: Path, n: int) -> set[str]:
    text = " " + " ".join(tokens(corpus.read_text(encoding="utf-8"))) + " "
    return {p.prompt_id for p in prompts if any(f" {g} " in text for g in _ngrams(p, n))}


def _all_ngrams(prompts: list[PromptText], corpus: Path, n: int) -> set[str]:
    seen: set[tuple[str, ...]] = set()
    with corpus.open(encoding="utf-8") as handle:
        words = tokens(handle.read())
    for s in range(len(words) - n + 1):
        seen.add(tuple(words[s : s + n]))
    return {p.prompt_id for p in prompts if any(tuple(g.split()) in seen for g in _ngrams(p, n))}


def _one(method: str, prompt_count: int, corpus: Path) -> None:
    """In a fresh process: run one method, print its figures as JSON."""
    prompts = _prompts(prompt_count)
    tokens("warm up")  # builds the punctuation table, once per process, before the clock
    start = time.perf_counter()
    if method == "scan":
        flagged = {f.prompt_id for f in scan(prompts, [corpus], DEFAULT_N).flagged}
    elif method == "naive":
        flagged = _naive(prompts, corpus, DEFAULT_N)
    else:
        flagged = _all_ngrams(prompts, corpus, DEFAULT_N)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
    print(json.dumps({"seconds": seconds, "peak": peak, "right": flagged == _expected(prompts)}))


def _measure(method: str, prompt_count: int, corpus: Path) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, __file__, "--one", method, str(prompt_count), str(corpus)],
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--short", action="store_true", help="CI-sized run (the default)")
    parser.add_argument("--full", action="store_true", help="up to a 1 GB corpus")
    parser.add_argument("--dir", type=Path, default=None, help="where the corpora are written")
    parser.add_argument("--one", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        _one(args.one[0], int(args.one[1]), Path(args.one[2]))
        return 0
    full = args.full and not (args.short or os.environ.get("PROCTOR_SHORT") == "1")
    prompt_counts = [1_000, 10_000] if full else [100, 1_000]
    sizes = [2 << 20, 64 << 20, 1 << 30] if full else [1 << 20, 8 << 20]
    wrong = 0
    print(f"n = {DEFAULT_N}; {PROMPT_TOKENS}-token prompts, {ANSWER_TOKENS}-token answers")
    print("| method | prompts | corpus MB | seconds | MB/s | peak RSS MB | flags right |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        for size in sizes:
            corpus = Path(tmp) / f"corpus-{size >> 20}MB.txt"
            # windows planted for the largest prompt set; a smaller one is its prefix
            _write_corpus(corpus, size, _prompts(max(prompt_counts)), seed=size)
            for count in prompt_counts:
                methods = ["scan"] + (["naive", "set"] if size == sizes[0] else [])
                times: dict[str, float] = {}
                for method in methods:
                    if method == "naive" and count > prompt_counts[0]:
                        continue  # prompts x n-grams x corpus: minutes already at 1,000 prompts
                    r = _measure(method, count, corpus)
                    times[method] = r["seconds"]
                    wrong += not r["right"]
                    mb = corpus.stat().st_size / (1 << 20)
                    print(
                        f"| {method} | {count:,} | {mb:,.0f} | {r['seconds']:.2f} | "
                        f"{mb / r['seconds']:.1f} | {r['peak'] / (1 << 20):.0f} | {r['right']} |"
                    )
                for method in ("naive", "set"):
                    if method in times:
                        print(f"|   {method} / scan | | | {times[method] / times['scan']:.1f}x |")
            corpus.unlink()
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
