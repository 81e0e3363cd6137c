"""proctor-eval throughput: scoring a 100,000-row study in-process, and its statistics.

Builds 1,000 prompts x 100 samples (half math, a quarter four-option multiple choice, a quarter
IFEval), each prompt with its own success rate drawn from Beta(0.5, 0.8), every response with its
own reasoning text before the answer, and the verdict each row should get (`--symbolic`: math
answers are fractions, right ones sometimes unreduced, which math-verify checks with sympy
instead of the plain-number fast path). Then, in one run:

  (a) a plain loop over `reward_specs.score_item` in this process, as an offline evaluation script
      would call it, warmed up, on the first 2,000 rows (rows/s);
  (b) `LocalScorer`, the evaluator's in-process scorer (worker processes, rows with equal answer
      keys scored once), on every row, once its workers have started;
  (c) the statistics with 2,000 bootstrap resamples: one model of 100 samples per prompt, and the
      same rows as two models of 50 samples with their paired comparison (tables, bootstraps,
      per-family curves; then report.json, report.md and the figures), in seconds;
  (d) the paired statistics again with each model's samples spread over three training seeds, so
      the recipe-level intervals (between-seed variance) are computed too.

Exits non-zero if any verdict differs from the one the row was built to get, or if (a) and (b)
disagree. `--short` (or PROCTOR_SHORT=1): 60 prompts x 20 samples; timings are printed, never
judged (the statistics target, under 10 s, is for a person to read from a full run).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from proctor_client.evaluation.analysis import Options, analyse, build_table
from proctor_client.evaluation.plots import draw_all
from proctor_client.evaluation.report import build_json, write_json
from proctor_client.evaluation.report_markdown import write_markdown
from proctor_client.evaluation.rows import Generation
from proctor_client.evaluation.store import ScoredRow
from proctor_client.local import LocalScorer
from reward_specs import Item, ScoreContext, default_registry, load_specs, score_item

CHOICES = ["alpha", "beta", "gamma", "delta"]
LETTERS = "ABCD"
STEPS = [
    "First collect the terms that share a factor.",
    "Then check the boundary cases one by one.",
    "A quick estimate rules out the larger values.",
    "Substituting back confirms the candidate.",
    "The remaining case contradicts the assumption.",
    "So only one value survives all the constraints.",
]


def _reasoning(rng: random.Random) -> str:
    return "<think>" + " ".join(rng.choice(STEPS) for _ in range(rng.randint(3, 8))) + "</think>"


def _row(
    prompt: int, domain: str, sample: int, won: bool, rng: random.Random, symbolic: bool
) -> dict[str, Any]:
    text = _reasoning(rng)
    if domain == "math" and symbolic:
        a, b = prompt % 9 + 2, prompt % 7 + 11  # gold a/b; right as a/b or 2a/2b, wrong as a/(b+j)
        right = rng.choice([f"\\frac{{{a}}}{{{b}}}", f"\\frac{{{2 * a}}}{{{2 * b}}}"])
        given = right if won else f"\\frac{{{a}}}{{{b + rng.randint(1, 3)}}}"
        answer = f" The answer is \\boxed{{{given}}}."
        reference: dict[str, Any] = {"answer": f"\\frac{{{a}}}{{{b}}}"}
    elif domain == "math":
        gold = 7 * prompt + 3
        wrong = gold + rng.randint(1, 3)
        answer = f" The answer is \\boxed{{{gold if won else wrong}}}."
        if not won and rng.random() < 0.2:
            answer = " I could not finish."
        reference = {"answer": str(gold)}
    elif domain == "stem":
        gold_index = prompt % 4
        letter = LETTERS[gold_index] if won else LETTERS[(gold_index + rng.randint(1, 3)) % 4]
        answer = f" Answer: {letter}"
        reference = {"answer": LETTERS[gold_index], "choices": CHOICES}
    else:
        answer = " A short reply in plain words" + ("." if won else ", with a comma.")
        reference = {"instruction_id_list": ["punctuation:no_comma"], "kwargs": [{}]}
    return {
        "prompt_id": f"{domain}-{prompt}",
        "sample": sample,
        "domain": domain,
        "task_family": domain,
        "reference": reference,
        "response": text + answer,
    }


def make_study(
    prompts: int, samples: int, symbolic: bool = False, seed: int = 0
) -> tuple[list[Generation], list[bool]]:
    rng = random.Random(seed)
    rows: list[Generation] = []
    expected: list[bool] = []
    for prompt in range(prompts):
        domain = "math" if prompt % 4 < 2 else ("stem" if prompt % 4 == 2 else "ifeval")
        p = rng.betavariate(0.5, 0.8)
        for sample in range(samples):
            won = rng.random() < p
            rows.append(Generation.model_validate(_row(prompt, domain, sample, won, rng, symbolic)))
            expected.append(won)
    return rows, expected


def plain_loop(rows: list[Generation]) -> tuple[list[bool | None], float]:
    registry = default_registry()
    spec = load_specs(registry)["prorl-v1"]
    ctx = ScoreContext()
    for row in rows[:10]:  # warm-up: grammars and imports load on first use
        score_item(registry, spec, Item(row.domain, "x", row.reference), ctx)
    started = time.perf_counter()
    verdicts = []
    for row in rows:
        outcome = score_item(registry, spec, Item(row.domain, row.response, row.reference), ctx)
        verdicts.append(outcome.success)
    return verdicts, time.perf_counter() - started


def statistics(scored: list[ScoredRow], out: Path, scorer: LocalScorer) -> float:
    started = time.perf_counter()
    options = Options(resamples=2000)
    study = analyse(build_table(scored), options)
    figures = draw_all(study, out)
    write_json(out / "report.json", build_json(study, scorer.spec, [], None))
    write_markdown(out / "report.md", study, scorer.spec, figures, [], None)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--short", action="store_true", help="60 prompts x 20 samples (CI)")
    parser.add_argument("--workers", type=int, default=None, help="scoring processes (cores)")
    parser.add_argument(
        "--symbolic", action="store_true", help="math answers are fractions (math-verify, sympy)"
    )
    args = parser.parse_args()
    short = args.short or os.environ.get("PROCTOR_SHORT") == "1"
    prompts, samples = (60, 20) if short else (1000, 100)
    rows, expected = make_study(prompts, samples, args.symbolic)
    subset = rows[: min(len(rows), 2000 if not short else 400)]

    base_verdicts, base_s = plain_loop(subset)
    workers = args.workers or os.cpu_count() or 1
    scorer = LocalScorer(workers=workers)
    try:
        scorer.score(rows[:workers], lambda _: None)  # warm-up: the worker processes start
        started = time.perf_counter()
        results = scorer.score(rows, lambda _: None)
        ours_s = time.perf_counter() - started
    finally:
        scorer.close()
    verdicts = [r["success"] if r["status"] == "ok" else None for r in results]
    wrong = [i for i, (v, e) in enumerate(zip(verdicts, expected, strict=True)) if v is not e]
    disagree = [i for i, (b, v) in enumerate(zip(base_verdicts, verdicts, strict=False)) if b != v]

    scored = [ScoredRow(row, result) for row, result in zip(rows, results, strict=True)]
    halves = [
        ScoredRow(e.row.model_copy(update={"model": "even" if e.row.sample % 2 == 0 else "odd"}),
                  e.result)
        for e in scored
    ]  # fmt: skip
    seeded = [
        ScoredRow(e.row.model_copy(update={"seed": e.row.sample // 2 % 3}), e.result)
        for e in halves
    ]  # each model's samples spread over three training seeds: the recipe-level intervals run
    with tempfile.TemporaryDirectory() as one, tempfile.TemporaryDirectory() as two:
        one_s = statistics(scored, Path(one), scorer)
        two_s = statistics(halves, Path(two), scorer)
    with tempfile.TemporaryDirectory() as three:
        seeded_s = statistics(seeded, Path(three), scorer)

    base_rate, ours_rate = len(subset) / base_s, len(rows) / ours_s
    print(f"rows: {len(rows)} ({prompts} prompts x {samples} samples; math, stem, ifeval)")
    print(f"(a) plain score_item loop, 1 process: {base_rate:9.1f} rows/s ({len(subset)} rows)")
    print(f"(b) LocalScorer, {workers} workers:         {ours_rate:9.1f} rows/s ({ours_s:.1f} s)")
    print(f"ratio (b)/(a): {ours_rate / base_rate:.1f}x")
    print(
        f"(c) statistics, 2,000 resamples: one model {one_s:.2f} s; two models paired {two_s:.2f} s"
    )
    print(
        f"(d) statistics, two models paired, three seeds each (recipe level on): {seeded_s:.2f} s"
    )
    print(f"verdicts differing from the built ones: {len(wrong)}; (a) vs (b): {len(disagree)}")
    return 1 if wrong or disagree else 0


if __name__ == "__main__":
    sys.exit(main())
