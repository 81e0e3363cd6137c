"""`ProctorTask` in verifiers 0.4 (v1): full rollouts of a task mixing it in, run by verifiers'
own `SingleAgentEnv` inside verifiers' venv (tests/run builds it; its pins clash with the
server's), against a live server. The model is a scripted policy: an OpenAI-compatible server
this test runs, which streams each prompt's scripted reply with its finish reason and token
count, as a model server would. Rewards and metrics recorded on the trace, a truncated reply's
termination penalty, and an unjudged sample that fails its rollout (reward unset) instead of
scoring 0."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import Server

ROOT = Path(__file__).parent.parent
VERIFIERS_PYTHON = Path(
    os.environ.get("PROCTOR_VERIFIERS_PYTHON", "/opt/proctor-verifiers/bin/python")
)
MODEL = "scripted-policy"
MAX_TOKENS = 1024


@dataclass
class Reply:
    text: str
    finish_reason: str = "stop"
    completion_tokens: int = 40


@dataclass
class ScriptedPolicy:
    """The model a rollout samples from: each prompt's reply, and every request it was sent."""

    replies: dict[str, Reply]
    asked: list[dict[str, Any]] = field(default_factory=list)
    url: str = ""

    def stream(self, body: dict[str, Any]) -> bytes:
        """The reply as an OpenAI chat completion stream: the text, the finish reason, the usage."""
        reply = self.replies[body["messages"][-1]["content"]]
        head = {"id": "scripted", "object": "chat.completion.chunk", "created": 0,
                "model": body["model"]}  # fmt: skip
        usage = {"prompt_tokens": 12, "completion_tokens": reply.completion_tokens,
                 "total_tokens": 12 + reply.completion_tokens}  # fmt: skip
        chunks = [
            {**head, "choices": [{"index": 0, "finish_reason": None,
                                  "delta": {"role": "assistant", "content": reply.text}}]},
            {**head, "choices": [{"index": 0, "delta": {}, "finish_reason": reply.finish_reason}]},
            {**head, "choices": [], "usage": usage},
        ]  # fmt: skip
        events = [f"data: {json.dumps(chunk)}\n\n" for chunk in chunks] + ["data: [DONE]\n\n"]
        return "".join(events).encode()


def _handler(policy: ScriptedPolicy) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            policy.asked.append(body)
            streamed = self.path == "/v1/chat/completions" and body.get("stream") is True
            data = policy.stream(body) if streamed else b'{"error": "only streamed chat"}'
            self.send_response(200 if streamed else 400)
            kind = "text/event-stream" if streamed else "application/json"
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


@pytest.fixture
def scripted_policy() -> Iterator[Callable[[dict[str, Reply]], ScriptedPolicy]]:
    servers: list[ThreadingHTTPServer] = []

    def start(replies: dict[str, Reply]) -> ScriptedPolicy:
        policy = ScriptedPolicy(replies)
        server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(policy))
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        policy.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        return policy

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def _rollouts(
    proctor_url: str, policy: ScriptedPolicy, rows: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    if not VERIFIERS_PYTHON.exists():
        pytest.skip(f"no verifiers environment at {VERIFIERS_PYTHON} (tests/run builds it)")
    spec = {"policy_url": policy.url, "model": MODEL, "max_tokens": MAX_TOKENS, "rows": rows}
    done = subprocess.run(
        [str(VERIFIERS_PYTHON), str(ROOT / "tests" / "verifiers_task.py"), json.dumps(spec)],
        env={**os.environ, "PYTHONPATH": str(ROOT / "clients"), "PROCTOR_URL": proctor_url},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    outcomes = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert len(outcomes) == len(rows), done.stdout + done.stderr[-3000:]
    # Every rollout sampled its reply from the policy, with the run's model and token limit.
    assert sorted(b["messages"][-1]["content"] for b in policy.asked) == sorted(
        r["prompt"] for r in rows
    )
    assert {(b["model"], b["max_tokens"]) for b in policy.asked} == {(MODEL, MAX_TOKENS)}
    return outcomes


def test_rollouts_are_rewarded_by_proctor(
    server: Server, scripted_policy: Callable[[dict[str, Reply]], ScriptedPolicy]
) -> None:
    policy = scripted_policy(
        {
            "Q1: halve 1.": Reply("Halving gives \\boxed{\\frac{1}{2}}"),
            "Q2: halve 1.": Reply("It is \\boxed{2}"),
            "Q3: halve 1.": Reply("I think it is one half"),  # no answer found: parsed 0
            "Q4: pick one.": Reply("The answer is B"),
        }
    )
    outcomes = _rollouts(
        server.url,
        policy,
        [
            {"prompt": "Q1: halve 1.", "answer": "0.5"},
            {"prompt": "Q2: halve 1.", "answer": "0.5"},
            {"prompt": "Q3: halve 1.", "answer": "0.5"},
            {"prompt": "Q4: pick one.", "answer": "B", "domain": "stem"},
        ],
    )
    assert [o["reply"] for o in outcomes] == [r.text for r in policy.replies.values()]
    assert all(o["ok"] and o["stop"] == "agent_completed" for o in outcomes), outcomes
    assert [o["rewards"]["proctor"] for o in outcomes] == [1.0, 0.0, 0.0, 1.0]
    assert [o["reward"] for o in outcomes] == [1.0, 0.0, 0.0, 1.0]
    assert [o["metrics"]["success"] for o in outcomes] == [1.0, 0.0, 0.0, 1.0]
    assert [o["metrics"]["parsed"] for o in outcomes] == [1.0, 1.0, 0.0, 1.0]
    assert [o["metrics"]["score"] for o in outcomes] == [1.0, 0.0, 0.0, 1.0]


def test_a_truncated_reply_gets_the_spec_s_penalty(
    make_server: Callable[..., Server],
    scripted_policy: Callable[[dict[str, Reply]], ScriptedPolicy],
) -> None:
    """The policy's finish reason, as verifiers records it on the model call, reaches Proctor:
    under a termination spec a reply cut at `max_tokens` earns 0 though its answer is right."""
    srv = make_server(default_spec="prorl-v1-termination")
    policy = scripted_policy(
        {
            "Q1: halve 1.": Reply("so \\boxed{\\frac{1}{2}}"),
            "Q2: halve 1.": Reply("so \\boxed{\\frac{1}{2}}", "length", MAX_TOKENS),
        }
    )
    stop, cut = _rollouts(
        srv.url,
        policy,
        [{"prompt": "Q1: halve 1.", "answer": "0.5"}, {"prompt": "Q2: halve 1.", "answer": "0.5"}],
    )
    assert stop["rewards"]["proctor"] == 1.0 and stop["truncated"] is False
    assert cut["call"] == {"finish_reason": "length", "completion_tokens": MAX_TOKENS,
                           "max_tokens": MAX_TOKENS}  # fmt: skip
    assert cut["truncated"] is True
    assert cut["rewards"]["proctor"] == 0.0
    assert cut["metrics"]["score"] == 1.0  # solved, and penalised for the truncation


def test_an_unjudged_sample_raises_not_zero(
    server: Server, scripted_policy: Callable[[dict[str, Reply]], ScriptedPolicy]
) -> None:
    policy = scripted_policy({"Q1: anything.": Reply("done")})
    (outcome,) = _rollouts(
        server.url, policy, [{"prompt": "Q1: anything.", "answer": "2", "domain": "no_such_domain"}]
    )
    assert outcome["ok"] is False  # the rollout failed: what verifiers' consumers filter on
    ((kind, message),) = [(e["type"], e["message"]) for e in outcome["errors"]]
    assert kind == "TaskError" and "verifiers cannot leave it out" in message
    assert outcome["rewards"]["proctor"] is None  # left unset, never 0
    assert outcome["metrics"] == {}
    # verifiers' `trace.reward` sums the rewards that are set: it reads 0 on a failed trace,
    # which is why the docs tell users to filter on `ok`.
    assert outcome["reward"] == 0
