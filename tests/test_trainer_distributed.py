"""The trainer under `torchrun` with two CPU ranks (gloo): uneven shares of a minibatch give the
whole minibatch's gradient, and a run trains with the ranks' weights equal at every checkpoint."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from proctor_client.trainer.metrics import read_metrics
from tests.helpers import running_server

RANKS = Path(__file__).parent / "trainer_ranks.py"


def _torchrun(*arguments: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2"]
    return subprocess.run(
        [*command, str(RANKS), *arguments],
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=420,
    )


def test_two_ranks_sum_uneven_shares_exactly_and_train_with_equal_weights(
    tmp_path: Path,
) -> None:
    with running_server() as server:
        done = _torchrun(server.url, str(tmp_path))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stdout.count("equals the full minibatch's: True") == 2
    metrics = read_metrics(tmp_path / "metrics.jsonl")  # rank 0 writes, for both
    assert [m["step"] for m in metrics] == [0, 1, 2]
    # each rank fills up to 8 of the 16 groups; both take the same two updates
    assert all(8 < m["groups_accepted"] <= 16 and m["updates"] == 2 for m in metrics)
    assert sorted(p.name for p in (tmp_path / "checkpoints").glob("*.pt")) == [
        "step-000000.pt",
        "step-000003.pt",
    ]
