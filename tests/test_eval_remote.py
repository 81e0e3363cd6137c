"""`proctor-eval --url`: the same study scored by a real server through the SDK gives the same
results and statistics as in-process scoring, and the spec hash lets either reuse the other's
scores."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from proctor_client.evaluation.cli import main
from tests.eval_synthetic import rows_with_counts, two_models, write_jsonl
from tests.helpers import Server, running_server


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    with running_server() as live:
        yield live


def _eval(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str]:
    code = main([str(a) for a in args] + ["--no-progress", "--workers", "2"])
    return code, capsys.readouterr().err


def _results(out: Path) -> list[dict[str, Any]]:
    lines = (out / "scored.jsonl").read_text().splitlines()
    return [
        {k: v for k, v in json.loads(line)["result"].items() if k != "elapsed_ms"} for line in lines
    ]


def test_remote_and_local_scoring_agree(
    server: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    generations = write_jsonl(tmp_path / "g.jsonl", rows_with_counts(two_models(), samples=8))
    remote, local = tmp_path / "remote", tmp_path / "local"
    code, err = _eval(capsys, generations, "--out", remote, "--url", server.url)
    assert code == 0, err
    code, err = _eval(capsys, generations, "--out", local)
    assert code == 0, err
    assert _results(remote) == _results(local)
    ours, theirs = (json.loads((d / "report.json").read_text()) for d in (remote, local))
    assert ours["spec"]["hash"] == theirs["spec"]["hash"]
    assert ours["models"] == theirs["models"]  # the same bootstrap seed: the same intervals too
    assert ours["paired"] == theirs["paired"]
    # The same spec hash: a remote run reuses what the local one scored.
    reused = tmp_path / "reused"
    reused.mkdir()
    shutil.copy(local / "scored.jsonl", reused / "scored.jsonl")
    code, err = _eval(capsys, generations, "--out", reused, "--url", server.url)
    assert code == 0 and f"{16 * 28} rows reused" in err


def test_unknown_spec_on_the_server_is_refused(
    server: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    generations = write_jsonl(tmp_path / "g.jsonl", rows_with_counts({"m": {"m-1": 1}}, 2))
    code, err = _eval(
        capsys, generations, "--out", tmp_path / "o", "--url", server.url, "--spec", "nope"
    )
    assert code == 2 and "has no spec 'nope'" in err and "prorl-v1" in err


def test_a_keyed_server_takes_proctor_api_key_and_a_401_names_the_ways_to_give_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    generations = write_jsonl(tmp_path / "g.jsonl", rows_with_counts({"m": {"m-1": 1}}, 2))
    with running_server(api_keys=("proctor-eval-test-key-01",)) as keyed:
        monkeypatch.delenv("PROCTOR_API_KEY", raising=False)
        code, err = _eval(capsys, generations, "--out", tmp_path / "a", "--url", keyed.url)
        assert code == 2 and "401" in err and "--api-key" in err and "PROCTOR_API_KEY" in err
        monkeypatch.setenv("PROCTOR_API_KEY", "proctor-eval-test-key-01")
        code, err = _eval(capsys, generations, "--out", tmp_path / "b", "--url", keyed.url)
        assert code == 0, err
        assert len(_results(tmp_path / "b")) == 2
