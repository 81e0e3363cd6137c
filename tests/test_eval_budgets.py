"""Equal generated-token budgets and GPU-hours: the arithmetic on known figures, and a study
whose rows record tokens, sampling runs and the training run's hours."""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from proctor_client.evaluation import report_from_results
from proctor_client.evaluation.bootstrap import Design
from proctor_client.evaluation.budgets import RunTime, equal_tokens, model_cost
from proctor_client.evaluation.estimators import pass_at_k
from proctor_client.evaluation.report_markdown import write_markdown
from proctor_client.evaluation.rows import Generation
from proctor_client.evaluation.sampling import Decoding, RunFacts, open_output
from proctor_client.evaluation.scoring import SpecSummary
from proctor_client.evaluation.store import ScoredRow
from proctor_client.evaluation.study import options_from, study_from_scored
from tests.eval_synthetic import math_row


def test_cost_of_a_model() -> None:
    tokens = np.array([100.0, math.nan, 300.0])
    runs = {"r1": RunTime("H100", 2, 1800.0), "r2": RunTime("H100", 1, 3600.0)}
    cost = model_cost(tokens, runs, [10.0, 12.5], [1, 4])
    assert cost.tokens_per_sample == 200.0 and cost.rows_with_tokens == 2
    assert cost.tokens_at_k == [200.0, 800.0]
    assert cost.sampling_gpu_hours == pytest.approx(2 * 0.5 + 1 * 1.0)
    assert cost.sampling_devices == ["H100"] and cost.sampling_runs == 2
    assert cost.training_gpu_hours == 12.5  # the run's total at its end
    # a run that does not say how many devices it used makes the total unknown, not smaller
    runs["r3"] = RunTime(None, None, 60.0)
    unknown = model_cost(np.array([math.nan]), runs, [], [1])
    assert unknown.sampling_gpu_hours is None and unknown.sampling_devices == ["H100", "unknown"]
    assert unknown.tokens_per_sample is None and unknown.tokens_at_k is None
    assert unknown.training_gpu_hours is None


def test_equal_budgets_give_the_longer_model_fewer_samples() -> None:
    rng = np.random.default_rng(0)
    prompts = 40
    ca = rng.integers(0, 17, (1, prompts))
    cb = rng.integers(0, 17, (3, prompts))
    na, nb = np.full_like(ca, 16), np.full_like(cb, 16)
    found = equal_tokens(
        ((na, ca), (nb, cb)), (100.0, 400.0), Design.pooled(prompts), (300, 0.95), rng
    )
    assert found is not None
    # budget: the smaller spend at 16 samples, 16 x 100 tokens; b's responses are 4x as long
    assert found.tokens == 1600.0 and (found.k_a, found.k_b) == (16, 4)
    assert found.a == pytest.approx(pass_at_k(16, ca, 16).mean())
    assert found.b == pytest.approx(pass_at_k(16, cb, 4).mean())
    assert found.difference.estimate == pytest.approx(found.a - found.b)
    assert found.difference.low < found.difference.estimate < found.difference.high
    assert found.difference_recipe is not None  # b has three seeds
    assert (
        equal_tokens(((na, ca), (nb, cb)), (0.0, 1.0), Design.pooled(prompts), (9, 0.95), rng)
        is None
    )


def _rows(
    model: str, tokens: int, run: str, devices: int | None, hours: float | None
) -> list[dict[str, Any]]:
    rows = []
    for p in range(6):
        for s in range(8):
            extra: dict[str, Any] = {
                "response_tokens": tokens,
                "sampling": {
                    "run": run,
                    "device": "H100" if devices else None,
                    "devices": devices,
                    "elapsed_s": 450.0 * (p * 8 + s + 1) / 48,
                },
            }
            if hours is not None:
                extra["training_gpu_hours"] = hours
            rows.append(math_row(f"m-{p}", s, model, "correct" if s <= p else "wrong", **extra))
    return rows


def _result(row: dict[str, Any]) -> dict[str, Any]:
    won = row["response"].endswith(f"{{{row['reference']['answer']}}}")
    return {
        "status": "ok",
        "success": won,
        "score": float(won),
        "reward": float(won),
        "parsed": True,
    }


def test_report_gives_costs_and_the_equal_budget_comparison() -> None:
    rows = _rows("rl", 200, "a", 4, 96.0) + _rows("base", 100, "b", None, None)
    report = report_from_results(rows, [_result(r) for r in rows], k=[1, 2, 4, 8], bootstrap=300)
    rl, base = report["costs"]["rl"], report["costs"]["base"]
    assert rl["tokens_per_sample"] == 200.0 and rl["tokens_at_k"] == [200.0, 400.0, 800.0, 1600.0]
    assert rl["sampling_gpu_hours"] == pytest.approx(4 * 450.0 / 3600)
    assert rl["training_gpu_hours"] == 96.0
    assert base["sampling_gpu_hours"] is None and base["training_gpu_hours"] is None
    equal = report["equal_tokens"]["rl|base"]
    # base spends 800 tokens a prompt at its 8 samples; rl affords 4 samples of that budget
    assert equal["tokens_per_prompt"] == 800.0 and (equal["k_a"], equal["k_b"]) == (4, 8)
    c = np.arange(1, 7)  # prompt p: samples 0..p correct
    assert equal["pass_a"] == pytest.approx(pass_at_k(8, c, 4).mean())
    assert equal["pass_b"] == pytest.approx(pass_at_k(8, c, 8).mean())
    assert equal["difference"]["estimate"] == pytest.approx(equal["pass_a"] - equal["pass_b"])


def test_rows_without_tokens_or_stamps_report_no_costs() -> None:
    rows = [math_row("m-1", s, "x", "correct") for s in range(4)]
    report = report_from_results(rows, [_result(r) for r in rows], k=[1, 2], bootstrap=100)
    cost = report["costs"]["x"]
    assert cost["tokens_per_sample"] is None and cost["sampling_runs"] == 0
    assert cost["sampling_gpu_hours"] is None and report["equal_tokens"] == {}


def test_markdown_has_the_cost_section(tmp_path: Path) -> None:
    rows = _rows("rl", 200, "a", 4, 96.0) + _rows("base", 100, "b", None, None)
    scored = [ScoredRow(Generation.model_validate(r), _result(r)) for r in rows]
    study = study_from_scored(scored, options_from(k=[1, 2, 4, 8], bootstrap=200), "s")
    spec = SpecSummary("s", "1", "h", {})
    figures: dict[str, str] = defaultdict(lambda: "figure.png")
    write_markdown(tmp_path / "report.md", study, spec, figures, [], None)
    text = (tmp_path / "report.md").read_text()
    assert "## Cost: tokens and GPU-hours" in text
    assert "| rl | 200.0 (48) | 1,600 | 1 | H100 | 0.50 | 96.00 |" in text
    assert "| base | 100.0 (48) | 800 | 1 | unknown | unknown | unknown |" in text
    assert "| rl|base | 800 | 4, 8 |" in text
    assert "| rl | 8 | 1,600 | " in text and "| base | 8 | 800 | " in text  # pass@k by tokens


def test_output_stamps_rows_and_an_undeclared_endpoint_device_stays_unknown(
    tmp_path: Path,
) -> None:
    path = tmp_path / "g.jsonl"
    output = open_output(path, "m", None, Decoding(), RunFacts(None, None, 7.0))
    for s in range(2):
        output.write(math_row("m-1", s, "m", "correct"))
    output.close()
    rows = [Generation.model_validate_json(line) for line in path.read_text().splitlines()]
    assert all(r.sampling is not None and r.sampling.devices is None for r in rows)
    assert [r.training_gpu_hours for r in rows] == [7.0, 7.0]
    dumped = [r.model_dump(exclude_none=True) for r in rows]
    report = report_from_results(dumped, [_result(r) for r in dumped], k=[1], bootstrap=50)
    assert report["costs"]["m"]["sampling_runs"] == 1
    assert report["costs"]["m"]["sampling_gpu_hours"] is None  # not a smaller figure
    assert report["costs"]["m"]["training_gpu_hours"] == 7.0
