"""Time per step of the reference GRPO trainer on the tiny CPU model, split into generation,
scoring and update, with scoring overlapped with the old-policy and reference passes vs not.

Runs `clients/configs/tiny-cpu.yaml` (the learning test's model and task) twice in one process
against `proctor serve` started here: (a) scoring then the two forward passes, one after the other
(`overlap_scoring: false`); (b) scoring in the background while the passes run (the default).
Both runs use the same seed, so everything but the timings must come out identical: the overlap
may change when work happens, never what is learned. Larger batches than the learning test
(`--prompts`, `--group-size`) give scoring something to hide behind.

Prints the mean seconds per step of each part for both runs and the ratio of their
scoring-and-passes time. Exits non-zero when the two runs' metrics differ or an item was not
judged. `--short` (or PROCTOR_SHORT=1) runs 3 steps of 16 groups of 8 for CI.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from _served import proctor_server

from proctor_client.trainer.grpo import load_args, train
from proctor_client.trainer.metrics import read_metrics

ROOT = Path(__file__).parent.parent
TINY = ROOT / "clients" / "configs" / "tiny-cpu.yaml"
TIMINGS = ("time_generation", "time_scoring", "time_scoring_and_passes", "time_update")


def run(url: str, steps: int, overlap: bool, prompts: int, group_size: int) -> list[dict[str, Any]]:
    """One run's per-step metrics."""
    args = load_args(
        TINY,
        tensorboard=False,
        overlap_scoring=overlap,
        prompts_per_step=prompts,
        prompts_per_minibatch=max(1, prompts // 2),
    )
    args.stages = [stage.model_copy(update={"group_size": group_size}) for stage in args.stages]
    with tempfile.TemporaryDirectory() as out:
        train(args, url, Path(out), stop_after=steps)
        return read_metrics(Path(out) / "metrics.jsonl")


def mean(metrics: list[dict[str, Any]], key: str) -> float:
    return sum(float(m[key]) for m in metrics) / len(metrics)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--prompts", type=int, default=None, help="groups per step (64)")
    parser.add_argument("--group-size", type=int, default=None, help="G (16)")
    parser.add_argument("--short", action="store_true", help="3 steps (CI)")
    parser.add_argument("--json", action="store_true", help="also print a JSON summary line")
    options = parser.parse_args()
    short = options.short or os.environ.get("PROCTOR_SHORT") == "1"
    steps = options.steps or (3 if short else 20)
    prompts = options.prompts or (16 if short else 64)
    group_size = options.group_size or (8 if short else 16)
    logging.basicConfig(level=logging.WARNING)

    with proctor_server() as url:
        sequential = run(url, steps, False, prompts, group_size)
        overlapped = run(url, steps, True, prompts, group_size)

    def untimed(metrics: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{k: v for k, v in m.items() if k not in TIMINGS} for m in metrics]

    same = untimed(sequential) == untimed(overlapped)
    unjudged = sum(int(m["unjudged"]) for m in sequential + overlapped)
    rows = [("(a) sequential", sequential), ("(b) overlapped", overlapped)]
    print(f"steps: {steps}, {prompts} groups of {group_size} per step (tiny CPU)")
    print("run               generation  scoring  scoring+passes  update   (s per step)")
    for name, metrics in rows:
        generation, scoring = mean(metrics, "time_generation"), mean(metrics, "time_scoring")
        both, update = mean(metrics, "time_scoring_and_passes"), mean(metrics, "time_update")
        print(f"{name:16s}  {generation:10.3f}  {scoring:7.3f}  {both:14.3f}  {update:6.3f}")
    ratio = mean(sequential, "time_scoring_and_passes") / mean(
        overlapped, "time_scoring_and_passes"
    )
    print(f"scoring+passes, (a)/(b): {ratio:.2f}x")
    print(f"metrics identical apart from timings: {same}; unjudged items: {unjudged}")
    if options.json:
        summary = {name: {k: mean(m, k) for k in TIMINGS} for name, m in rows}
        print(json.dumps({"steps": steps, "ratio": ratio, "same": same, **summary}))
    return 0 if same and unjudged == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
