"""`proctor-eval --review-judge`: the registered review sample labelled by a judge model through
the service's judge path (a real server, and in-process), against a scripted OpenAI-compatible
judge: the review template is what is sent (reasoning included, models blinded), the judge's
labels give verified pass@k beside the human ones, their agreement is Cohen's kappa, and the judge
spec's hash is registered in review_protocol.json, and a line the judge could not label stays
unlabelled, never "incorrect". Also the review item in the domain itself and kappa on known
tables."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from proctor_client.evaluation.cli import main
from proctor_client.evaluation.review_judge import JUDGE_LABELS_FILE, cohens_kappa
from reward_specs import Item, ScoreContext, default_registry, load_specs, score_item
from reward_specs.judge import Endpoint
from reward_specs.judge.client import Judges
from reward_specs.judge.domain import JudgeConfig
from tests.eval_synthetic import rows_with_counts, write_jsonl
from tests.helpers import running_server
from tests.scripted_judge import ScriptedJudge, scripted_judge

JUDGE_SPEC = "free-form-judge-1"
MODELS = {"alpha": {"m-1": 3, "m-2": 2, "m-3": 0}, "beta": {"m-1": 1, "m-2": 4, "m-3": 2}}


def reasoning_judge(prompt: str) -> tuple[int, str]:
    """Says the reasoning supports the final answer when that answer is even: a judge whose
    labels the test can predict from the sample alone."""
    answer = prompt.split("Final answer:\n", 1)[1].split("\n\nRules:", 1)[0].strip()
    verdict = "[[A=B]]" if int(answer) % 2 == 0 else "[[A!=B]]"
    return 200, f"Checking the steps.\n{verdict}"


def _eval(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str]:
    code = main([str(a) for a in args] + ["--no-progress", "--workers", "2", "--bootstrap", "200"])
    return code, capsys.readouterr().err


def _generations(path: Path) -> Path:
    rows = rows_with_counts(MODELS, samples=4)
    for row in rows:
        row["prompt"] = f"What is 10 + {row['prompt_id'].split('-')[1]}?"
    return write_jsonl(path, rows)


@pytest.fixture
def judge() -> Iterator[ScriptedJudge]:
    with scripted_judge(reasoning_judge) as j:
        yield j


def test_cohens_kappa_of_known_tables() -> None:
    # p_o = 35/50 = 0.7; marginals (0.5, 0.5) and (0.6, 0.4): p_e = 0.5; kappa = 0.2 / 0.5.
    assert cohens_kappa([[20, 5], [10, 15]]) == pytest.approx(0.4)
    assert cohens_kappa([[7, 0], [0, 3]]) == pytest.approx(1.0)
    # Agreement no better than chance: p_o = p_e = 0.5.
    assert cohens_kappa([[5, 5], [5, 5]]) == pytest.approx(0.0)
    # Both raters said "correct" every time: p_e = 1, kappa undefined.
    assert cohens_kappa([[9, 0], [0, 0]]) is None
    assert cohens_kappa([[0, 0], [0, 0]]) is None


def _sample(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "review_sample.jsonl").read_text().splitlines()]


def _answer(line: dict[str, Any]) -> int:
    return int(re.findall(r"\\boxed\{(\d+)\}", line["response"])[-1])


def test_the_judge_labels_the_registered_sample_through_a_server(
    judge: ScriptedJudge, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    generations, out = _generations(tmp_path / "g.jsonl"), tmp_path / "out"
    code, err = _eval(capsys, generations, "--out", out, "--review-size", "4", "--review-seed", "3")
    assert code == 0, err
    sample = _sample(out)
    key = json.loads((out / "review_key.json").read_text())
    model_of = {s["review_id"]: key["rows"][s["review_id"]]["model"] for s in sample}
    # Human labels: alpha's reasoning held up, beta's did not.
    labels = tmp_path / "labels.jsonl"
    for line in sample:
        line["label"] = "correct" if model_of[line["review_id"]] == "alpha" else "incorrect"
    write_jsonl(labels, sample)
    endpoints = {"judge": Endpoint(url=judge.url)}
    with (
        running_server(workers=1, judge_endpoints=endpoints) as server,
        httpx.Client(base_url=server.url, timeout=60) as client,
    ):
        specs = {s["name"]: s for s in client.get("/v1/specs").json()["specs"]}
        code, err = _eval(
            capsys,
            generations,
            "--out",
            out,
            "--url",
            server.url,
            "--review-labels",
            labels,
            "--review-judge",
            JUDGE_SPEC,
        )
    assert code == 0, err
    # Registered: the judge spec's hash, as the server reports it, beside the sample's.
    protocol = json.loads((out / "review_protocol.json").read_text())
    assert protocol["judge"] == {
        "name": JUDGE_SPEC,
        "version": specs[JUDGE_SPEC]["version"],
        "hash": specs[JUDGE_SPEC]["hash"],
    }
    # Sent: one review prompt per distinct line (lines that differ only in their model or sample
    # are one prompt, the judge cache's), the reasoning (the <think> block the spec strips from
    # responses) and the question included, the models only as codes.
    prompts = judge.prompts()
    assert len(prompts) == len({(s["prompt_id"], s["response"]) for s in sample})
    assert all("Solution:\n<think>adding up</think>" in p for p in prompts)
    assert all(re.search(r"Question:\nWhat is 10 \+ \d\?", p) for p in prompts)
    assert not any("alpha" in p or "beta" in p for p in prompts)
    # Labelled as the judge said, and written in the labels format.
    judged = {
        json.loads(line)["review_id"]: json.loads(line)["label"]
        for line in (out / JUDGE_LABELS_FILE).read_text().splitlines()
    }
    expected = {s["review_id"]: _answer(s) % 2 == 0 for s in sample}
    assert judged == {r: "correct" if ok else "incorrect" for r, ok in expected.items()}
    report = json.loads((out / "report.json").read_text())
    section = report["review_judge"]
    assert section["spec"]["hash"] == specs[JUDGE_SPEC]["hash"]
    assert section["unlabelled"] == {}
    for model in MODELS:
        ids = [r for r in expected if model_of[r] == model]
        entry = section["models"][model]
        assert entry["labelled"] == len(ids)
        assert entry["judged_correct"] == sum(expected[r] for r in ids)
        assert report["review"][model]["labelled"] == len(ids)  # the human labels beside
        verified = entry["pass_at_k_verified"]["1"]
        assert verified["low"] <= report["models"][model]["pass_at_k"]["1"]["estimate"]
    # Agreement: rows human, columns judge.
    human = {r: model_of[r] == "alpha" for r in expected}
    table = [[0, 0], [0, 0]]
    for r, ok in expected.items():
        table[0 if human[r] else 1][0 if ok else 1] += 1
    assert section["agreement"]["table"] == table
    assert section["agreement"]["rows"] == len(sample)
    assert section["agreement"]["kappa"] == pytest.approx(cohens_kappa(table))
    assert "## Model-assisted review" in (out / "report.md").read_text()
    # One judge per registered sample: another hash is refused.
    protocol["judge"]["hash"] = "sha256:" + "0" * 64
    (out / "review_protocol.json").write_text(json.dumps(protocol))
    with running_server(workers=1, judge_endpoints=endpoints) as server:
        code, err = _eval(
            capsys, generations, "--out", out, "--url", server.url, "--review-judge", JUDGE_SPEC
        )
    assert code == 2 and "registered the judge spec" in err


def test_in_process_labels_and_hash_equal_the_servers(
    judge: ScriptedJudge,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    generations = _generations(tmp_path / "g.jsonl")
    local, remote = tmp_path / "local", tmp_path / "remote"
    monkeypatch.setenv("PROCTOR_JUDGE_ENDPOINTS", json.dumps({"judge": {"url": judge.url}}))
    draw = ("--review-size", "3", "--review-seed", "5", "--review-judge", JUDGE_SPEC)
    code, err = _eval(capsys, generations, "--out", local, *draw)
    assert code == 0, err
    with running_server(workers=1, judge_endpoints={"judge": Endpoint(url=judge.url)}) as server:
        code, err = _eval(capsys, generations, "--out", remote, "--url", server.url, *draw)
    assert code == 0, err
    ours, theirs = (json.loads((d / "review_protocol.json").read_text()) for d in (local, remote))
    assert ours["judge"] == theirs["judge"]
    assert (local / JUDGE_LABELS_FILE).read_text() == (remote / JUDGE_LABELS_FILE).read_text()
    report = json.loads((local / "report.json").read_text())
    assert report["review"] is None and report["review_judge"]["agreement"] is None


def test_a_review_item_without_a_review_template_is_invalid(judge: ScriptedJudge) -> None:
    registry = default_registry()
    spec = load_specs(registry)[JUDGE_SPEC]
    config = spec.config("judge")
    assert isinstance(config, JudgeConfig) and config.review_template is not None
    judges = Judges({"judge": Endpoint(url=judge.url)})
    reference = {"question": "What is 10 + 2?", "answer": "12", "reasoning": "10 + 2 = 12"}
    item = Item("judge", "10 + 2 = 12, so \\boxed{12}", reference)
    reviewed = score_item(registry, spec, item, ScoreContext(judges=judges))
    assert reviewed.status == "ok" and reviewed.success
    (prompt,) = judge.prompts()
    assert "Solution:\n10 + 2 = 12\n\nFinal answer:\n12\n" in prompt
    no_review = config.model_copy(update={"review_template": None})
    bare = replace(spec, domains={**spec.domains, "judge": no_review})
    refused = score_item(registry, bare, item, ScoreContext(judges=judges))
    assert refused.status == "invalid"
    assert len(judge.asked) == 1


def test_a_line_the_judge_could_not_label_stays_unlabelled(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def failing_on_odd(prompt: str) -> tuple[int, str]:
        status, reply = reasoning_judge(prompt)
        return (503, "overloaded") if "[[A!=B]]" in reply else (status, reply)

    generations, out = _generations(tmp_path / "g.jsonl"), tmp_path / "out"
    with (
        scripted_judge(failing_on_odd) as judge,
        running_server(workers=1, judge_endpoints={"judge": Endpoint(url=judge.url)}) as server,
    ):
        code, err = _eval(
            capsys,
            generations,
            "--out",
            out,
            "--url",
            server.url,
            "--review-size",
            "4",
            "--review-seed",
            "3",
            "--review-judge",
            JUDGE_SPEC,
        )
    assert code == 0, err
    sample = _sample(out)
    odd = sum(_answer(s) % 2 for s in sample)
    assert 0 < odd < len(sample)
    lines = [json.loads(line) for line in (out / JUDGE_LABELS_FILE).read_text().splitlines()]
    assert sum(line["label"] is None for line in lines) == odd  # never read as "incorrect"
    assert all(line["label"] in (None, "correct") for line in lines)
    section = json.loads((out / "report.json").read_text())["review_judge"]
    assert section["unlabelled"] == {"judge_unavailable": odd}
    labelled = sum(m["labelled"] for m in section["models"].values())
    assert labelled == len(sample) - odd
