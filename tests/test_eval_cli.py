"""`proctor-eval` end to end: two synthetic models through the real in-process scorer, the
report and its figures, scored.jsonl reuse, bad input, the review sample, and results equal to
`proctor score`'s for the same items."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import pytest

from proctor_client.evaluation.cli import main
from proctor_client.evaluation.estimators import chance_pass_at_k, pass_at_k
from proctor_client.evaluation.plots import histogram_figure
from proctor_client.evaluation.rows import Generation
from proctor_client.evaluation.scoring import DEFAULT_SPEC
from proctor_client.evaluation.store import ScoredRow
from proctor_client.evaluation.study import options_from, study_from_scored
from service import cli as proctor_cli
from tests.eval_synthetic import math_row, rows_with_counts, two_models, write_jsonl

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _run(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str]:
    code = main([str(a) for a in args] + ["--no-progress", "--workers", "2", "--bootstrap", "500"])
    return code, capsys.readouterr().err


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The two-model study scored once (later runs of the module reuse its scored.jsonl)."""
    base = tmp_path_factory.mktemp("study")
    generations = write_jsonl(base / "generations.jsonl", rows_with_counts(two_models()))
    out = base / "out"
    assert main([str(generations), "--out", str(out), "--no-progress", "--workers", "2"]) == 0
    return generations, out


def _report(out: Path) -> dict[str, Any]:
    report: dict[str, Any] = json.loads((out / "report.json").read_text())
    return report


def test_two_models_report_their_known_statistics(study: tuple[Path, Path]) -> None:
    _, out = study
    report = _report(out)
    counts = two_models()
    assert report["spec"]["name"] == DEFAULT_SPEC == "prorl-v1-careful-2"  # the trainer's too
    for name, prompts in counts.items():
        model = report["models"][name]
        assert model["prompts"] == len(prompts) and model["samples"] == 16 * len(prompts)
        c = list(prompts.values())
        for k, entry in model["pass_at_k"].items():
            expected = pass_at_k(16, c, int(k)).mean()
            assert entry["estimate"] == pytest.approx(expected)
            assert entry["ci"][0] <= entry["estimate"] <= entry["ci"][1]
            assert entry["capped_prompts"] == 0
        # Failures alternate: odd samples answer wrongly, even ones give no answer at all.
        parsed = sum(
            16 if p.startswith("s-") else n + sum(1 for s in range(n, 16) if s % 2)
            for p, n in prompts.items()
        )
        assert model["parse_rate"] == pytest.approx(parsed / model["samples"])
        assert model["strict_success"] == pytest.approx(sum(c) / model["samples"])
        assert model["correct_given_parsed"] == pytest.approx(sum(c) / parsed)
        assert model["mean_score"] == pytest.approx(model["strict_success"])
        unsolved = {u["prompt_id"] for u in model["unsolved"]}
        assert unsolved == {p for p, n in prompts.items() if n == 0}
        assert all(
            u["upper_bound"] == pytest.approx(1 - 0.05 ** (1 / 16)) for u in model["unsolved"]
        )
        # Chance: 8 of 28 prompts are four-option multiple choice.
        for k, value in model["chance"].items():
            assert value == pytest.approx(8 / 28 * float(chance_pass_at_k(4, int(k))))
        assert set(model["families"]) == {"math", "colours"}
        assert model["families"]["math"]["chance"] is None
        colours = model["families"]["colours"]["chance"]
        assert colours["2"] == pytest.approx(float(chance_pass_at_k(4, 2)))
    assert (
        report["models"]["sharpened"]["pass_at_k"]["1"]["estimate"]
        > (report["models"]["expanded"]["pass_at_k"]["1"]["estimate"])
    )
    assert (
        report["models"]["sharpened"]["pass_at_k"]["16"]["estimate"]
        < (report["models"]["expanded"]["pass_at_k"]["16"]["estimate"])
    )


def test_paired_table_and_only_solved_by_lists(study: tuple[Path, Path]) -> None:
    _, out = study
    paired = _report(out)["paired"]
    assert list(paired) == ["sharpened|expanded"]
    pair = paired["sharpened|expanded"]
    assert pair["prompts"] == 28
    assert [q["prompt_id"] for q in pair["only_a"]] == ["m-15", "m-16", "m-17"]
    assert [q["prompt_id"] for q in pair["only_b"]] == [f"m-{i}" for i in range(10, 15)]
    assert all(q["b_samples"] == 16 for q in pair["only_a"])
    assert all(q["probability"] == 1.0 and q["b_successes"] == 0 for q in pair["only_a"])
    assert pair["budget"] == 16
    full = {c: v["estimate"] for c, v in pair["solved"]["16"].items()}  # solved at least once
    assert full == pytest.approx({"only_a": 3, "only_b": 5, "both": 18, "neither": 2})
    for k, row in pair["solved"].items():
        assert sum(v["estimate"] for v in row.values()) == pytest.approx(28), k
        for v in row.values():
            assert v["ci"][0] <= v["estimate"] <= v["ci"][1]
            assert v["ci_recipe"] is None  # one seed each: no recipe level
    one = pair["pass_at_k"]["1"]
    assert one["difference"] == pytest.approx(one["a"] - one["b"])
    assert one["ci"][0] > 0  # sharpened is better at k = 1, and clearly so
    assert pair["pass_at_k"]["16"]["ci"][0] < 0 < pair["pass_at_k"]["16"]["ci"][1]


def test_report_shows_every_figure(study: tuple[Path, Path]) -> None:
    _, out = study
    markdown = (out / "report.md").read_text()
    figures = sorted(out.glob("*.png"))
    assert {f.name for f in figures} == {
        "pass_at_k.png",
        "pass_at_k_families.png",
        "success_rates.png",
        "solved_by_sharpened_vs_expanded.png",
    }
    for figure in figures:
        data = figure.read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 5000, figure.name
        assert f"]({figure.name})" in markdown
    assert "Prompts solved only by expanded (5)" in markdown
    assert "rate < 0.1707" in markdown


def test_rerun_reuses_scores_under_the_same_spec_hash(
    study: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    generations, out = study
    code, err = _run(capsys, generations, "--out", out, "--k", "1,3,16")
    assert code == 0 and "896 rows reused" in err
    assert list(_report(out)["models"]["expanded"]["pass_at_k"]) == ["1", "3", "16"]
    # One changed response is scored again; the rest are reused.
    rows = [json.loads(line) for line in generations.read_text().splitlines()]
    rows[0] = math_row("m-0", 0, "sharpened", "wrong")
    changed = write_jsonl(tmp_path / "changed.jsonl", rows)
    code, err = _run(capsys, changed, "--out", out)
    assert code == 0 and "895 rows reused" in err
    assert _report(out)["models"]["sharpened"]["strict_success"] == pytest.approx(
        (sum(two_models()["sharpened"].values()) - 1) / 448
    )
    # Another spec (another hash) scores everything again.
    code, err = _run(capsys, changed, "--out", out, "--spec", "prorl-v1-termination")
    assert code == 0 and "reused" not in err
    assert _report(out)["spec"]["name"] == "prorl-v1-termination"
    stored = [json.loads(line) for line in (out / "scored.jsonl").read_text().splitlines()]
    assert len(stored) == 896 and {s["spec"]["name"] for s in stored} == {"prorl-v1-termination"}


def _two_prompt_rows() -> list[dict[str, Any]]:
    return [
        math_row(f"m-{p}", s, "default", "correct" if s else "wrong")
        for p in (1, 2)
        for s in range(4)
    ]


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda rows: rows[2].pop("sample"), "line 3: sample: Field required"),
        (lambda rows: rows[4].update(sample="two"), "line 5: sample: Input should be a valid"),
        (lambda rows: rows[1].update(temprature=0.6), "line 2: temprature: Extra inputs are not"),
        (lambda rows: rows[3].update(reference=None), "line 4: reference: Input should be an obj"),
    ],
)
def test_a_malformed_row_stops_the_run_naming_line_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: Any, message: str
) -> None:
    rows = _two_prompt_rows()
    edit(rows)
    generations = write_jsonl(tmp_path / "g.jsonl", rows)
    code, err = _run(capsys, generations, "--out", tmp_path / "out")
    assert code == 2 and message in err and "--skip-bad" in err
    assert not (tmp_path / "out").exists()  # nothing was scored
    code, err = _run(capsys, generations, "--out", tmp_path / "out", "--skip-bad")
    assert code == 0 and f"skipped {message}" in err
    report = _report(tmp_path / "out")
    assert [s["message"][: len(message)] for s in report["skipped_rows"]] == [message]
    assert report["models"]["default"]["samples"] == 7


def test_inconsistent_studies_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = _two_prompt_rows()
    rows.append(dict(rows[1]))
    code, err = _run(capsys, write_jsonl(tmp_path / "dup.jsonl", rows), "--out", tmp_path / "a")
    assert code == 2 and "line 9: duplicate of line 2 (default: prompt 'm-1' sample 1)" in err
    rows = _two_prompt_rows()
    rows[5]["reference"] = {"answer": "99"}
    code, err = _run(capsys, write_jsonl(tmp_path / "ref.jsonl", rows), "--out", tmp_path / "b")
    assert code == 2 and "line 6: prompt 'm-2' has a different reference than on line 5" in err
    rows = _two_prompt_rows()  # the same key under another seed or model is no duplicate
    rows += [dict(r, seed=1) for r in rows] + [dict(r, model="other") for r in rows]
    code, err = _run(capsys, write_jsonl(tmp_path / "ok.jsonl", rows), "--out", tmp_path / "c")
    assert code == 0, err


def test_fewer_samples_than_k_is_reported_per_prompt(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = rows_with_counts({"default": {"m-1": 3, "m-2": 0}}, samples=8)
    rows += [math_row("m-3", s, "default", "correct" if s == 0 else "wrong") for s in range(2)]
    generations = write_jsonl(tmp_path / "g.jsonl", rows)
    code, err = _run(capsys, generations, "--out", tmp_path / "out", "--k", "1,2,4,8")
    assert code == 0 and "1 prompt(s) have fewer than 8 samples" in err
    model = _report(tmp_path / "out")["models"]["default"]
    assert model["short_prompts"] == [{"prompt_id": "m-3", "samples": 2}]
    assert [model["pass_at_k"][k]["capped_prompts"] for k in "1248"] == [0, 0, 1, 1]
    # The short prompt counts with its pass@2 (= 1 here) at k = 4 and 8, not an extrapolation.
    expected = (float(pass_at_k(8, 3, 8)) + 0.0 + 1.0) / 3
    assert model["pass_at_k"]["8"]["estimate"] == pytest.approx(expected)


def test_weights_two_level_and_seeds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    counts = {"default": {"m-1": 4, "m-2": 0, "s-1": 8, "s-2": 2}}
    rows = [dict(r, seed=seed) for seed in (0, 1) for r in rows_with_counts(counts, samples=8)]
    generations = write_jsonl(tmp_path / "g.jsonl", rows)
    weights = tmp_path / "weights.json"
    weights.write_text(json.dumps({"math": 3, "colours": 1}))
    code, err = _run(capsys, generations, "--out", tmp_path / "w", "--weights", weights)
    assert code == 0 and "2 training seeds; the protocol asks for at least 3" in err
    model = _report(tmp_path / "w")["models"]["default"]
    assert model["seeds"] == ["0", "1"]
    math_mean, colours_mean = (0.5 + 0.0) / 2, (1.0 + 0.25) / 2
    assert model["pass_at_k"]["1"]["estimate"] == pytest.approx(
        0.75 * math_mean + 0.25 * colours_mean
    )
    weights.write_text(json.dumps({"math": 1}))
    code, err = _run(capsys, generations, "--out", tmp_path / "w", "--weights", weights)
    assert code == 2 and "no declared weight for task famil(ies) colours" in err
    code, err = _run(capsys, generations, "--out", tmp_path / "t", "--two-level")
    assert (
        code == 0 and "task families, then prompts" in _report(tmp_path / "t")["study"]["bootstrap"]
    )


def test_review_sample_is_registered_once_and_labels_bracket_verified_pass_at_k(
    study: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    generations, out = study
    args = (generations, "--out", out, "--review-size", "10", "--review-seed", "7")
    code, err = _run(capsys, *args)
    assert code == 0, err
    sample = [json.loads(line) for line in (out / "review_sample.jsonl").read_text().splitlines()]
    key = json.loads((out / "review_key.json").read_text())
    model_of = {s["review_id"]: key["rows"][s["review_id"]]["model"] for s in sample}
    assert list(model_of.values()).count("expanded") == 10
    assert {s["model"] for s in sample} == {"model-1", "model-2"}  # blinded: codes only
    assert not any("expanded" in json.dumps(s) or "sharpened" in json.dumps(s) for s in sample)
    assert sorted(key["codes"].values()) == ["expanded", "sharpened"]
    assert all("\\boxed" in s["response"] and s["label"] is None for s in sample)
    protocol = json.loads((out / "review_protocol.json").read_text())
    assert protocol["seed"] == 7 and protocol["sampled"] == {"expanded": 10, "sharpened": 10}
    assert _run(capsys, *args)[0] == 0  # the same registration: accepted, the sample unchanged
    code, err = _run(capsys, generations, "--out", out, "--review-size", "10", "--review-seed", "8")
    assert code == 2 and "registered seed 7" in err
    # Every sampled success of "expanded" judged incorrect, of "sharpened" correct.
    for s in sample:
        s["label"] = "incorrect" if model_of[s["review_id"]] == "expanded" else "correct"
    labels = write_jsonl(out / "labels.jsonl", sample)
    code, err = _run(capsys, generations, "--out", out, "--review-labels", labels)
    assert code == 0, err
    report = _report(out)
    expanded = report["review"]["expanded"]
    assert (expanded["labelled"], expanded["judged_correct"]) == (10, 0)
    assert expanded["fraction_correct"]["estimate"] == 0.0
    assert expanded["fraction_correct"]["ci"][1] == pytest.approx(0.2775, abs=1e-4)
    verified = expanded["pass_at_k_verified"]["1"]
    assert verified["low"] == 0.0  # no success survives when only judged-correct ones count
    assert verified["high"] == pytest.approx(
        report["models"]["expanded"]["pass_at_k"]["1"]["estimate"] - 10 / 448
    )
    sharpened = report["review"]["sharpened"]["pass_at_k_verified"]["1"]
    assert sharpened["low"] == pytest.approx(10 / 448)
    assert sharpened["high"] == pytest.approx(
        report["models"]["sharpened"]["pass_at_k"]["1"]["estimate"]
    )
    assert "## Reasoning review" in (out / "report.md").read_text()
    sample[0]["review_id"] = "0123456789abcdef"
    write_jsonl(out / "labels.jsonl", sample)
    code, err = _run(capsys, generations, "--out", out, "--review-labels", labels)
    assert code == 2 and "not in the registered sample" in err


def _item(domain: str, reference: dict[str, Any], response: str, **extra: Any) -> dict[str, Any]:
    return {"domain": domain, "reference": reference, "response": response, **extra}


ADD_TWO = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
MIXED_ITEMS: list[dict[str, Any]] = [
    _item("math", {"answer": "0.5"}, "so \\boxed{\\frac{1}{2}}"),
    _item("math", {"answer": "2"}, "<think>long", finish_reason="length"),
    _item("stem", {"answer": "B", "choices": ["x", "y", "z"]}, "Answer: C"),
    _item(
        "ifeval",
        {"instruction_id_list": ["punctuation:no_comma", "detectable_format:title"]},
        "No commas here but no title",
    ),
    _item("puzzle", {"task": "basic_arithmetic", "seed": 1, "index": 0}, "<answer>-4</answer>"),
    _item(
        "code",
        {
            "language": "python",
            "tests": {
                "stdio": [{"input": "1 2\n", "output": "3\n"}, {"input": "2 2", "output": "5"}]
            },
        },
        ADD_TWO,
    ),
    _item("nonsense", {"answer": "1"}, "1"),
    _item("math", {"answer": ""}, "\\boxed{1}"),
    _item(
        "math",
        {"answer": "3"},
        "\\boxed{3} \\boxed{3} \\boxed{3} \\boxed{3}",
        response_tokens=4000,
        max_response_tokens=4096,
    ),
]


def _untimed(result: dict[str, Any]) -> dict[str, Any]:
    """A result without the code scorer's CPU and wall time measurements (like `elapsed_ms`,
    measurements, not verdicts: they differ between any two runs)."""
    details = dict(result["details"])
    details.pop("cpu_s", None)
    if isinstance(details.get("tests"), list):
        details["tests"] = [{k: v for k, v in t.items() if k != "time"} for t in details["tests"]]
    return {**result, "details": details}


@pytest.mark.parametrize("spec", ["prorl-v1", "prorl-v1-termination", "dapo-overlong"])
def test_results_equal_proctor_score_for_the_same_items(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], spec: str
) -> None:
    items = write_jsonl(tmp_path / "items.jsonl", MIXED_ITEMS)
    scored_by_proctor = tmp_path / "proctor-score.jsonl"
    argv = [str(items), "-o", str(scored_by_proctor), "--spec", spec, "--omit-timing"]
    assert proctor_cli.main(["score", *argv, "--no-progress", "--workers", "2"]) == 0
    expected = [json.loads(line) for line in scored_by_proctor.read_text().splitlines()[1:]]
    rows = [dict(item, prompt_id=f"p{i}", sample=0) for i, item in enumerate(MIXED_ITEMS)]
    code, err = _run(
        capsys, write_jsonl(tmp_path / "g.jsonl", rows), "--out", tmp_path / "o", "--spec", spec
    )
    assert code == 0, err
    stored = [
        json.loads(line) for line in (tmp_path / "o" / "scored.jsonl").read_text().splitlines()
    ]
    ours = [{k: v for k, v in s["result"].items() if k != "elapsed_ms"} for s in stored]
    assert [_untimed(r) for r in ours] == [_untimed(r) for r in expected]
    assert {r["status"] for r in expected} == {"ok", "invalid"}
    assert any(0 < (r["score"] or 0) < 1 for r in expected)  # a continuous score is among them
    report = _report(tmp_path / "o")
    assert report["models"]["default"]["excluded_rows"] == {"invalid": 2}
    assert report["models"]["default"]["continuous_scores"] is True


def test_success_threshold_for_continuous_scores(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    half = MIXED_ITEMS[3]  # one instruction of two followed: score 0.5, no full success
    rows = [dict(half, prompt_id="p", sample=s) for s in range(4)]
    generations = write_jsonl(tmp_path / "g.jsonl", rows)
    assert _run(capsys, generations, "--out", tmp_path / "o")[0] == 0
    model = _report(tmp_path / "o")["models"]["default"]
    assert model["mean_score"] == pytest.approx(0.5) and model["strict_success"] == 0.0
    assert _run(capsys, generations, "--out", tmp_path / "o", "--success-threshold", "0.5")[0] == 0
    report = _report(tmp_path / "o")
    assert report["study"]["success"] == "score >= 0.5"
    assert report["models"]["default"]["strict_success"] == 1.0
    assert report["models"]["default"]["mean_score"] == pytest.approx(0.5)


def test_the_plain_sdk_imports_neither_numpy_nor_the_server() -> None:
    probe = (
        "import sys, proctor_client; "
        "print(sorted(m for m in ('numpy', 'matplotlib', 'service', 'reward_specs') "
        "if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "[]"


def test_models_with_different_sample_counts_are_compared_at_their_common_k(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = rows_with_counts({"wide": {"m-1": 1, "m-2": 0}}, samples=8)
    rows += rows_with_counts({"narrow": {"m-1": 0, "m-2": 2}}, samples=4)
    code, err = _run(capsys, write_jsonl(tmp_path / "g.jsonl", rows), "--out", tmp_path / "o")
    assert code == 0, err
    report = _report(tmp_path / "o")
    assert list(report["models"]["wide"]["pass_at_k"]) == ["1", "2", "4", "8"]
    assert list(report["models"]["narrow"]["pass_at_k"]) == ["1", "2", "4"]
    pair = report["paired"]["wide|narrow"]
    assert list(pair["pass_at_k"]) == ["1", "2", "4"]
    assert pair["pass_at_k"]["4"]["a"] == pytest.approx(float(pass_at_k(8, 1, 4)) / 2)
    assert [q["prompt_id"] for q in pair["only_a"]] == ["m-1"]
    assert [q["prompt_id"] for q in pair["only_b"]] == ["m-2"]
    rows += rows_with_counts({"elsewhere": {"m-9": 1}}, samples=4)
    code, err = _run(capsys, write_jsonl(tmp_path / "h.jsonl", rows), "--out", tmp_path / "p")
    assert code == 0 and "wide and elsewhere share no judged prompt" in err
    assert list(_report(tmp_path / "p")["paired"]) == ["wide|narrow"]


def test_a_study_with_no_judged_row_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [{"prompt_id": "a", "sample": 0, "domain": "nope", "reference": {}, "response": "x"}]
    code, err = _run(capsys, write_jsonl(tmp_path / "g.jsonl", rows), "--out", tmp_path / "o")
    assert code == 1 and "no row was judged ({'default': {'invalid': 1}})" in err
    stored = json.loads((tmp_path / "o" / "scored.jsonl").read_text())
    assert stored["result"]["error"]["code"] == "unknown_domain"


def test_report_text_matches_the_intervals_and_an_empty_list_says_none(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Two models where b solves nothing a does not: "solved only by b (0)" is followed by
    # "none", not blank lines. The prompt-level rule names the quantile the code uses.
    counts = {"a": {"m-1": 8, "m-2": 4, "m-3": 2}, "b": {"m-1": 8, "m-2": 0, "m-3": 0}}
    generations = write_jsonl(tmp_path / "g.jsonl", rows_with_counts(counts, samples=8))
    code, err = _run(capsys, generations, "--out", tmp_path / "out")
    assert code == 0, err
    lines = (tmp_path / "out" / "report.md").read_text().splitlines()
    empty = lines.index("Prompts solved only by b (0):")
    assert lines[empty + 1 : empty + 3] == ["", "none"]
    rule = next(line for line in lines if "prompt level: the variance of" in line)
    assert "the normal quantile" in rule and "t quantile" not in rule.split(";")[0]


def test_the_success_rate_histograms_share_one_axis_of_whole_prompts() -> None:
    rows, results = [], []
    for model, solved in (("a", 3), ("b", 1)):
        for prompt in range(5):
            for sample in range(4):
                rows.append(math_row(f"m-{prompt}", sample, model, "correct"))
                success = sample < solved
                score = float(success)
                results.append(
                    {"status": "ok", "success": success, "score": score, "reward": score}
                )
    scored = [
        ScoredRow(Generation.model_validate(row), {**result, "parsed": True})
        for row, result in zip(rows, results, strict=True)
    ]
    study = study_from_scored(scored, options_from(), DEFAULT_SPEC)
    fig = histogram_figure(list(study.models.values()))
    try:
        first, second = fig.axes
        assert first.get_shared_y_axes().joined(first, second)
        ticks = [t for t in first.get_yticks() if first.get_ylim()[0] <= t <= first.get_ylim()[1]]
        assert ticks and all(float(t).is_integer() for t in ticks), ticks
    finally:
        plt.close(fig)
