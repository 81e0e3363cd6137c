"""`proctor-eval sample --endpoint` against a real OpenAI-compatible server: `transformers serve`
(transformers' own, the `serving` extra) pinned to the trainer's tiny model, saved by the test
with a chat template of its own (random weights, tokenizer built in code, nothing from the hub).

`transformers serve` ignores `n` (one choice per request) and refuses fields outside OpenAI's
schema (`top_k`), so the sampler runs it with `--openai-params-only` and finds out about `n` with
its probe. The server starts once for the module. Retries and n per request, which it cannot be
made to exercise, run against a small stdlib server that answers as vLLM does."""

from __future__ import annotations

import http.server
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest

from proctor_client.evaluation.cli import main
from proctor_client.evaluation.rows import Generation, check_consistency

CHAT_TEMPLATE = "{% for m in messages %}{{ m['content'] }} {% endfor %}"
OFFLINE = {
    "HF_HUB_OFFLINE": "1",
    "HF_HUB_DISABLE_UPDATE_CHECK": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A two-layer Llama with random weights over the trainer's tiny word-level tokenizer. Not
    the trainer's Qwen2: transformers loads any `qwen2` checkpoint's tokenizer as Qwen2's
    byte-level BPE, which loses these words; a `llama` one keeps the tokenizer it was saved with."""
    tiny = pytest.importorskip("proctor_client.trainer.tiny")
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    tokenizer = tiny.tiny_tokenizer()
    tokenizer.chat_template = CHAT_TEMPLATE
    eos = tokenizer.eos_token_id
    config = transformers.LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        tie_word_embeddings=True,
        eos_token_id=eos,
        pad_token_id=eos,
        bos_token_id=None,
    )
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config)
    # transformers serve samples only when the model's own config says so (do_sample)
    model.generation_config = transformers.GenerationConfig(
        do_sample=True, eos_token_id=eos, pad_token_id=eos
    )
    path = tmp_path_factory.mktemp("tiny-served")
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def served(checkpoint: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`transformers serve CHECKPOINT` on a free port; yields its base URL."""
    pytest.importorskip("fastapi")  # the `serving` extra of transformers
    pytest.importorskip("openai")
    port = _free_port()
    log = (tmp_path_factory.mktemp("serve") / "serve.log").open("w")
    command = [sys.executable, "-m", "transformers.cli.transformers", "serve", str(checkpoint)]
    command += ["--host", "127.0.0.1", "--port", str(port), "--device", "cpu"]
    server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                              env={**os.environ, **OFFLINE})  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            assert server.poll() is None, Path(log.name).read_text()[-3000:]
            try:
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "transformers serve did not come up"
            time.sleep(0.5)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()


def _prompts(path: Path, chat: bool) -> Path:
    lines = [
        {"prompt_id": f"p{d}", "domain": "math", "reference": {"answer": str(d)},
         "prompt": [{"role": "user", "content": f"box {name}"}] if chat else f"box {name}"}
        for d, name in ((3, "three"), (7, "seven"))
    ]  # fmt: skip
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def _sample(url: str, checkpoint: Path, prompts: Path, out: Path, *extra: str) -> int:
    args = ["sample", "--endpoint", url, "--model", str(checkpoint), "--prompts", str(prompts)]
    args += ["--output", str(out), "--model-name", "tiny", "--openai-params-only"]
    args += ["--concurrency", "3"]
    return main([*args, "--n", "3", "--max-tokens", "4", *extra])


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("chat", [False, True], ids=["completions", "chat"])
def test_rows_from_the_server_are_complete_and_record_how_they_were_requested(
    served: str, checkpoint: Path, tmp_path: Path, chat: bool
) -> None:
    out = tmp_path / "g.jsonl"
    assert _sample(served, checkpoint, _prompts(tmp_path / "p.jsonl", chat), out) == 0
    rows = _rows(out)
    assert sorted((r["prompt_id"], r["sample"]) for r in rows) == [
        (p, s) for p in ("p3", "p7") for s in range(3)
    ]
    check_consistency((i, Generation.model_validate(r)) for i, r in enumerate(rows, 1))
    for row in rows:
        decoding = row["decoding"]
        assert decoding["endpoint"].endswith("/v1/chat/completions" if chat else "/v1/completions")
        assert decoding["samples_per_request"] == "1"  # the probe found that n is ignored
        assert "ignores n" in decoding["requests"]
        assert decoding["requested"]["temperature"] == 0.6 and decoding["effective"] is None
        assert decoding["sent"] == {"temperature": 0.6, "top_p": 0.95, "max_tokens": 4,
                                    "stream": False}  # fmt: skip
        assert row["finish_reason"] in ("stop", "length") and row["prompt_tokens"] == 2
        assert row["max_response_tokens"] == 4 and 0 <= row["response_tokens"] <= 4
        if row["finish_reason"] == "length":
            assert row["response_tokens"] == 4
        asked = {"p3": "box three", "p7": "box seven"}[row["prompt_id"]]
        assert row["prompt"] == ([{"role": "user", "content": asked}] if chat else asked)
    assert len({r["response"] for r in rows}) > 1  # sampled, with a seed per request
    report_dir = tmp_path / "report"
    assert main([str(out), "--out", str(report_dir), "--no-progress", "--workers", "1"]) == 0
    report = json.loads((report_dir / "report.json").read_text())
    assert report["models"]["tiny"]["samples"] == 6
    assert any("effective decoding is unknown" in w for w in report["warnings"])


def test_a_tiny_max_tokens_is_cut_with_finish_reason_length(
    served: str, checkpoint: Path, tmp_path: Path
) -> None:
    out = tmp_path / "g.jsonl"
    prompts = _prompts(tmp_path / "p.jsonl", chat=False)
    assert _sample(served, checkpoint, prompts, out, "--max-tokens", "1", "--temperature", "0") == 0
    rows = _rows(out)
    # greedy from a random model: the same single token for every sample of a prompt
    assert {r["response_tokens"] for r in rows} == {1}
    assert {r["finish_reason"] for r in rows} == {"length"}


def test_a_rerun_resumes_after_a_line_cut_short(
    served: str, checkpoint: Path, tmp_path: Path
) -> None:
    out = tmp_path / "g.jsonl"
    prompts = _prompts(tmp_path / "p.jsonl", chat=True)
    assert _sample(served, checkpoint, prompts, out) == 0
    lines = out.read_text().splitlines(keepends=True)
    kept = "".join(lines[:2])
    out.write_text(kept + lines[2][: len(lines[2]) // 2])  # a crash in the middle of a line
    assert _sample(served, checkpoint, prompts, out) == 0
    text = out.read_text()
    assert text.startswith(kept)  # what was written stays as it was
    rows = _rows(out)
    keys = [(r["prompt_id"], r["sample"]) for r in rows]
    assert len(keys) == 6 and len(set(keys)) == 6
    assert _sample(served, checkpoint, prompts, out) == 0  # complete: nothing more is asked
    assert out.read_text() == text


def test_a_rerun_under_other_settings_is_refused(
    served: str, checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "g.jsonl"
    prompts = _prompts(tmp_path / "p.jsonl", chat=False)
    assert _sample(served, checkpoint, prompts, out, "--n", "1") == 0
    before = out.read_text()
    assert _sample(served, checkpoint, prompts, out, "--temperature", "1.0") == 2
    assert "sampled with other settings" in capsys.readouterr().err
    assert out.read_text() == before


def test_a_server_that_ignores_n_is_named_when_n_is_forced(
    served: str, checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "g.jsonl"
    prompts = _prompts(tmp_path / "p.jsonl", chat=False)
    assert _sample(served, checkpoint, prompts, out, "--samples-per-request", "n") == 2
    err = capsys.readouterr().err
    assert "returned 1 choice(s) for n=3; pass --samples-per-request 1" in err


def test_fields_outside_openai_are_refused_by_this_server_and_said_so(
    served: str, checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prompts = _prompts(tmp_path / "p.jsonl", chat=False)
    args = ["sample", "--endpoint", served, "--model", str(checkpoint), "--prompts", str(prompts)]
    args += ["--output", str(tmp_path / "g.jsonl"), "--n", "2", "--no-progress"]
    assert main(args) == 2  # top_k and repetition_penalty sent, as they are by default
    err = capsys.readouterr().err
    assert "refused the request (HTTP 422)" in err and "top_k" in err


def test_a_wrong_model_name_stops_before_sampling(
    served: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prompts = _prompts(tmp_path / "p.jsonl", chat=False)
    assert _sample(served, Path("other-model"), prompts, tmp_path / "g.jsonl") == 2
    assert "does not serve 'other-model'" in capsys.readouterr().err


def test_a_dead_endpoint_is_one_line_and_exit_2(tmp_path: Path) -> None:
    prompts = _prompts(tmp_path / "p.jsonl", chat=False)
    url = f"http://127.0.0.1:{_free_port()}"  # nothing listens there
    command = [sys.executable, "-m", "proctor_client.evaluation.cli", "sample", "--endpoint", url]
    command += ["--model", "m", "--prompts", str(prompts), "--n", "2"]
    command += ["--output", str(tmp_path / "g.jsonl")]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert lines[0].startswith(f"proctor-eval sample: cannot reach {url}")
    assert "Traceback" not in done.stderr


class _Flaky(http.server.BaseHTTPRequestHandler):
    """A server that answers 503, then 429, then completions with n choices: the retry path and
    n per request, which `transformers serve` cannot be made to take."""

    answers: ClassVar[list[int]] = []

    def _send(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._send(200, {"object": "list", "data": [{"id": "m", "object": "model"}]})

    def do_POST(self) -> None:
        n = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["n"]
        status = self.answers.pop(0) if self.answers else 200
        choices = [{"index": i, "text": "so", "finish_reason": "stop"} for i in range(n)]
        usage = {"prompt_tokens": 2, "completion_tokens": 2 * n, "total_tokens": 2 + 2 * n}
        self._send(status, {"choices": choices, "usage": usage} if status == 200 else {})

    def log_message(self, *args: Any) -> None:
        pass


def test_429_and_5xx_are_retried_and_n_is_used_where_honoured(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _Flaky.answers = [503, 429]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Flaky)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        args = ["sample", "--endpoint", url, "--model", "m", "--n", "2", "--no-progress"]
        args += ["--prompts", str(_prompts(tmp_path / "p.jsonl", chat=False))]
        args += ["--openai-params-only"]
        assert main([*args, "--output", str(tmp_path / "g.jsonl")]) == 0
        assert _Flaky.answers == []  # the probe met the 503 and the 429, and went on
        rows = _rows(tmp_path / "g.jsonl")
        assert sorted((r["prompt_id"], r["sample"]) for r in rows) == [
            (p, s) for p in ("p3", "p7") for s in range(2)
        ]
        for row in rows:  # two choices a request: usage cannot say which took how many tokens
            assert row["decoding"]["samples_per_request"] == "n" and "response_tokens" not in row
        _Flaky.answers = [500] * 3
        assert main([*args, "--output", str(tmp_path / "h.jsonl"), "--retries", "1"]) == 2
        assert "HTTP 500" in capsys.readouterr().err and _Flaky.answers == [500]
    finally:
        server.shutdown()
        server.server_close()
