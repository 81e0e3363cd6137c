"""A scripted OpenAI-compatible judge: a real HTTP server in a thread, at the seam where a judge
model would answer. A test gives it a `script`, called with each request's user message and
returning (HTTP status, reply text or body); every request it receives is kept (`asked`), so
tests can assert what was sent and how often."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Script = Callable[[str], tuple[int, str]]


def equivalence_judge(prompt: str) -> tuple[int, str]:
    """Answers `[[A=B]]` when the text after "First answer:" and after "Second answer:" are
    equal once stripped, `[[A!=B]]` otherwise: a judge with no bias of order."""
    first = prompt.split("First answer:\n", 1)[1].split("\n\nSecond answer:", 1)[0].strip()
    second = prompt.split("Second answer:\n", 1)[1].split("\n\nRules:", 1)[0].strip()
    verdict = "[[A=B]]" if first == second else "[[A!=B]]"
    return 200, f"Comparing the two.\n{verdict}"


@dataclass
class ScriptedJudge:
    script: Script = equivalence_judge
    models: list[dict[str, Any]] = field(
        default_factory=lambda: [{"id": "judge-model", "root": "/w/judge", "max_model_len": 4096}]
    )
    asked: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)
    """Set at teardown, so that a script that waits on it (a slow judge) lets its thread go."""
    url: str = ""

    def prompts(self) -> list[str]:
        return [r["messages"][0]["content"] for r in self.asked]


def _handler(judge: ScriptedJudge) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _send(self, status: int, body: dict[str, Any] | str) -> None:
            data = (body if isinstance(body, str) else json.dumps(body)).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path == "/v1/models":
                self._send(200, {"object": "list", "data": judge.models})
            else:
                self._send(404, {"error": "not found"})

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            judge.asked.append(body)
            judge.headers.append(dict(self.headers))
            if self.path != "/v1/chat/completions":
                self._send(404, {"error": "not found"})
                return
            status, text = judge.script(body["messages"][0]["content"])
            if status != 200:
                self._send(status, {"error": {"message": text}})
                return
            self._send(
                200,
                {
                    "id": "x",
                    "object": "chat.completion",
                    "model": body["model"],
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": text},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {
                        "prompt_tokens": len(body["messages"][0]["content"]) // 4,
                        "completion_tokens": len(text) // 4,
                    },
                },
            )

    return Handler


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256
    """Connections waiting to be accepted, as a model server keeps many (the default 5 resets
    a caller's 64th concurrent connection)."""


@contextmanager
def scripted_judge(script: Script = equivalence_judge) -> Iterator[ScriptedJudge]:
    judge = ScriptedJudge(script)
    server = _Server(("127.0.0.1", 0), _handler(judge))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    judge.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        yield judge
    finally:
        judge.release.set()
        server.shutdown()
        server.server_close()
