"""The reference GRPO trainer end to end on CPU against a live Proctor: it learns from reward
alone, a second run with the same seed gives the same curve, a resumed run equals the
uninterrupted one, the plateau rule fires a reset that training goes on after, and a Proctor that
does not answer pauses the step instead of scoring zeros."""

from __future__ import annotations

import json
import logging
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml

from proctor_client.trainer import cli
from proctor_client.trainer.checkpoint import load_checkpoint
from proctor_client.trainer.grpo import Args, load_args, train
from proctor_client.trainer.metrics import read_metrics
from proctor_client.trainer.proctor import PreflightFailed, ProctorUnreachable, puzzle_prompts
from tests.fault_proxy import Refusal, fault_proxy
from tests.helpers import Server, free_port, running_server

TINY = Path(__file__).parent.parent / "clients" / "configs" / "tiny-cpu.yaml"
TIMINGS = (
    "time_generation",
    "time_scoring",
    "time_scoring_and_passes",
    "time_update",
    "cpu_hours",
    "cpu_hours_total",
)


def _tiny(**overrides: Any) -> Args:
    return load_args(TINY, tensorboard=False, **overrides)


def _curve(out: Path) -> list[dict[str, Any]]:
    """Every step's metrics without its timings (the rest must repeat exactly)."""
    return [
        {k: v for k, v in m.items() if k not in TIMINGS}
        for m in read_metrics(out / "metrics.jsonl")
    ]


@pytest.fixture(scope="module")
def proctor() -> Iterator[Server]:
    with running_server() as server:
        yield server


@pytest.fixture(scope="module")
def learned(proctor: Server, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The learning test's run: tiny-cpu.yaml as shipped."""
    out = tmp_path_factory.mktemp("learned")
    train(_tiny(), proctor.url, out)
    return out


def test_tiny_model_learns_the_digit_task_from_reward(learned: Path) -> None:
    metrics = read_metrics(learned / "metrics.jsonl")
    rewards = [m["reward_mean"] for m in metrics]
    assert len(rewards) == 80
    # a CPU run counts CPU hours, and claims no GPU hours
    assert metrics[-1]["cpu_hours_total"] > 0
    assert not [k for m in metrics for k in m if k.startswith("gpu_hours")]
    early, late = rewards[:5], rewards[-10:]
    assert sum(early) / len(early) < 0.2  # chance is about 0.07
    assert sum(late) / len(late) > 0.6


def test_a_second_run_with_the_same_seed_gives_the_same_curve(
    learned: Path, proctor: Server, tmp_path: Path
) -> None:
    train(_tiny(), proctor.url, tmp_path, stop_after=20)
    assert _curve(tmp_path) == _curve(learned)[:20]
    again = load_checkpoint(tmp_path / "checkpoints" / "step-000020.pt")["policy"]
    first = load_checkpoint(learned / "checkpoints" / "step-000020.pt")["policy"]
    assert all(torch.equal(again[name], first[name]) for name in first)


def test_resume_from_a_checkpoint_equals_the_uninterrupted_run(
    learned: Path, proctor: Server, tmp_path: Path
) -> None:
    args = _tiny(checkpoint_every=0)
    train(args, proctor.url, tmp_path, stop_after=7)  # checkpoints after step 7 (stopping)
    # a crash after two more steps: their metrics lines exist, their checkpoint does not
    with (tmp_path / "metrics.jsonl").open("a") as metrics:
        metrics.write('{"step": 7, "stage": "digits", "reward_mean": 0.0}\n')
        metrics.write('{"step": 8, "stage": "digits", "reward_mean": 0.0}\n')
    train(args, proctor.url, tmp_path, stop_after=20)
    assert _curve(tmp_path) == _curve(learned)[:20]
    resumed = load_checkpoint(tmp_path / "checkpoints" / "step-000020.pt")
    uninterrupted = load_checkpoint(learned / "checkpoints" / "step-000020.pt")
    for part in ("policy", "reference"):
        assert all(torch.equal(resumed[part][k], uninterrupted[part][k]) for k in resumed[part])
    assert resumed["optimizer"]["state"].keys() == uninterrupted["optimizer"]["state"].keys()


def test_the_plateau_rule_fires_a_reset_and_training_goes_on(
    proctor: Server, tmp_path: Path
) -> None:
    # One update per step, so a step that opens with a reset measures KL against an exact copy.
    # No validation pass@1 can beat the best by 1.0: the rule fires on every second evaluation.
    args = _tiny(
        prompts_per_minibatch=16,
        validation_every=1,
        validation_prompts=20,
        plateau_patience=1,
        plateau_min_delta=1.0,
        learning_rate=1e-2,
    )
    train(args, proctor.url, tmp_path, stop_after=6)
    metrics = read_metrics(tmp_path / "metrics.jsonl")
    assert [m["reset"] for m in metrics] == ["", "", "plateau", "", "plateau", ""]
    assert all(m["updates"] == 1 and m["val_pass1"] is not None for m in metrics)
    assert metrics[2]["kl"] == 0.0 and metrics[4]["kl"] == 0.0
    assert metrics[1]["kl"] > 0 and metrics[3]["kl"] > 0 and metrics[5]["kl"] > 0
    # a checkpoint precedes each reset, so a resume cannot lose one
    saved = sorted(p.name for p in (tmp_path / "checkpoints").glob("*.pt"))
    assert {"step-000002.pt", "step-000004.pt"} <= set(saved)
    assert load_checkpoint(tmp_path / "checkpoints" / "step-000002.pt")["plateau_fired"]


def test_a_proctor_gone_away_mid_run_pauses_the_step_until_it_answers(
    proctor: Server, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Step 1's first scoring request is refused twice with a 503, as a redeploy behind a load
    # balancer answers: the trainer has reached Proctor before, so it pauses and sends again.
    refusals = [Refusal(503)] * 2
    caplog.set_level(logging.WARNING, logger="proctor_client.trainer")
    with fault_proxy(proctor.url, refusals=refusals, refuse_marker=b'"1-0-0"') as proxy:
        train(_tiny(scoring_pause_s=0.5, scoring_retries=0), proxy.url, tmp_path, stop_after=3)
        assert proxy.refusals == []  # both were answered
    assert "did not answer" in caplog.text and "the step is paused" in caplog.text
    metrics = read_metrics(tmp_path / "metrics.jsonl")
    assert [m["step"] for m in metrics] == [0, 1, 2]
    assert all(m["unjudged"] == 0 for m in metrics)  # nothing was scored as a zero


def test_a_proctor_that_stops_answering_stops_the_run_without_metrics(
    proctor: Server, tmp_path: Path
) -> None:
    refusals = [Refusal(503)] * 100  # every scoring request of step 0
    with fault_proxy(proctor.url, refusals=refusals, refuse_marker=b'"0-0-0"') as proxy:
        args = _tiny(scoring_pause_s=0.1, scoring_max_pauses=2, scoring_retries=0)
        with pytest.raises(ProctorUnreachable, match="did not answer after 2 pauses"):
            train(args, proxy.url, tmp_path)
    assert read_metrics(tmp_path / "metrics.jsonl") == []
    assert (tmp_path / "checkpoints" / "step-000000.pt").exists()  # where a resume starts


def test_a_wrong_url_or_spec_stops_before_the_model_is_built(
    proctor: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nobody = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(PreflightFailed, match=f"cannot reach Proctor at {nobody}"):
        train(_tiny(), nobody, tmp_path / "nobody")
    assert not (tmp_path / "nobody").exists()  # nothing was built or written
    stage = {**yaml.safe_load(TINY.read_text())["stages"][0], "spec": "prorl-v9"}
    with pytest.raises(PreflightFailed, match=r"has no spec \['prorl-v9'\]; it has \[.*prorl-v1"):
        train(_tiny(stages=[stage]), proctor.url, tmp_path / "spec")
    argv = [str(TINY), "--url", nobody, "--out", str(tmp_path / "cli")]
    assert cli.main(argv) == 2
    assert f"cannot reach Proctor at {nobody}" in capsys.readouterr().err


def test_the_command_refuses_a_bad_config_naming_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(TINY.read_text() + "learning_rat: 1.0\n")
    assert cli.main([str(bad), "--url", "http://127.0.0.1:9", "--out", str(tmp_path / "o")]) == 2
    assert "learning_rat" in capsys.readouterr().err


def test_the_command_trains_and_reports_its_checkpoint(
    proctor: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    argv = [str(TINY), "--url", proctor.url, "--out", str(out), "--stop-after", "2"]
    assert cli.main(argv) == 0
    assert "step-000002.pt" in capsys.readouterr().out
    assert [m["step"] for m in read_metrics(out / "metrics.jsonl")] == [0, 1]
    assert (out / "tensorboard").is_dir()


def test_a_key_protected_proctor_needs_the_key(
    make_server: Callable[..., Server], tmp_path: Path
) -> None:
    secured = make_server(workers=1, api_keys=("trainer-key-0123456789",))
    # found by the preflight, before the model is built: a 401 is the run's, not a pause
    with pytest.raises(PreflightFailed, match=r"refused /v1/specs with 401.*PROCTOR_API_KEY"):
        train(_tiny(), secured.url, tmp_path / "without", stop_after=1)
    train(_tiny(), secured.url, tmp_path / "with", stop_after=1, api_key="trainer-key-0123456789")
    assert [m["step"] for m in read_metrics(tmp_path / "with" / "metrics.jsonl")] == [0]


def test_unjudged_items_are_left_out_never_scored_as_zero(proctor: Server, tmp_path: Path) -> None:
    # Half the prompts name a domain Proctor does not know: their items come back `invalid`.
    prompts = tmp_path / "unknown.jsonl"
    row = {"prompt": "box seven", "domain": "no-such-domain", "reference": {"answer": "7"}}
    prompts.write_text(json.dumps(row) + "\n")
    stage = {**yaml.safe_load(TINY.read_text())["stages"][0], "mixture": {"digits": 1, "bad": 1}}
    data = {
        "digits": {"kind": "digits", "size": 100},
        "bad": {"kind": "jsonl", "path": str(prompts)},
    }
    train(_tiny(data=data, stages=[stage]), proctor.url, tmp_path / "out", stop_after=2)
    for m in read_metrics(tmp_path / "out" / "metrics.jsonl"):
        assert m["status/invalid"] == m["unjudged"] > 0
        # the means are over judged responses only: all digit prompts, none of the invalid ones
        assert m["reward/math"] == m["reward_mean"]
        assert "reward/no-such-domain" not in m
        assert m["groups_accepted"] + m["groups_rejected"] + m["groups_surplus"] > 0


def test_puzzle_prompts_come_from_proctor(proctor: Server) -> None:
    prompts = puzzle_prompts(proctor.url, "basic_arithmetic", None, 3, seed=5)
    assert [p.domain for p in prompts] == ["puzzle"] * 3
    assert len({p.id for p in prompts}) == 3 and all(p.text for p in prompts)
    assert all(p.reference for p in prompts)
    with pytest.raises(ValueError, match="no_such_task"):
        puzzle_prompts(proctor.url, "no_such_task", None, 1, seed=5)


def test_puzzle_prompts_past_the_dataset_default_size(proctor: Server) -> None:
    # prorl-8-stage.yaml asks 4,096 entries of tasks whose datasets hold 500 unless told.
    prompts = puzzle_prompts(proctor.url, "basic_arithmetic", None, 600, seed=5)
    assert len({p.id for p in prompts}) == 600
    with pytest.raises(ValueError, match="size"):
        puzzle_prompts(proctor.url, "basic_arithmetic", {"size": 10}, 11, seed=5)


def test_ctrl_c_stops_after_the_step_with_a_checkpoint_and_the_run_resumes(
    learned: Path, proctor: Server, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    command = [sys.executable, "-m", "proctor_client.trainer.cli", str(TINY)]
    child = subprocess.Popen(
        [*command, "--url", proctor.url, "--out", str(out)],
        stderr=subprocess.PIPE,
        text=True,
    )
    metrics = out / "metrics.jsonl"
    deadline = time.monotonic() + 300
    while not (metrics.exists() and metrics.read_text().count("\n") >= 2):
        assert child.poll() is None and time.monotonic() < deadline, "no steps were written"
        time.sleep(0.05)
    child.send_signal(signal.SIGINT)
    _, errors = child.communicate(timeout=300)
    assert child.returncode == 0, errors
    assert "stopping after this step" in errors
    done = len(read_metrics(metrics))
    assert 2 <= done < 80
    assert (out / "checkpoints" / f"step-{done:06d}.pt").exists()
    train(_tiny(), proctor.url, out, stop_after=done + 2)
    assert _curve(out) == _curve(learned)[: done + 2]


@pytest.mark.parametrize("reference,optimizer", [(True, False), (False, True)])
def test_reference_and_optimizer_resets_switch_separately(
    proctor: Server, tmp_path: Path, reference: bool, optimizer: bool
) -> None:
    # The review's section 13.3 ablation: a listed reset at step 2, one update per step.
    args = _tiny(
        prompts_per_minibatch=16,
        reset_steps=[2],
        reset_reference=reference,
        reset_optimizer=optimizer,
    )
    train(args, proctor.url, tmp_path, stop_after=3)
    metrics = read_metrics(tmp_path / "metrics.jsonl")
    assert [m["reset"] for m in metrics] == ["", "", "listed"]
    assert (metrics[2]["kl"] == 0.0) is reference  # measured against an exact copy, or not
    state = load_checkpoint(tmp_path / "checkpoints" / "step-000003.pt")["optimizer"]["state"]
    steps = {int(s["step"]) for s in state.values()}
    assert steps == ({1} if optimizer else {3})  # AdamW counted afresh from the reset, or not
