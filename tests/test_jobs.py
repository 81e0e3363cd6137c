"""The jobs API as an operator expects it: progress that moves while a job runs, a limit on
running jobs only, 429 with Retry-After, and DELETE to cancel or forget."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx

from tests.helpers import Server, poll


def _slow(n: int, tag: str = "") -> list[dict[str, Any]]:
    # Distinct symbolic answers (no fast path, no sharing): each is a real math-verify call.
    return [
        {
            "id": f"{tag}{k}",
            "domain": "math",
            "response": f"\\boxed{{\\frac{{{k + 1}}}{{{k + 3}}} + y - y}}",
            "reference": {"answer": f"\\frac{{{3 * (k + 1)}}}{{{3 * (k + 3)}}}"},
        }
        for k in range(n)
    ]


def _status(client: httpx.Client, job_id: str) -> dict[str, Any]:
    reply = client.get(f"/v1/jobs/{job_id}")
    assert reply.status_code == 200, reply.text
    body: dict[str, Any] = reply.json()
    return body


def test_progress_moves_item_by_item(make_server: Callable[..., Server]) -> None:
    server = make_server(workers=1, chunk_size=4)
    with httpx.Client(base_url=server.url, timeout=60) as client:
        items = _slow(120)
        job_id = client.post("/v1/jobs", json={"items": items}).json()["job_id"]
        seen: set[int] = set()

        def finished() -> bool:
            status = _status(client, job_id)
            seen.add(status["completed"])
            return bool(status["status"] == "done")

        poll(finished, 300, every=0.02)
        # Under the old 1,024-item slices a 120-item job jumped from 0 to 120.
        assert any(0 < n < 120 for n in seen), sorted(seen)
        final = _status(client, job_id)
        assert final["completed"] == final["total"] == 120
        assert all(r["score"] == 1.0 for r in final["result"]["results"])


def test_only_running_jobs_count_against_the_limit(make_server: Callable[..., Server]) -> None:
    server = make_server(workers=1, max_jobs=1)
    with httpx.Client(base_url=server.url, timeout=60) as client:
        first = client.post("/v1/jobs", json={"items": _slow(2, "a")}).json()["job_id"]
        poll(lambda: _status(client, first)["status"] == "done", 120)
        # The finished job is kept, yet a new one starts.
        running = client.post("/v1/jobs", json={"items": _slow(200, "b")})
        assert running.status_code == 202
        refused = client.post("/v1/jobs", json={"items": _slow(1, "c")})
        assert refused.status_code == 429
        assert int(refused.headers["retry-after"]) >= 1
        assert _status(client, first)["status"] == "done"


def test_delete_cancels_a_running_job_and_forgets_a_finished_one(
    make_server: Callable[..., Server],
) -> None:
    server = make_server(workers=1, max_jobs=1)
    with httpx.Client(base_url=server.url, timeout=60) as client:
        long_job = client.post("/v1/jobs", json={"items": _slow(400)}).json()["job_id"]
        cancelled = client.delete(f"/v1/jobs/{long_job}")
        assert cancelled.status_code == 200
        assert cancelled.json()["status"] == "cancelled"
        assert cancelled.json()["error"]["code"] == "cancelled"
        status = _status(client, long_job)
        assert status["status"] == "cancelled" and status["completed"] < 400
        # Its slot is free at once, and the pool drops its items.
        poll(lambda: not server.state.dispatcher.pool._ledger.batches, 30)
        quick = client.post("/v1/jobs", json={"items": _slow(3, "q")}).json()["job_id"]
        poll(lambda: _status(client, quick)["status"] == "done", 60)
        forgotten = client.delete(f"/v1/jobs/{quick}")
        assert forgotten.status_code == 200 and forgotten.json()["status"] == "done"
        assert client.get(f"/v1/jobs/{quick}").status_code == 404
        assert client.delete(f"/v1/jobs/{quick}").status_code == 404
