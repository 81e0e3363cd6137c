"""`proctor serve` as a subprocess on a free loopback port, for the benchmarks' (b) side."""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

import httpx

__all__ = ["proctor_server", "queue_backend", "timed_score"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextmanager
def proctor_server(env: Mapping[str, str] | None = None, ready_s: float = 180) -> Iterator[str]:
    """Start the service with `env` added to ours, wait for /readyz, yield its URL, stop it."""
    port = _free_port()
    command = [sys.executable, "-m", "service.cli", "serve", "--port", str(port)]
    server = subprocess.Popen(
        [*command, "--log-level", "warning"], env={**os.environ, **(env or {})}
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + ready_s
        while True:
            try:
                if httpx.get(url + "/readyz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass  # not listening yet
            if time.monotonic() > deadline or server.poll() is not None:
                raise RuntimeError("proctor serve did not become ready")
            time.sleep(0.2)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=60)


@contextmanager
def queue_backend(workers: int = 1, env: Mapping[str, str] | None = None) -> Iterator[str]:
    """A `redis-server` (no persistence) on a free loopback port and `workers` `proctor worker`s
    on it, with `env` added to ours; yields its URL (the API's `PROCTOR_QUEUE_URL`), stops all."""
    port = _free_port()
    url = f"redis://127.0.0.1:{port}/0"
    started = [
        subprocess.Popen(
            ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no"],
            stdout=subprocess.DEVNULL,
        )
    ]  # fmt: skip
    try:
        command = [sys.executable, "-m", "service.cli", "worker", "--queue", url]
        for _ in range(workers):
            started.append(
                subprocess.Popen(
                    [*command, "--log-level", "warning"], env={**os.environ, **(env or {})}
                )
            )
        yield url  # the API's /readyz waits for a live worker
    finally:
        for process in reversed(started):
            process.terminate()
            process.wait(timeout=60)


def timed_score(
    url: str, body: str | bytes, headers: Mapping[str, str] | None = None
) -> tuple[list[dict[str, Any]], float]:
    """POST one /v1/score body (with `headers` added, e.g. an API key); its results and the
    seconds from sending the request to having read the whole reply.

    The request goes through the standard library's `http.client` on a fresh connection: one
    `sendall` of the body and one read of the reply. httpx spends about 20 ms of its own CPU on
    a 12 MB body, on the same two cores the service runs on, and that is the client's cost, not
    the service's.
    """
    payload = body.encode() if isinstance(body, str) else body
    address = urlsplit(url)
    connection = http.client.HTTPConnection(address.hostname or "127.0.0.1", address.port)
    try:
        started = time.perf_counter()
        connection.request(
            "POST",
            "/v1/score",
            body=payload,
            headers={"content-type": "application/json", **(headers or {})},
        )
        reply = connection.getresponse()
        data = reply.read()
        elapsed = time.perf_counter() - started
    finally:
        connection.close()
    if reply.status != 200:
        raise RuntimeError(f"/v1/score answered {reply.status}: {data[:500]!r}")
    results: list[dict[str, Any]] = json.loads(data)["results"]
    return results, elapsed
