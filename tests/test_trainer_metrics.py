"""Per-rank metrics combine into one step's line: counts add up, timings take the slowest rank,
other numbers the ranks' mean; with one process the line is that process's."""

from __future__ import annotations

import logging

import pytest

from proctor_client.trainer.metrics import combine_ranks, log_step


def test_one_rank_is_its_own_line() -> None:
    line = {"step": 3, "reward_mean": 0.5}
    assert combine_ranks([line]) is line


def test_ranks_combine_by_kind_of_number() -> None:
    ranks = [
        {"step": 3, "stage": "s1", "reward_mean": 0.2, "groups_accepted": 5, "tokens_rejected": 40,
         "status/ok": 30, "unjudged": 1, "time_update": 1.5, "val_pass1": None, "reset": ""},
        {"step": 3, "stage": "s1", "reward_mean": 0.6, "groups_accepted": 8, "tokens_rejected": 2,
         "status/ok": 32, "unjudged": 0, "time_update": 0.5, "val_pass1": None, "reset": "",
         "reward/math": 0.6},
    ]  # fmt: skip
    assert combine_ranks(ranks) == {
        "step": 3,
        "stage": "s1",
        "reward_mean": 0.4,
        "groups_accepted": 13,
        "tokens_rejected": 42,
        "status/ok": 62,
        "unjudged": 1,
        "time_update": 1.5,
        "val_pass1": None,
        "reset": "",
        "reward/math": 0.6,  # only the rank that had math prompts
    }


def test_the_step_line_names_the_step_metrics_jsonl_holds(caplog: pytest.LogCaptureFixture) -> None:
    metrics = {
        "step": 0,
        "stage": "main",
        "reward_mean": 0.5,
        "score_mean": None,
        "kl": 0.0,
        "groups_accepted": 4,
        "groups_rejected": 1,
        "sampling_rounds": 1,
    }
    with caplog.at_level(logging.INFO, logger="proctor_client.trainer"):
        log_step(metrics, "1m00s", 80)
        log_step({**metrics, "step": 79, "sampling_rounds": 3}, "0m00s", 80)
    first, last = caplog.messages
    assert first.startswith("step 0 (1/80) [main]") and "in 1 round," in first
    assert last.startswith("step 79 (80/80) [main]") and "in 3 rounds," in last
