"""The `proctor` command: library-mode scoring of a JSONL file, and its refusals."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from service.schemas import SpecInfo
from service.settings import Settings

PROCTOR = [sys.executable, "-m", "service.cli"]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*PROCTOR, *args], capture_output=True, text=True, timeout=300)


def test_score_writes_one_result_per_item_line(tmp_path: Path) -> None:
    source = tmp_path / "items.jsonl"
    source.write_text(
        "\n".join(
            [
                json.dumps(
                    {
                        "id": "a",
                        "domain": "math",
                        "response": "\\boxed{4}",
                        "reference": {"answer": "4"},
                    }
                ),
                "{not json",
                "",  # a blank line is no item: its result says so
                json.dumps(
                    {"id": "c", "domain": "math", "response": 7, "reference": {"answer": "4"}}
                ),
                json.dumps(
                    {
                        "id": "d",
                        "domain": "math",
                        "response": "\\boxed{5}",
                        "reference": {"answer": "4"},
                    }
                ),
            ]
        )
        + "\n",
        encoding="utf-8",
    )
    done = run("score", str(source), "--workers", "1", "--omit-timing", "--no-progress")
    assert done.returncode == 0, done.stderr
    header, *results = (json.loads(line) for line in done.stdout.splitlines())
    assert header["spec"]["name"] == "prorl-v1-careful-2" and header["spec"]["hash"]
    # one result per line, blank lines included: result N is line N's
    assert [r["status"] for r in results] == ["ok", "invalid", "invalid", "invalid", "ok"]
    assert results[0]["success"] is True and results[4]["success"] is False
    assert results[1]["error"]["message"].startswith("line 2, column 2: invalid JSON: ")
    assert results[2]["error"]["message"] == "line 3: a blank line, no item"
    assert results[3]["error"]["message"].startswith("line 4: `response`: ")
    assert all("elapsed_ms" not in r for r in results)
    assert "2 ok" in done.stderr and "3 invalid" in done.stderr


def test_score_refuses_a_missing_file_and_an_unknown_spec(tmp_path: Path) -> None:
    missing = run("score", str(tmp_path / "nope.jsonl"))
    assert missing.returncode == 2 and "cannot read" in missing.stderr
    source = tmp_path / "items.jsonl"
    source.write_text("", encoding="utf-8")
    unknown = run("score", str(source), "--spec", "no-such-spec")
    assert unknown.returncode == 2 and "unknown spec 'no-such-spec'" in unknown.stderr


def test_specs_lists_every_shipped_spec_with_its_hash() -> None:
    done = run("specs")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert any(line.startswith("* prorl-v1-careful-2 ") and "sha256:" in line for line in lines)
    assert any(line.startswith("  prorl-v1 ") and "sha256:" in line for line in lines)
    assert any("prorl-v1-careful-eval" in line for line in lines)
    assert any("prorl-v1-termination" in line for line in lines)
    assert any("dapo-overlong" in line for line in lines)


HEAVY = ("nltk", "reasoning_gym", "sympy", "math_verify", "pint", "fastapi", "uvicorn")
"""Libraries that take seconds to import and that listing specs needs none of."""


def test_specs_imports_no_verifier_library_and_no_web_stack() -> None:
    # Listing and showing specs (registry, spec files, hashes with the libraries' versions)
    # must load none of them: `proctor specs` is a quick command.
    program = (
        "import contextlib, io, sys\n"
        "from service.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        "    codes = [main(['specs']), main(['specs', 'prorl-v1'])]\n"
        f"heavy = sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r}))\n"
        "print(codes, heavy, 'sha256:' in out.getvalue())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[0, 0] [] True", done.stdout


def test_serve_starts_its_fork_server_before_importing_any_domain() -> None:
    # What `proctor serve` imports before `dispatch.prepare` starts the fork server (the CLI,
    # its settings, the dispatchers) is on the warm-up's critical path: no domain among it.
    program = (
        "import sys\n"
        "import service.cli as cli\n"
        "cli._settings(cli.argparse.Namespace())\n"
        "import service.dispatch\n"
        "print(sorted(m for m in sys.modules if m.startswith('reward_specs.')"
        " and m.split('.')[1] in ('code', 'domains', 'ifeval', 'math', 'puzzles', 'stem')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", done.stdout


def test_score_reads_standard_input_and_names_line_and_column(tmp_path: Path) -> None:
    lines = [
        json.dumps(
            {"id": "a", "domain": "math", "response": "\\boxed{4}", "reference": {"answer": "4"}}
        ),
        '{"id": "b", "domain": "math", "response": "x", "reference": {"answer": "4"},, }',
        json.dumps(
            {"id": "c", "domain": "math", "response": "x", "reference": {"answer": "4"}, "oops": 1}
        ),
        "[1, 2]",
    ]
    done = subprocess.run(
        [*PROCTOR, "score", "-", "--workers", "1", "--omit-timing", "--no-progress"],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    _, a, b, c, d = (json.loads(line) for line in done.stdout.splitlines())
    assert a["status"] == "ok" and a["success"] is True
    column = lines[1].index(",,") + 2  # the second comma, counted from 1
    reason = "Expecting property name enclosed in double quotes"
    assert b["error"]["message"] == f"line 2, column {column}: invalid JSON: {reason}"
    assert c["status"] == "invalid" and c["id"] == "c"
    assert c["error"]["message"] == "line 3: unknown field `oops`"
    assert d["error"]["message"] == "line 4: a line must hold one JSON object, the item"


def test_help_gives_the_defaults_the_settings_declare() -> None:
    # One source for a default: the help text reads it from service/settings.py.
    worker, serve = run("worker", "--help"), run("serve", "--help")
    concurrency = Settings.model_fields["worker_concurrency"].default
    assert f"(default {concurrency})" in " ".join(worker.stdout.split())
    serve_help = " ".join(serve.stdout.split())
    assert f"(default {Settings.model_fields['port'].default})" in serve_help
    assert f"(default {Settings.model_fields['host'].default})" in serve_help


def test_specs_name_shows_what_get_v1_specs_gives_for_it() -> None:
    done = run("specs", "prorl-v1")
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    info = set(SpecInfo.model_fields)
    assert info <= set(shown), info - set(shown)
    assert shown["default"] is False
    assert shown["domain_hashes"]["math"].startswith("sha256:")
    default = json.loads(run("specs", Settings().default_spec).stdout)
    assert default["default"] is True
