"""IFEval scoring throughput: a plain in-process loop over our checker against `POST /v1/score`.

Builds 4,096 responses of a few hundred words, each item with 1-3 IFEval instructions drawn from
the conformance set's (id, kwargs) pairs (every instruction type, language detection and sentence
counting included), then in one run:

  (a) a plain loop in this process over the ifeval scorer (`score_ifeval` on validated
      references, the prorl-v1 config), as an offline evaluation would call it, warmed up first
      (langdetect's profiles take about 1.5 s to load) as the service's workers are;
  (b) `POST /v1/score` with all items in one batch, against `proctor serve` started here on the
      embedded default (local worker pool, one worker per core).

Prints items/s for both and the ratio, and checks that (b) gives every item the score (a) gave.
`--short` (or PROCTOR_SHORT=1) uses 512 items for CI.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

from _served import proctor_server, timed_score

from reward_specs import ScoreContext, default_registry, load_specs
from reward_specs.ifeval import IFEvalReference, score_ifeval

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "ifeval"

PROSE = [
    "The committee met on a rainy Tuesday to review the budget for the coming year.",
    "Several members raised concerns about the rising cost of maintaining the old bridge.",
    "After a long discussion they agreed to ask the engineers for a second estimate.",
    "Meanwhile the library reported that visits had doubled since the new wing opened.",
    "Children now gather there every afternoon to read, draw and play quiet board games.",
    "The mayor thanked the volunteers who had painted the walls and built the shelves.",
    "A local baker offered to donate bread for the reading club on Saturday mornings.",
    "Nobody expected the small town to change so quickly in just a few short months.",
    "In the evening the square fills with music as families walk along the river path.",
    "The old clock tower, repaired at last, rings again every hour on the hour.",
]


def _instruction_pool() -> list[tuple[str, dict[str, Any]]]:
    pool = []
    with (DATA / "prompts.jsonl").open(encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            pool.extend(zip(row["instruction_id_list"], row["kwargs"], strict=True))
    return pool


def _responses() -> list[str]:
    with (DATA / "responses.jsonl").open(encoding="utf-8") as f:
        return [json.loads(line)["response"] for line in f]


def make_items(n: int, seed: int = 0) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    pool = _instruction_pool()
    written = _responses()
    items = []
    for _ in range(n):
        chosen: dict[str, dict[str, Any]] = {}
        for _ in range(rng.randint(1, 3)):
            instruction_id, kwargs = rng.choice(pool)
            chosen.setdefault(instruction_id, kwargs)
        body = " ".join(rng.choice(PROSE) for _ in range(rng.randint(8, 30)))
        head = rng.choice(written)
        response = f"{head}\n\n{body}" if rng.random() < 0.7 else f"{body}\n\n{head}"
        items.append(
            {
                "domain": "ifeval",
                "response": response,
                "reference": {
                    "instruction_id_list": list(chosen),
                    "kwargs": list(chosen.values()),
                },
            }
        )
    return items


def baseline(items: list[dict[str, Any]]) -> tuple[list[float], float]:
    registry = default_registry()
    config = load_specs(registry)["prorl-v1"].config("ifeval")
    ctx = ScoreContext()
    # Warm up as the service's workers do (langdetect's profiles, the Punkt tables), untimed.
    for example in registry.get("ifeval").examples():
        reference = IFEvalReference.model_validate(example.reference)
        score_ifeval(example.response, reference, config, ctx)
    scores = []
    started = time.perf_counter()
    for item in items:
        reference = IFEvalReference.model_validate(item["reference"])
        scores.append(score_ifeval(item["response"], reference, config, ctx).score)
    return scores, time.perf_counter() - started


def ours(items: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], float]:
    with proctor_server() as url:
        return timed_score(url, json.dumps({"items": items}))


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--items", type=int, default=None)
    parser.add_argument("--short", action="store_true", help="512 items (CI)")
    parser.add_argument("--json", action="store_true", help="also print a JSON summary line")
    args = parser.parse_args()
    short = args.short or os.environ.get("PROCTOR_SHORT") == "1"
    n = args.items or (512 if short else 4096)

    items = make_items(n)
    instructions = sum(len(i["reference"]["instruction_id_list"]) for i in items)
    base_scores, base_s = baseline(items)
    results, ours_s = ours(items)

    base_rate, ours_rate = n / base_s, n / ours_s
    statuses = sorted({r["status"] for r in results})
    differ = [
        i
        for i, (b, r) in enumerate(zip(base_scores, results, strict=True))
        if r["score"] is None or abs(r["score"] - b) > 1e-12
    ]
    print(f"items: {n} ({instructions} instructions; mean score {sum(base_scores) / n:.3f})")
    print(f"(a) plain loop over score_ifeval, 1 process: {base_rate:8.1f} items/s ({base_s:.2f} s)")
    print(f"(b) POST /v1/score, embedded default:        {ours_rate:8.1f} items/s ({ours_s:.2f} s)")
    print(f"ratio (b)/(a): {ours_rate / base_rate:.2f}x")
    print(f"statuses: {statuses}; scores differing from (a): {len(differ)}")
    if args.json:
        print(
            json.dumps(
                {
                    "items": n,
                    "baseline_per_s": base_rate,
                    "ours_per_s": ours_rate,
                    "ratio": ours_rate / base_rate,
                    "differing": len(differ),
                }
            )
        )
    return 1 if differ or statuses != ["ok"] else 0


if __name__ == "__main__":
    sys.exit(main())
