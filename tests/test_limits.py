"""Per-key limits, the request byte budget and the header limit, on real `proctor serve`
processes with two API keys: embedded, and in queue mode (a real redis-server, two real
`proctor worker`s and two API replicas sharing the counts).

A request holds its key's request slot while its body is still arriving, so a test holds slots
with sockets that send a head and part of a body; a job holds its items while it runs, so a job
of slow items holds them until it is cancelled. Nothing here asserts a time.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers import TEST_SPECS, Server, free_port, poll
from tests.redis_fixtures import (
    ROOT,
    RedisServer,
    Worker,
    proctor_env,
    status_of,
)

KEY_A = "limits-a-0123456789abcdef"
KEY_B = "limits-b-0123456789abcdef"
ITEMS = 4
"""`max_items_per_request` and `max_inflight_items_per_key` of these tests: one job fills it."""
REQUESTS = 2
"""`max_inflight_requests_per_key` of these tests."""
FAST = {"domain": "no-such-domain", "response": ""}
"""An item answered `invalid` at once, without a worker: it shows a request was admitted."""
SLOW = {"domain": "sleep", "response": "", "reference": {"seconds": 300}}


def _env(**settings: Any) -> dict[str, str]:
    env = proctor_env()
    env["PROCTOR_API_KEYS"] = f"{KEY_A},{KEY_B}"
    env["PROCTOR_MAX_ITEMS_PER_REQUEST"] = str(ITEMS)
    env["PROCTOR_MAX_INFLIGHT_ITEMS_PER_KEY"] = str(ITEMS)
    env["PROCTOR_MAX_INFLIGHT_REQUESTS_PER_KEY"] = str(REQUESTS)
    env["PROCTOR_ITEM_TIMEOUT_S"] = "600"
    env["PROCTOR_REQUEST_DEADLINE_S"] = "900"
    env.update({f"PROCTOR_{name.upper()}": str(value) for name, value in settings.items()})
    return env


def _serve(log: Path, env: dict[str, str], *args: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "service.cli", "serve", "--port", str(port), "--workers", "1",
             "--spec-dir", str(TEST_SPECS), "--log-level", "info", *args],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    poll(lambda: status_of(url + "/healthz") == 200 or process.poll() is not None, 180)
    assert process.poll() is None, log.read_text()[-2000:]
    return process, url


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    process.wait(timeout=60)


@pytest.fixture
def embedded(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    log = tmp_path / "serve.log"
    process, url = _serve(log, _env())
    try:
        poll(lambda: status_of(url + "/readyz") == 200, 180)
        yield url, log
    finally:
        _stop(process)


def _client(url: str, key: str) -> httpx.Client:
    return httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=120)


def _in_flight(url: str, key: str) -> dict[str, int]:
    with _client(url, key) as client:
        counts: dict[str, int] = client.get("/v1/limits").json()["in_flight"]
        return counts


def _hold(url: str, key: str) -> socket.socket:
    """A request of `key` whose body never finishes arriving: it holds one request slot."""
    host, port = url.removeprefix("http://").split(":")
    conn = socket.create_connection((host, int(port)))
    head = (
        f"POST /v1/score HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {key}\r\n"
        "Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
    )
    conn.sendall(head.encode() + b'{"items": [')
    return conn


def _score(url: str, key: str, items: list[dict[str, Any]]) -> httpx.Response:
    with _client(url, key) as client:
        return client.post("/v1/score", json={"items": items})


def _refused(response: httpx.Response, code: str = "key_limit") -> None:
    assert response.status_code == 429, response.text
    assert response.headers["Retry-After"].isdigit()
    body = response.json()
    assert body["error"]["code"] == code and body["detail"]["code"] == code, body


def _check_request_slots(a_urls: list[str], b_url: str) -> None:
    """`REQUESTS` held slots of A (spread over `a_urls`) refuse A's next request anywhere; B
    is served; once A's clients go, A's count is 0 again and A is served."""
    held = [_hold(a_urls[n % len(a_urls)], KEY_A) for n in range(REQUESTS)]
    try:
        poll(lambda: _in_flight(b_url, KEY_A)["requests"] == REQUESTS, 60)
        for url in a_urls:
            _refused(_score(url, KEY_A, [FAST]))
        with _client(a_urls[0], KEY_A) as a:
            _refused(a.post("/v1/jobs", json={"items": [FAST]}))
        answered = _score(b_url, KEY_B, [FAST])
        assert answered.status_code == 200, answered.text
        assert answered.json()["results"][0]["status"] == "invalid"
    finally:
        for conn in held:
            conn.close()  # the client goes mid-body
    poll(lambda: _in_flight(b_url, KEY_A)["requests"] == 0, 60)
    assert _score(a_urls[-1], KEY_A, [FAST]).status_code == 200


def _check_job_items(a_url: str, b_url: str) -> None:
    """A running job of A's holds `ITEMS` items: A's next request is refused, B's is served;
    once the job is cancelled A's items are 0 again."""
    with _client(a_url, KEY_A) as a:
        created = a.post("/v1/jobs", json={"items": [SLOW] * ITEMS})
        assert created.status_code == 202, created.text
        job = created.json()["job_id"]
        try:
            assert _in_flight(b_url, KEY_A)["items"] == ITEMS
            _refused(_score(b_url, KEY_A, [FAST]))
            _refused(a.post("/v1/jobs", json={"items": [FAST]}))
            assert _score(b_url, KEY_B, [FAST] * ITEMS).status_code == 200
            assert _in_flight(b_url, KEY_B) == {"requests": 0, "items": 0}
        finally:
            assert a.delete(f"/v1/jobs/{job}").status_code == 200
    poll(lambda: _in_flight(b_url, KEY_A)["items"] == 0, 60)
    assert _score(b_url, KEY_A, [FAST] * ITEMS).status_code == 200


def test_per_key_limits_embedded(embedded: tuple[str, Path]) -> None:
    url, log = embedded
    _check_request_slots([url], url)
    _check_job_items(url, url)
    text = log.read_text()
    assert "INFO service.http.handlers" in text and "client disconnected" in text, text[-3000:]
    assert "Traceback" not in text and " ERROR " not in text, text[-3000:]


def test_openrlhf_applies_the_limits_of_score(embedded: tuple[str, Path]) -> None:
    url, _ = embedded
    body = {"query": ["q \\boxed{2}"] * (ITEMS + 1), "prompts": ["q"] * (ITEMS + 1)}
    body["labels"] = ["2"] * (ITEMS + 1)
    with _client(url, KEY_A) as a:
        too_many = a.post("/v1/openrlhf", json=body)
        assert too_many.status_code == 422, too_many.text
        assert too_many.json()["detail"][0]["loc"] == ["body", "query"]
        assert too_many.json()["detail"][0]["type"] == "too_many_items"
        unknown = a.post("/v1/openrlhf?spec=nope", json={"query": [], "prompts": [], "labels": []})
        assert unknown.status_code == 422
        assert unknown.json()["detail"][0]["loc"] == ["query", "spec"]
        assert "this server knows" in unknown.json()["detail"][0]["msg"]
        jobs = a.post("/v1/jobs", json={"items": [FAST] * (ITEMS + 1)})
        assert jobs.status_code == 422
        assert jobs.json()["detail"][0]["type"] == "too_many_items"


def _raw(url: str, request: bytes) -> bytes:
    """The server's whole answer to `request` (it closes the connection, or is read to EOF)."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=60) as conn:
        conn.sendall(request)
        conn.shutdown(socket.SHUT_WR)
        chunks = []
        while chunk := conn.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def test_headers_past_the_limit_are_431(embedded: tuple[str, Path]) -> None:
    url, _ = embedded
    small = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"p" * 60_000 + b"\r\n\r\n"
    assert _raw(url, small).startswith(b"HTTP/1.1 200")
    big = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"p" * 100_000 + b"\r\n\r\n"
    answer = _raw(url, big)
    assert answer.startswith(b"HTTP/1.1 431"), answer[:200]
    assert b'"code":"headers_too_large"' in answer
    many = b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + b"X-Pad: p\r\n" * 10_000 + b"\r\n"
    assert _raw(url, many).startswith(b"HTTP/1.1 431")


def test_a_key_in_the_url_is_redacted_however_spelt(embedded: tuple[str, Path]) -> None:
    url, log = embedded
    body = {"query": ["q \\boxed{2}"], "prompts": ["q"], "labels": ["2"]}
    # The query string is URL-decoded: `api%5Fkey` is `api_key`, which OpenRLHF's route takes.
    taken = httpx.post(f"{url}/v1/openrlhf?api%5Fkey={KEY_A}", json=body, timeout=120)
    assert taken.status_code == 200, taken.text
    # Elsewhere a key in the URL authenticates nothing, and is redacted all the same.
    for name in ("api_key", "API_KEY", "Api-Key", "api%5fkey"):
        refused = httpx.post(f"{url}/v1/score?{name}={KEY_B}", json={"items": []})
        assert refused.status_code == 401
    poll(lambda: log.read_text().count("/v1/score?") >= 4, 30)
    text = log.read_text()
    assert "/v1/openrlhf?api%5Fkey=REDACTED" in text, text[-2000:]
    assert KEY_A not in text and KEY_B not in text


def _rss_peak_kib(pid: int) -> int:
    """The process's peak resident set (VmHWM), from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM in /proc")


BODY_BYTES = 16 * 1024 * 1024
SENDERS = 12


def _large_body(n: int) -> bytes:
    """A body of `BODY_BYTES` that is read and decoded whole, then refused (422, an unknown
    field): all cost to the API process and none to its workers."""
    head = b'{"items": [], "pad%d": "' % n
    return head + b"x" * (BODY_BYTES - len(head) - 2) + b'"}'


def _post_raw(url: str, body: bytes) -> int:
    """POST `body` as a client that waits for `100 Continue` before sending it: a request the
    server refuses up front is answered without its body ever being sent. The final status (a
    429 is checked to be the byte budget's)."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=300) as conn:
        head = (
            f"POST /v1/score HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {KEY_B}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
            "Expect: 100-continue\r\nConnection: close\r\n\r\n"
        )
        conn.sendall(head.encode())
        reader = conn.makefile("rb")
        status = int(reader.readline().split()[1])
        if status == 100:
            while reader.readline() not in (b"\r\n", b""):
                pass  # the rest of the interim response
            conn.sendall(body)
            status = int(reader.readline().split()[1])
        if status == 429:
            assert b'"code":"request_bytes_in_flight"' in reader.read()
        return status


def test_request_bytes_in_flight_are_bounded(tmp_path: Path) -> None:
    budget = 2 * BODY_BYTES
    env = _env(
        max_request_bytes=BODY_BYTES,
        max_inflight_request_bytes=budget,
        max_inflight_requests_per_key=SENDERS,  # the budget is what refuses here
    )
    process, url = _serve(tmp_path / "serve.log", env)
    try:
        poll(lambda: status_of(url + "/readyz") == 200, 180)
        assert _post_raw(url, _large_body(0)) == 422  # warm: the decoders have run once
        before = _rss_peak_kib(process.pid)

        def until_taken(n: int) -> list[int]:
            statuses = [_post_raw(url, _large_body(n))]
            while statuses[-1] == 429:  # what a client does: retry (sooner than asked, here)
                time.sleep(0.05)
                statuses.append(_post_raw(url, _large_body(n)))
            return statuses

        with ThreadPoolExecutor(SENDERS) as pool:
            runs = list(pool.map(until_taken, range(SENDERS)))
        grown_mib = (_rss_peak_kib(process.pid) - before) / 1024
    finally:
        _stop(process)
    assert all(run[-1] == 422 for run in runs), runs
    assert all(set(run[:-1]) <= {429} for run in runs), runs
    assert any(len(run) > 1 for run in runs), "no body was ever refused"
    # The budget's bytes, a copy as the body is joined and one decoded: three budgets at most
    # (without a budget, the senders' bodies are read all at once: benchmarks/HISTORY.md).
    assert grown_mib < 3 * budget / 2**20, grown_mib
    print(f"peak RSS grew {grown_mib:.0f} MiB with {SENDERS} concurrent senders")


@pytest.fixture
def replicas(
    redis_server: RedisServer, start_worker: Callable[..., Worker], tmp_path: Path
) -> Iterator[list[tuple[subprocess.Popen[bytes], str]]]:
    workers = [start_worker(redis_server.url, wait=False) for _ in range(2)]
    for worker in workers:
        worker.wait_alive(redis_server.url)
    started = [
        _serve(tmp_path / f"serve-{n}.log", _env(), "--queue", redis_server.url) for n in range(2)
    ]
    try:
        for _, url in started:
            poll(lambda url=url: status_of(url + "/readyz") == 200, 120)
        yield started
    finally:
        for process, _ in started:
            if process.poll() is None:
                _stop(process)


def test_per_key_limits_are_global_in_queue_mode(
    replicas: list[tuple[subprocess.Popen[bytes], str]],
) -> None:
    (first, one), (_, two) = replicas
    _check_request_slots([one, two], two)
    _check_job_items(one, two)
    # A replica that dies holding a slot: its lease lapses, and A gets its share back.
    held = _hold(one, KEY_A)
    poll(lambda: _in_flight(two, KEY_A)["requests"] == 1, 60)
    os.kill(first.pid, signal.SIGKILL)
    first.wait(timeout=60)
    held.close()
    poll(lambda: _in_flight(two, KEY_A)["requests"] == 0, 60)


def test_a_streamed_body_past_the_budget_is_429(make_server: Callable[..., Server]) -> None:
    """A body with no declared length is counted as it arrives, against what the others hold."""
    server = make_server(workers=1, max_request_bytes=65536, max_inflight_request_bytes=65536)
    small = {"items": [FAST]}
    held = socket.create_connection(("127.0.0.1", server.port))
    with httpx.Client(base_url=server.url, timeout=60) as client:
        try:
            head = b"POST /v1/score HTTP/1.1\r\nHost: x\r\nContent-Length: 65500\r\n\r\n"
            held.sendall(head + b'{"items": [')  # reserves 65,500 bytes and never finishes
            poll(lambda: client.post("/v1/score", json=small).status_code == 429, 30)

            def chunks() -> Iterator[bytes]:
                yield b'{"items": [], "pad": "'  # fits beside the held body; the rest does not
                for _ in range(10):
                    yield b"x" * 1000
                yield b'"}'

            streamed = client.post("/v1/score", content=chunks())
            assert streamed.status_code == 429, streamed.text
            assert streamed.json()["error"]["code"] == "request_bytes_in_flight"
            assert streamed.headers["Retry-After"].isdigit()
        finally:
            held.close()
        poll(lambda: client.post("/v1/score", json=small).status_code == 200, 30)
