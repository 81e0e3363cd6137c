"""Coverage of proctor-eval's solved-by intervals: a three-seed RL model against a one-seed base.

Runs tests/eval_simulation.py's paired simulation (per-prompt logits N(-1, 2^2), the RL model's
logits shifted by 0.8 and by its seed's N(0, 0.7^2), n = 16 samples per prompt and seed, 100
prompts, 500 bootstrap resamples) over 2,000 studies and prints, per category and k in 1, 4, 16,
how often the recipe-level 95% interval of the count held the true expected count. Exits non-zero
unless the solved-only-by counts (only_a, only_b) lie within 0.93-0.97 and both/neither within
0.92-0.98. `--short` (or PROCTOR_SHORT=1): 300 studies, every cell within 0.91-0.985 (the CI
band of tests/test_eval_coverage.py). `--seed` sets the simulation's seed (default 7).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the simulation is the tests'

from tests.eval_simulation import KS, paired_coverage


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--short", action="store_true", help="300 studies, the CI band")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    short = args.short or os.environ.get("PROCTOR_SHORT") == "1"
    studies = 300 if short else 2000
    start = time.perf_counter()
    coverage = paired_coverage(studies, seed=args.seed)
    seconds = time.perf_counter() - start
    print(f"{studies} studies (seed {args.seed}), {seconds:.1f} s")
    print("| category | " + " | ".join(f"k = {k}" for k in KS) + " | band |")
    print("|---|" + "---|" * (len(KS) + 1))
    bad = 0
    for category, values in coverage.items():
        if short:
            low, high = 0.91, 0.985
        elif category in ("only_a", "only_b"):
            low, high = 0.93, 0.97
        else:
            low, high = 0.92, 0.98
        inside = [low <= v <= high for v in values]
        bad += not all(inside)
        cells = " | ".join(
            f"{v:.4f}" + ("" if ok else " (!)") for v, ok in zip(values, inside, strict=True)
        )
        print(f"| {category} | {cells} | {low}-{high} |")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
