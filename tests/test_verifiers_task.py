"""`ProctorTask` in verifiers 0.4 (v1): scripted rollouts of a task mixing it in, scored by the
task's own `score(trace)` inside verifiers' venv (tests/run builds it; its pins clash with the
server's) against a live server: rewards and metrics recorded on the trace, a truncated reply's
termination penalty, and an unjudged sample that raises instead of scoring 0."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import Server

ROOT = Path(__file__).parent.parent
VERIFIERS_PYTHON = Path(
    os.environ.get("PROCTOR_VERIFIERS_PYTHON", "/opt/proctor-verifiers/bin/python")
)


def _rollouts(url: str, rollouts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    if not VERIFIERS_PYTHON.exists():
        pytest.skip(f"no verifiers environment at {VERIFIERS_PYTHON} (tests/run builds it)")
    done = subprocess.run(
        [str(VERIFIERS_PYTHON), str(ROOT / "tests" / "verifiers_task.py"), url,
         json.dumps(rollouts)],
        env={**os.environ, "PYTHONPATH": str(ROOT / "clients")},
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    outcomes = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert len(outcomes) == len(rollouts), done.stdout
    return outcomes


def _rollout(answer: str, reply: str, finish: str = "stop", **more: Any) -> dict[str, Any]:
    return {"answer": answer, "reply": reply, "finish_reason": finish,
            "completion_tokens": 40, "max_tokens": 1024, **more}  # fmt: skip


def test_scripted_rollouts_are_rewarded_by_proctor(server: Server) -> None:
    outcomes = _rollouts(
        server.url,
        [
            _rollout("0.5", "Halving gives \\boxed{\\frac{1}{2}}"),
            _rollout("0.5", "It is \\boxed{2}"),
            _rollout("0.5", "I think it is one half"),  # no answer found: parsed 0
            _rollout("B", "The answer is B", domain="stem"),
        ],
    )
    assert [o["rewards"]["proctor"] for o in outcomes] == [1.0, 0.0, 0.0, 1.0]
    assert [o["metrics"]["success"] for o in outcomes] == [1.0, 0.0, 0.0, 1.0]
    assert [o["metrics"]["parsed"] for o in outcomes] == [1.0, 1.0, 0.0, 1.0]
    assert outcomes[0]["metrics"]["score"] == 1.0 and outcomes[0]["reward"] == 1.0


def test_a_truncated_reply_gets_the_spec_s_penalty(make_server: Callable[..., Server]) -> None:
    """The finish reason verifiers records on the model call reaches Proctor: under a
    termination spec a reply cut at `max_tokens` earns 0 though its answer is right."""
    srv = make_server(default_spec="prorl-v1-termination")
    stop, cut = _rollouts(
        srv.url,
        [
            _rollout("0.5", "so \\boxed{\\frac{1}{2}}"),
            _rollout("0.5", "so \\boxed{\\frac{1}{2}}", "length", completion_tokens=1024),
        ],
    )
    assert stop["rewards"]["proctor"] == 1.0
    assert cut["truncated"] is True
    assert cut["rewards"]["proctor"] == 0.0
    assert cut["metrics"]["score"] == 1.0  # solved, and penalised for the truncation


def test_an_unjudged_sample_raises_not_zero(server: Server) -> None:
    (outcome,) = _rollouts(server.url, [_rollout("2", "done", domain="no_such_domain")])
    assert outcome["error"] == "TaskError"
    assert "verifiers cannot leave it out" in outcome["message"]
    assert outcome["rewards"]["proctor"] is None  # left unset, never 0
