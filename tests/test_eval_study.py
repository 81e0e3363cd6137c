"""`report_from_results`: the report.json dict from rows and results, without the CLI; and the
warnings a study's design earns (seeds, decoding, spec)."""

from __future__ import annotations

from typing import Any

import pytest

from proctor_client._defaults import DEFAULT_SPEC
from proctor_client.evaluation import report_from_results
from proctor_client.evaluation.scoring import DEFAULT_SPEC as EVALUATOR_DEFAULT


def _row(prompt: int, sample: int, model: str, **extra: Any) -> dict[str, Any]:
    return {
        "prompt_id": f"p{prompt}",
        "sample": sample,
        "domain": "math",
        "reference": {"answer": "1"},
        "response": "x",
        "model": model,
        **extra,
    }


def _result(success: bool) -> dict[str, Any]:
    score = 1.0 if success else 0.0
    return {"status": "ok", "success": success, "score": score, "reward": score, "parsed": True}


def _study(models: dict[str, dict[str, Any]], seeds: int = 1) -> tuple[list[Any], list[Any]]:
    rows, results = [], []
    for model, extra in models.items():
        for seed in range(seeds):
            for prompt in range(20):
                for sample in range(8):
                    labels = {"seed": seed} if seeds > 1 else {}
                    rows.append(_row(prompt, sample, model, **labels, **extra))
                    results.append(_result((prompt * 7 + sample * 3 + seed) % 5 < prompt % 5))
    return rows, results


def test_report_from_results_is_the_report_json_dict() -> None:
    rows, results = _study({"base": {}, "rl": {}}, seeds=1)
    report = report_from_results(rows, results, k=[1, 4, 8], bootstrap=300, rng_seed=1)
    assert report["spec"]["name"] == DEFAULT_SPEC
    entry = report["models"]["base"]["pass_at_k"]["4"]
    assert entry["ci"][0] <= entry["estimate"] <= entry["ci"][1]
    assert entry["ci_recipe"] is None  # one seed: no recipe-level interval
    assert set(report["paired"]["base|rl"]["solved"]["8"]) == {
        "only_a",
        "only_b",
        "both",
        "neither",
    }
    assert "training seeds resampled" not in report["study"]["bootstrap"]
    assert "no recipe level" in report["study"]["bootstrap"]
    with pytest.raises(TypeError, match="unknown option"):
        report_from_results(rows, results, resamples=10)


def test_one_seed_and_no_seed_labels_are_warned_about() -> None:
    rows, results = _study({"rl": {}})
    warnings = report_from_results(rows, results, bootstrap=200)["warnings"]
    assert any("rl:" in w and "seed" in w for w in warnings), warnings
    rows, results = _study({"rl": {}}, seeds=3)
    report = report_from_results(rows, results, bootstrap=200)
    assert not any("seed" in w for w in report["warnings"]), report["warnings"]
    assert report["models"]["rl"]["pass_at_k"]["1"]["ci_recipe"] is not None


def test_models_sampled_at_different_temperatures_are_warned_about() -> None:
    def decoding(t: float) -> dict[str, Any]:
        return {"decoding": {"requested": {"temperature": t}, "effective": {"temperature": t}}}

    rows, results = _study({"base": decoding(0.6), "rl": decoding(1.0)})
    warnings = report_from_results(rows, results, bootstrap=200)["warnings"]
    assert any("different decoding: temperature" in w for w in warnings), warnings
    same_rows, same_results = _study({"base": decoding(0.6), "rl": decoding(0.6)})
    warnings = report_from_results(same_rows, same_results, bootstrap=200)["warnings"]
    assert not any("decoding" in w for w in warnings), warnings
    unknown = {"decoding": {"requested": {"temperature": 0.6}, "effective": None}}
    rows, results = _study({"base": unknown, "rl": decoding(0.6)})
    warnings = report_from_results(rows, results, bootstrap=200)["warnings"]
    assert any("effective decoding is unknown" in w for w in warnings), warnings


def test_a_spec_other_than_the_training_one_is_said_loudly() -> None:
    rows, results = _study({"rl": {"training_spec": "prorl-v1"}})
    report = report_from_results(rows, results, spec="prorl-v1-careful", bootstrap=200)
    assert report["warnings"][0].startswith("SPEC MISMATCH: rl was trained under prorl-v1")
    same = report_from_results(rows, results, spec="prorl-v1", bootstrap=200)
    assert not any("SPEC MISMATCH" in w for w in same["warnings"])


def test_the_trainer_and_the_evaluator_share_one_default_spec() -> None:
    schedule = pytest.importorskip("proctor_client.trainer.schedule")  # needs the trainer extra
    assert schedule.Stage.model_fields["spec"].default == DEFAULT_SPEC == EVALUATOR_DEFAULT
