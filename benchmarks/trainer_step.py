"""Time per step of the reference GRPO trainer on the tiny CPU model, split into generation,
scoring and update, with scoring overlapped with the old-policy and reference passes vs not, and
one step of each engine (reference, TRL's GRPOTrainer) side by side.

Runs `clients/configs/tiny-cpu.yaml` (the learning test's model and task) twice in one process
against `proctor serve` started here: (a) scoring then the two forward passes, one after the other
(`overlap_scoring: false`); (b) scoring in the background while the passes run (the default).
Both runs use the same seed, so everything but the timings must come out identical: the overlap
may change when work happens, never what is learned. Larger batches than the learning test
(`--prompts`, `--group-size`) give scoring something to hide behind.

A third run (c) is the same config on `--engine trl`: its step time (wall time of a whole step,
from `cpu_hours`: the tiny model runs on CPU) and scoring time beside the reference engine's,
and their ratio. TRL does not split its step into generation and passes, so only those two
columns compare.

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
UNTIMED = (*TIMINGS, "cpu_hours", "cpu_hours_total")


def run(
    url: str, steps: int, overlap: bool, prompts: int, group_size: int, engine: str = "reference"
) -> list[dict[str, Any]]:
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
        if engine == "trl":
            from proctor_client.trainer import trl_engine

            trl_engine.train(args, url, Path(out), stop_after=steps)
        else:
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
        on_trl = run(url, steps, True, prompts, group_size, engine="trl")

    def untimed(metrics: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{k: v for k, v in m.items() if k not in UNTIMED} for m in metrics]

    same = untimed(sequential) == untimed(overlapped)
    unjudged = sum(int(m["unjudged"]) for m in sequential + overlapped + on_trl)
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
    print("engine            step (s)  scoring (s)")
    step_ref, step_trl = mean(overlapped, "cpu_hours") * 3600, mean(on_trl, "cpu_hours") * 3600
    print(f"{'(b) reference':16s}  {step_ref:8.3f}  {mean(overlapped, 'time_scoring'):11.3f}")
    print(f"{'(c) trl':16s}  {step_trl:8.3f}  {mean(on_trl, 'time_scoring'):11.3f}")
    print(f"step time, trl/reference: {step_trl / step_ref:.2f}x")
    if options.json:
        summary = {name: {k: mean(m, k) for k in TIMINGS} for name, m in rows}
        engines = {"reference_step_s": step_ref, "trl_step_s": step_trl}
        print(json.dumps({"steps": steps, "ratio": ratio, "same": same, **summary, **engines}))
    return 0 if same and unjudged == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
