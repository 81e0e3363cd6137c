"""A soak of queue mode: batch after batch of mixed items through `proctor serve --queue` and two
real workers, every item answered exactly once with its expected verdict, and the resident memory
of the API and of each worker (with its pool and sandboxes) flat once warm.

CI runs the short soak (PROCTOR_SHORT=1: 6,000 items); PROCTOR_SOAK=1 runs the issue's 100,000.
The RSS curve is printed (`pytest -s`), and kept in the failure message when it grows.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers import descendants, poll
from tests.redis_fixtures import RedisServer, Worker, serve_queue, status_of

pytestmark = [pytest.mark.redis, pytest.mark.slow]

BATCH = 1000
TOTAL = 100_000 if os.environ.get("PROCTOR_SOAK") == "1" else 6_000
WARM_FRACTION = 0.3
"""RSS is compared from the point where this share of the soak is done (caches filled)."""
GROWTH_ALLOWED_MB = 80.0


def _item(k: int) -> tuple[dict[str, Any], float]:
    """Item `k` of the soak (all distinct, so no verdict memo answers for the workers) and its
    expected score. Half the answers are right."""
    right = k % 2 == 0
    kind = k % 10
    if kind < 4:
        answer = k if right else k + 1
        item = {"domain": "math", "response": f"so it is \\boxed{{{answer}}}",
                "reference": {"answer": str(k)}}  # fmt: skip
    elif kind < 6:
        letter = "C" if right else "A"
        item = {"domain": "stem", "response": f"Case {k}. Answer: {letter}",
                "reference": {"answer": "C", "choices": ["w", "x", "y", f"z{k}"]}}  # fmt: skip
    elif kind < 8:
        entry = {"question": f"Calculate {k} + 1.", "answer": str(k + 1), "metadata": {}}
        got = k + 1 if right else k
        item = {"domain": "puzzle", "response": f"<answer>{got}</answer>",
                "reference": {"task": "basic_arithmetic", "entry": entry}}  # fmt: skip
    elif kind < 9:
        text = f"all lower case, number {k}" if right else f"Not Lower Case {k}"
        item = {"domain": "ifeval", "response": text, "reference": {
            "instruction_id_list": ["change_case:english_lowercase"], "kwargs": [{}]}}  # fmt: skip
    else:
        program = "n = int(input())\nprint(n * 2)" if right else "n = int(input())\nprint(n)"
        item = {"domain": "code", "response": f"```python\n# {k}\n{program}\n```",
                "reference": {"language": "python", "tests": {"stdio": [
                    {"input": f"{k}\n", "output": f"{2 * k}\n"}]}}}  # fmt: skip
    return {**item, "id": str(k)}, 1.0 if right else 0.0


def _rss_mb(root: int) -> float:
    """Resident memory of a process and all its descendants, in MB."""
    total = 0
    for pid in (root, *descendants(root)):
        try:
            with open(f"/proc/{pid}/status") as f:
                total += next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
        except (OSError, StopIteration):
            continue  # gone meanwhile, or a kernel thread
    return total / 1024


def test_a_long_run_loses_nothing_and_holds_its_memory(
    redis_server: RedisServer, start_worker: Callable[..., Worker], tmp_path: Path
) -> None:
    workers = [start_worker(redis_server.url, registry=None, wait=False) for _ in range(2)]
    for worker in workers:
        worker.wait_alive(redis_server.url)
    serve, url = serve_queue(redis_server.url, tmp_path / "serve.log", registry=None)
    curve: list[tuple[int, float, list[float]]] = []
    try:
        poll(lambda: status_of(url + "/readyz") == 200, timeout=120, every=0.5)
        with httpx.Client(base_url=url, timeout=600) as client:
            for start in range(0, TOTAL, BATCH):
                pairs = [_item(k) for k in range(start, min(start + BATCH, TOTAL))]
                reply = client.post("/v1/score", json={"items": [item for item, _ in pairs]})
                assert reply.status_code == 200, reply.text[:2000]
                results = reply.json()["results"]
                assert [r["id"] for r in results] == [item["id"] for item, _ in pairs]
                wrong = [
                    (item["id"], item["domain"], r["status"], r["score"], r["error"])
                    for (item, score), r in zip(pairs, results, strict=True)
                    if (r["status"], r["score"]) != ("ok", score)
                ]
                assert wrong == [], wrong[:5]
                curve.append((start + len(pairs), _rss_mb(serve.pid),
                              [_rss_mb(w.pid) for w in workers]))  # fmt: skip
    finally:
        serve.terminate()
        serve.wait(timeout=60)
    table = "\n".join(
        f"{done:>7} items  API {api:7.1f} MB  workers {'  '.join(f'{w:7.1f}' for w in ws)} MB"
        for done, api, ws in curve
    )
    print(f"\nRSS after each batch of {BATCH}:\n{table}")
    warm = curve[max(0, int(len(curve) * WARM_FRACTION) - 1)]
    last = curve[-1]
    growth = [last[1] - warm[1]] + [b - a for a, b in zip(warm[2], last[2], strict=True)]
    assert max(growth) < GROWTH_ALLOWED_MB, f"RSS grew by {growth} MB after warm-up:\n{table}"
