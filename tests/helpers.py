"""Test helpers: a real Proctor server (uvicorn in a thread) and a scoring shortcut."""

from __future__ import annotations

import json
import os
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from service.main import create_app
from service.settings import Settings

TEST_SPECS = Path(__file__).parent / "specs"
"""Specs used only by the tests (short timeouts), loaded beside the built-in ones."""


def poll(condition: Callable[[], bool], timeout: float, every: float = 0.05) -> None:
    """Wait until `condition()` holds, failing the test after `timeout` seconds: a deadline for
    what the test waits on, never a fixed sleep standing in for it."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not true within {timeout:.0f}s: {condition}")
        time.sleep(every)


def descendants(pid: int) -> set[int]:
    """Every live process below `pid` (children, their children, ...), read from /proc."""
    children: dict[int, list[int]] = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Server:
    """A real uvicorn server running a Proctor app in a background thread."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.app = create_app(settings)
        self.port = free_port()
        config = uvicorn.Config(self.app, host="127.0.0.1", port=self.port, log_level="warning")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def state(self) -> Any:
        return self.app.state.proctor

    def start(self, ready_timeout: float = 120.0, wait_ready: bool = True) -> None:
        """Start serving; wait for /readyz (or only /healthz when `wait_ready` is false)."""
        self._thread.start()
        path = "/readyz" if wait_ready else "/healthz"
        deadline = time.monotonic() + ready_timeout
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.url + path, timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass  # not listening yet
            time.sleep(0.1)
        raise RuntimeError(f"the test server did not answer {path} in time")

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=30)


@contextmanager
def running_server(**overrides: Any) -> Iterator[Server]:
    values: dict[str, Any] = {"workers": 2, "spec_dirs": (TEST_SPECS,)}
    values.update(overrides)
    server = Server(Settings(**values))
    server.start()
    try:
        yield server
    finally:
        server.stop()


def score(client: httpx.Client, items: list[dict[str, Any]], spec: str | None = None) -> Any:
    body: dict[str, Any] = {"items": items}
    if spec is not None:
        body["spec"] = spec
    response = client.post("/v1/score", json=body)
    assert response.status_code == 200, response.text
    results = response.json()["results"]
    assert len(results) == len(items)
    return results


_DOC = Path(__file__).resolve().parent.parent / "docs" / "api.md"
_EXAMPLE = re.compile(r"<!-- example: (?P<expect>[^>]*?) -->\s*```json\n(?P<item>.*?)\n```", re.S)


def documented_examples() -> list[tuple[list[str], dict[str, Any]]]:
    """docs/api.md's example items, each with what its comment says it scores: a status, then
    `field=value` checks (`code=` names the error code)."""
    return [
        (m["expect"].split(), json.loads(m["item"])) for m in _EXAMPLE.finditer(_DOC.read_text())
    ]


def check_documented(expect: list[str], result: dict[str, Any]) -> None:
    """Assert `result` is what the example's comment says."""
    status, *checks = expect
    assert result["status"] == status, result
    for check in checks:
        field, value = check.split("=")
        got = result["error"]["code"] if field == "code" else result[field]
        assert str(got).lower() == value.lower(), (field, result)
