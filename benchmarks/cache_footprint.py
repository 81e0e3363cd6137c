"""What one entry of each cache a puzzle item stacks on holds, measured per task at default configs.

For every Reasoning Gym task (in this process, with tracemalloc): the bytes one more dataset
instance keeps alive (built after a first one, so that data a task loads once per process is not
counted), the bytes a regenerated entry keeps in `puzzles.entries` (averaged over up to 8), and the
bytes a verdict keeps in `puzzles.verdicts` (the gold answer scored, the entries sent by value;
what the task's scorer keeps for itself, such as sympy's cache, is counted in). Prints the median
and the largest of each, every task's dataset once, and the bound of `reward_specs/puzzles/gym.py`'s
docstring filled in with the largest of each. `--short` (or PROCTOR_SHORT=1) measures 10 tasks.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import tracemalloc
import warnings
from collections.abc import Callable
from typing import Any

from reward_specs import ScoreContext, caches, reference_key
from reward_specs.puzzles import domain, gym

PER_TASK = 8


def retained(make: Callable[[], Any]) -> tuple[int, Any]:
    """Bytes still allocated after `make()` (its result held), and the result."""
    gc.collect()
    before = tracemalloc.get_traced_memory()[0]
    kept = make()
    gc.collect()
    return tracemalloc.get_traced_memory()[0] - before, kept


def measure(task: str) -> tuple[int, int, int | None]:
    """(dataset, entry, verdict) bytes for `task`; no verdict where entries have no gold string."""
    gym.scoring_dataset(task)  # what the task loads once per process
    dataset_bytes, dataset = retained(lambda: gym._build(task, {}, 1))
    indices = range(1, max(2, min(PER_TASK + 1, len(dataset))))
    gym.entry_for(task, {}, 2, 0)  # the dataset of seed 2, built
    entry_bytes, entries = retained(lambda: [gym.entry_for(task, {}, 2, i) for i in indices])
    golds = [e.get("answer") for e in entries]
    if not all(isinstance(g, str) for g in golds):
        return dataset_bytes, entry_bytes // len(indices), None
    # By value: the tasks whose entries depend on the hash seed are not regenerated for scoring.
    references = [domain.PuzzleReference(task=task, entry=e) for e in entries]
    config = domain.PuzzleConfig()

    def score() -> None:
        for n, (reference, gold) in enumerate(zip(references, golds, strict=True)):
            ctx = ScoreContext(reference_key=reference_key(f"{task}/{n}".encode()))
            domain.score_puzzle(f"<answer>{gold}</answer>", reference, config, ctx)

    verdict_bytes, _ = retained(score)
    return dataset_bytes, entry_bytes // len(indices), verdict_bytes // len(indices)


def _summary(name: str, figures: dict[str, int]) -> int:
    top = sorted(figures.items(), key=lambda kv: -kv[1])[:3]
    median = statistics.median(figures.values())
    listed = ", ".join(f"{task} {b / 1024:.1f}" for task, b in top)
    print(f"{name:9s} median {median / 1024:8.1f} KiB; largest (KiB): {listed}")
    return top[0][1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--short", action="store_true", help="10 tasks (CI)")
    args = parser.parse_args()
    short = args.short or os.environ.get("PROCTOR_SHORT") == "1"
    tasks = [t for t in gym.task_names() if t != "composite"]
    tasks = tasks[:10] if short else tasks
    warnings.simplefilter("ignore")
    tracemalloc.start()
    datasets, entries, verdicts = {}, {}, {}
    for task in tasks:
        try:
            d, e, v = measure(task)
        except Exception as exc:  # a task that cannot build at its default config: say so
            print(f"{task}: skipped ({type(exc).__name__}: {str(exc)[:80]})", file=sys.stderr)
            continue
        datasets[task], entries[task] = d, e
        if v is not None:
            verdicts[task] = v
    tracemalloc.stop()
    print(f"{len(datasets)} tasks, default configs, up to {PER_TASK} entries each")
    d = _summary("dataset", datasets)
    e = _summary("entry", entries)
    v = _summary("verdict", verdicts)
    sizes = caches.registered()
    bound = (
        sizes["puzzles.datasets"].size * d
        + sizes["puzzles.scoring_datasets"].size * d
        + sizes["puzzles.entries"].size * e
        + sizes["puzzles.verdicts"].size * v
    )
    print(f"every task's dataset once: {sum(datasets.values()) / 2**20:.0f} MiB")
    print(f"bound with the largest of each (datasets, entries, verdicts): {bound / 2**20:.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
