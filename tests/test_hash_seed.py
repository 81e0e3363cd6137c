"""Worker processes start with the pinned hash seed, however many pools start them at once: the
five hash-seed-dependent Reasoning Gym tasks can then be regenerated from their coordinates in
the service's workers and in the evaluator's alike."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from reward_specs.hash_seed import PINNED_HASH_SEED, pinned_hash_seed

ROOT = Path(__file__).resolve().parents[1]


def test_threads_starting_processes_at_once_each_see_the_pinned_seed() -> None:
    before = os.environ.get("PYTHONHASHSEED")
    seen: list[str | None] = []

    def start() -> None:
        with pinned_hash_seed():
            time.sleep(0.01)  # another thread enters and leaves meanwhile, unless it must wait
            seen.append(os.environ.get("PYTHONHASHSEED"))

    threads = [threading.Thread(target=start) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert seen == [PINNED_HASH_SEED] * 8
    assert os.environ.get("PYTHONHASHSEED") == before


_EVALUATE = """
from proctor_client.local import LocalScorer
from proctor_client.evaluation.rows import Generation

row = Generation.model_validate({
    "prompt_id": "p", "sample": 0, "domain": "puzzle", "response": "<answer>x</answer>",
    "reference": {"task": "word_ladder", "config": {}, "seed": 5, "index": 0},
})
scorer = LocalScorer(workers=1)
try:
    (result,) = scorer.score([row], lambda _: None)
finally:
    scorer.close()
print(result["status"], result["error"])
"""


def test_the_evaluator_regenerates_hash_seed_dependent_puzzles() -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"}
    env["PYTHONPATH"] = f"{ROOT}{os.pathsep}{ROOT / 'clients'}"
    done = subprocess.run(
        [sys.executable, "-c", _EVALUATE], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[0] == "ok", done.stdout  # not refused as unreproducible
