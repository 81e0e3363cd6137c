"""The SandboxFusion-compatible routes driven by the real clients, each in its own venv (their
pins clash with ours; tests/run's setup_clients builds both): the `sandbox-fusion` 0.3.7
client's `run_code`, `run_jupyter` and `submit`, and verl 0.9.1's own SandboxFusion reward code
and the call its `SandboxFusionTool` makes, against a real server with keys, through the keyed
URL verl is given. Each gets what SandboxFusion's semantics give."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from service.settings import RunSettings
from tests.helpers import running_server
from tests.sandbox_fixtures import sandbox_settings

ROOT = Path(__file__).parent.parent
SF_PYTHON = Path(
    os.environ.get("PROCTOR_SANDBOX_FUSION_PYTHON", "/opt/proctor-sandbox-fusion/bin/python")
)
VERL_PYTHON = Path(os.environ.get("PROCTOR_VERL_PYTHON", "/opt/proctor-verl/bin/python"))
KEY = "compat-client-key-0123456789abc"


@pytest.fixture(scope="module")
def endpoint(local_backend: object) -> Iterator[str]:
    run = RunSettings(pool_size=2, cpu_s=3.0, wall_s=6.0)
    with running_server(
        workers=1, api_keys=(KEY,), sandbox=sandbox_settings("local", pool_size=2), run=run
    ) as srv:
        yield f"{srv.url}/compat/sandbox-fusion/k/{KEY}"


def _lines(python: Path, script: str, *args: str) -> list[dict[str, Any]]:
    if not python.exists():
        pytest.skip(f"no environment at {python} (tests/run builds it)")
    done = subprocess.run(
        [str(python), str(ROOT / "tests" / script), *args],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def test_the_sandbox_fusion_client(endpoint: str) -> None:
    calls = {c["call"]: c["value"] for c in _lines(SF_PYTHON, "sandbox_fusion_client.py", endpoint)}
    python = calls["python"]
    assert python["status"] == "Success"
    assert python["run_result"]["stdout"] == "file+stdin\n"
    assert python["files"] == {"out.txt": "d3JpdHRlbg=="}  # "written"
    assert calls["python_summary"] == "Success"
    assert calls["cpp_compile"] == "compile_failed"
    assert calls["nodejs_exit"] == "run_failed"
    assert calls["python_timeout"] == "run_timeout"
    # An unknown language is SandboxError, which the client raises on (after its retries).
    assert "not offered here" in calls["lua"] and "nodejs" in calls["lua"]
    jupyter = calls["jupyter"]
    assert jupyter["status"] == "Success"
    cells = jupyter["cells"]
    assert cells[1]["display"] == [{"text/plain": "123"}] and cells[2]["stdout"] == "123\n"
    assert cells[3]["error"][0]["ename"] == "RuntimeError"
    assert cells[4]["display"] == [{"text/plain": "124"}]
    submitted = calls["submit"]
    assert submitted["accepted"] is True and submitted["id"] == 3
    assert [t["passed"] for t in submitted["tests"]] == [True, True]
    assert submitted["extracted_type"] == "fenced"


DOUBLE = {"inputs": ["21\n", "0\n", "5\n"], "outputs": ["42\n", "0\n", "10\n"]}
CASES = [
    # (case, expected score or per-case results, expected statuses)
    ({"completion": "```python\nprint(int(input()) * 2)\n```", "test_cases": DOUBLE},
     1.0, ["success"] * 3),
    ({"completion": "```python\nn = int(input())\nprint(n * 2 if n else 1)\n```",
      "test_cases": DOUBLE}, 2 / 3, ["success", "wrong_answer", "success"]),
    ({"completion": "```python\nraise SystemExit(int(input()))\n```", "test_cases": DOUBLE},
     0.0, ["runtime_error", "wrong_answer", "runtime_error"]),  # exit 0 printing nothing
    ({"completion": "```python\nwhile True: pass\n```", "test_cases": DOUBLE, "timeout": 1},
     0.0, ["timeout"] * 3),
    ({"completion": "no code at all", "test_cases": DOUBLE}, 0.0, [None]),
    ({"completion": "```python\ndef add(a, b):\n    return a + b\n```",
      "test_cases": {"inputs": ["1\n2", "3\n4"], "outputs": ["3", "8"], "fn_name": "add"}},
     0.5, ["success", "wrong_answer"]),
    ({"completion": "int main() { return 0 }", "language": "cpp", "test_cases": DOUBLE},
     [-4, -4, -4], ["compile_error"] * 3),
    ({"completion": "#include <iostream>\nint main(){long n; std::cin >> n; std::cout << 2*n;}",
      "language": "cpp", "test_cases": DOUBLE}, [True, True, True], ["success"] * 3),
]  # fmt: skip


def test_verl_sandbox_fusion_reward_and_tool(endpoint: str) -> None:
    cases = [case for case, _, _ in CASES]
    lines = _lines(VERL_PYTHON, "verl_sandbox_fusion.py", f"{endpoint}/run_code", json.dumps(cases))
    *scored, tool = lines
    assert len(scored) == len(CASES)
    for (case, expected, statuses), got in zip(CASES, scored, strict=True):
        if isinstance(expected, list):
            assert got["results"] == expected, (case, got)
        else:
            assert got["score"] == pytest.approx(expected), (case, got)
        if statuses != [None]:
            # Never "sandbox_error" or "api_error" (a -1): every case got a verdict.
            assert got["statuses"] == statuses, (case, got)
    assert tool == {"tool_status": True, "tool_reply": "out\nerr\n"}
