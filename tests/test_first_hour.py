"""What trips a new user in the first hour (issue 24): settings errors, the README's key example,
one error shape on every route, typed-wrong items in a batch, failing fast, `proctor score` and
`proctor specs`, the ready line and the rolling metrics."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from proctor_client.evaluation.cli import main as eval_main
from service.dispatch import DispatchStats
from service.http.metrics import ROLLING_WINDOW, Metrics
from service.schemas import ErrorBody, ScoreResult
from tests.helpers import Server, free_port

ROOT = Path(__file__).resolve().parents[1]
PROCTOR = [sys.executable, "-m", "service.cli"]
MATH_OK = {"domain": "math", "response": "\\boxed{4}", "reference": {"answer": "4"}}


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROCTOR_")}
    return {**env, **extra}


# ---------------------------------------------------------------- 1. settings and keys


def test_a_refused_setting_is_one_line_naming_it_and_its_rule_never_a_key() -> None:
    done = subprocess.run(
        [*PROCTOR, "specs"],
        env=_env(PROCTOR_API_KEYS="key1,key2", PROCTOR_WORKERS="many"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "PROCTOR_API_KEYS: each API key must be at least 16 characters" in line
    assert "PROCTOR_WORKERS: " in line
    assert "key1" not in line and "Traceback" not in done.stderr


def _serve(port: int, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*PROCTOR, "serve", "--port", str(port), "--workers", "1"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_the_readme_key_example_starts_a_server_that_logs_when_ready() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    examples = re.findall(r"PROCTOR_API_KEYS=([^\s`.]+)", readme)
    assert examples, "the README shows no key example"
    keys = examples[0]
    port = free_port()
    server = _serve(port, _env(PROCTOR_API_KEYS=keys))
    try:
        assert server.stderr is not None
        lines = []
        for line in server.stderr:  # the ready line comes once the workers are warm
            lines.append(line)
            if "ready: " in line:
                break
        assert re.search(r"ready: 1 worker, sandbox local", "".join(lines)), lines
        url = f"http://127.0.0.1:{port}"
        key = keys.split(",")[1]
        assert httpx.get(f"{url}/readyz", timeout=10).status_code == 200
        assert httpx.get(f"{url}/v1/specs", timeout=10).status_code == 401
        ok = httpx.get(f"{url}/v1/specs", headers={"authorization": f"Bearer {key}"}, timeout=10)
        assert ok.status_code == 200
    finally:
        server.terminate()
        server.communicate(timeout=60)  # reaps it and closes its pipe


# ---------------------------------------------------------------- 6. failing fast


def test_a_port_in_use_is_refused_before_the_workers_warm_up() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = _serve(port, _env())
        _, err = server.communicate(timeout=120)
    assert server.returncode == 2
    (line,) = err.strip().splitlines()
    assert line == f"proctor serve: cannot listen on 127.0.0.1:{port}: Address already in use"


def test_proctor_eval_against_a_dead_url_is_one_line_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = tmp_path / "generations.jsonl"
    row = {"prompt_id": "p0", "sample": 0, **MATH_OK}
    rows.write_text(json.dumps(row) + "\n", encoding="utf-8")
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    code = eval_main([str(rows), "--url", url, "--out", str(tmp_path / "out"), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2
    (line,) = err.strip().splitlines()
    assert line.startswith(f"proctor-eval: cannot reach {url}: ")


# ---------------------------------------------------------------- 4. one error shape


def test_every_route_errs_in_one_shape(make_server: Callable[..., Server]) -> None:
    key = "k" * 16
    server = make_server(workers=1, api_keys=(key,), max_request_bytes=4096)
    auth = {"authorization": f"Bearer {key}"}
    with httpx.Client(base_url=server.url, headers=auth, timeout=60) as client:
        replies = {
            "score 422": client.post("/v1/score", json={"items": "nope"}),
            "jobs 404": client.get("/v1/jobs/no-such-job"),
            "puzzle 404": client.post("/v1/puzzles/spell_backwards/sample"),
            "puzzle 422": client.post("/v1/puzzles/boxnet/sample", json={"count": 0}),
            "405": client.get("/v1/score"),
            "413": client.post("/v1/score", content=b"x" * 5000),
            "401": httpx.get(server.url + "/v1/specs", timeout=60),
            "unmatched 404": client.get("/v1/nothing-here"),
        }
    expected = {
        "score 422": (422, "invalid_request"),
        "jobs 404": (404, "not_found"),
        "puzzle 404": (404, "unknown_task"),
        "puzzle 422": (422, "invalid_request"),
        "405": (405, "method_not_allowed"),
        "413": (413, "request_too_large"),
        "401": (401, "unauthorized"),
        "unmatched 404": (404, "not_found"),
    }
    for name, reply in replies.items():
        status, code = expected[name]
        assert reply.status_code == status, (name, reply.text)
        body = ErrorBody.model_validate(reply.json())
        assert body.error.code == code, (name, body)
        assert body.error.message, name
    assert replies["score 422"].json()["detail"][0]["loc"] == ["body", "items"]
    assert "items: " in replies["score 422"].json()["error"]["message"]
    assert "did you mean 'spell_backward'" in replies["puzzle 404"].json()["error"]["message"]


def test_an_unknown_domain_lists_the_domains(client: httpx.Client) -> None:
    reply = client.post("/v1/score", json={"items": [{**MATH_OK, "domain": "maths"}]})
    (result,) = reply.json()["results"]
    assert result["status"] == "invalid"
    message = result["error"]["message"]
    assert message.startswith("unknown domain 'maths'; the domains are: ")
    assert all(d in message for d in ("math", "stem", "code", "puzzle", "ifeval"))


# ---------------------------------------------------------------- 3. typed-wrong items


def test_typed_wrong_items_are_invalid_while_the_batch_is_scored(client: httpx.Client) -> None:
    good = json.dumps(MATH_OK)
    bad = [
        '{"id": "r", "domain": "math", "response": "x", "reference": "1"}',
        '{"id": "f", "domain": "math", "response": "x", "reference": {"answer": "1"}, '
        '"finish_reason": "eos"}',
        json.dumps({**MATH_OK, "id": "i" * 513}),
        '{"id": "a\\ud800", "domain": "math", "response": "x", "reference": {"answer": "1"}}',
    ]
    body = '{"items": [' + ", ".join([good, *bad, good]) + "]}"
    reply = client.post(
        "/v1/score", content=body.encode(), headers={"content-type": "application/json"}
    )
    assert reply.status_code == 200, reply.text
    results = reply.json()["results"]
    assert [r["status"] for r in results] == ["ok", *["invalid"] * 4, "ok"]
    named = [r["error"]["message"].split(":")[0] for r in results[1:5]]
    assert named == ["`reference`", "`finish_reason`", "`id`", "`id`"]
    assert results[1]["id"] == "r" and results[2]["id"] == "f"  # a valid id is echoed


# ---------------------------------------------------------------- 7. proctor score and specs


def test_proctor_score_names_its_spec_and_keeps_one_result_per_line(tmp_path: Path) -> None:
    source = tmp_path / "items.jsonl"
    source.write_text("\n".join([json.dumps(MATH_OK), "", "  ", json.dumps(MATH_OK)]) + "\n")
    done = subprocess.run(
        [*PROCTOR, "score", str(source), "--workers", "1", "--no-progress", "--spec", "prorl-v1"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    header, *results = (json.loads(line) for line in done.stdout.splitlines())
    specs = subprocess.run([*PROCTOR, "specs"], capture_output=True, text=True, timeout=300)
    (listed,) = [line for line in specs.stdout.splitlines() if line[2:].startswith("prorl-v1 ")]
    assert header == {
        "spec": {"name": "prorl-v1", "version": listed.split()[1], "hash": listed.split()[2]}
    }
    assert [r["status"] for r in results] == ["ok", "invalid", "invalid", "ok"]
    assert results[1]["error"]["message"] == "line 2: a blank line, no item"
    assert results[2]["error"]["message"] == "line 3: a blank line, no item"


def test_proctor_specs_name_shows_the_resolved_parameters() -> None:
    done = subprocess.run(
        [*PROCTOR, "specs", "prorl-v1-careful"], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert shown["name"] == "prorl-v1-careful" and shown["hash"].startswith("sha256:")
    assert shown["parameters"]["domains"]["stem"]["careful"] is True
    assert "math-verify" in shown["parameters"]["libraries"]
    unknown = subprocess.run(
        [*PROCTOR, "specs", "nope"], capture_output=True, text=True, timeout=300
    )
    assert unknown.returncode == 2 and "unknown spec 'nope'" in unknown.stderr


# ---------------------------------------------------------------- 11. rolling metrics


def _stats() -> DispatchStats:
    return DispatchStats(backend="local")


def test_rolling_score_success_and_parse_rates_per_domain() -> None:
    metrics = Metrics(_stats, domains=["math", "stem"])

    def judged(score: float, parsed: bool | None) -> ScoreResult:
        return ScoreResult(status="ok", score=score, success=score == 1.0, parsed=parsed)

    old = [judged(0.0, False)] * ROLLING_WINDOW  # pushed out of the window below
    metrics.observe(["math"] * len(old), old)
    recent = [judged(1.0, True), judged(0.0, True), judged(0.5, False), judged(1.0, True)]
    recent *= ROLLING_WINDOW // 4
    unjudged = ScoreResult(status="infra_error")
    metrics.observe(["math"] * len(recent) + ["stem"], [*recent, unjudged])
    metrics.observe(["stem"], [judged(1.0, None)])
    value = metrics.registry.get_sample_value
    assert value("proctor_rolling_score", {"domain": "math"}) == pytest.approx(0.625)
    assert value("proctor_rolling_success_rate", {"domain": "math"}) == pytest.approx(0.5)
    assert value("proctor_rolling_parse_rate", {"domain": "math"}) == pytest.approx(0.75)
    assert value("proctor_rolling_score", {"domain": "stem"}) == 1.0
    assert value("proctor_rolling_parse_rate", {"domain": "stem"}) is None  # none reported
