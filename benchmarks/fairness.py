"""Two clients with their own API keys on one `proctor serve` (the embedded default), in one run:
a large batch does not starve a small client, and the small client costs the large one little.

Client A sends one 16,384-item mixed batch (scale_out's mix: math, code, puzzles and IFEval in
ProRL's proportions; fresh items each batch, math answers all distinct); client B sends one small
request a second (one math and one code item, both right, fresh each time), on its own schedule
whether or not the previous one has been answered. Phases, on one server:
  (b)  B alone for `--b-seconds`;
  (a)  A alone;
  (ab) A with B sending throughout;
and then (ab) and (a) again (ABBA, so a drift of the machine's load falls on both sides).
Reports B's p50 and p99 latency alone and beside A, and A's items/s alone and beside B. Targets on
this 2-core machine: B's p99 beside A under 2 s; A's throughput beside B within 10% of alone.

`--b-split`: B's requests alternate between the math item alone and the code item alone, and
the latencies are reported by kind as well (where a slow answer waited).

Exits non-zero if any of B's answers is not `ok` with score 1, or any of A's items is not `ok`.
`--short` (or PROCTOR_SHORT=1): 1,024 items, one (a) and one (ab), B alone for 5 s.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import httpx
from _served import proctor_server, timed_score
from scale_out import mixed_batch

KEY_A = "bench-client-a-0123456789"
KEY_B = "bench-client-b-0123456789"
B_TIMEOUT_S = 120


def b_request(k: int, split: bool) -> list[dict[str, Any]]:
    """B's `k`-th request: a math item and a code item, both right, distinct from every other;
    with `split`, the math item alone for an even `k` and the code item alone for an odd one."""
    code = f"```python\n# request {k}\nn = int(input())\nprint(n * 2)\n```"
    tests = {"stdio": [{"input": f"{k}\n", "output": f"{2 * k}\n"}]}
    both = [
        {
            "domain": "math",
            "response": f"So $\\boxed{{{k + 7}}}$.",
            "reference": {"answer": str(k + 7)},
        },
        {"domain": "code", "response": code, "reference": {"language": "python", "tests": tests}},
    ]
    return both[k % 2 : k % 2 + 1] if split else both


@dataclass
class ClientB:
    """Sends a request a second from a thread of its own until stopped; records each latency."""

    url: str
    split: bool = False
    latencies: list[tuple[str, float]] = field(default_factory=list)
    """(the domains the request held, seconds to its answer)."""
    wrong: list[str] = field(default_factory=list)
    sent: int = 0
    """Requests sent so far, counted from the first one's number (each number is fresh items)."""

    def run_until(self, stop: threading.Event) -> None:
        client = httpx.Client(headers=_auth(KEY_B), timeout=B_TIMEOUT_S)
        with client, ThreadPoolExecutor(16) as pool:
            pending: list[Future[None]] = []
            start, first = time.monotonic(), self.sent
            while not stop.is_set():
                pending.append(pool.submit(self._one, client, self.sent))
                self.sent += 1
                stop.wait(max(0.0, start + (self.sent - first) - time.monotonic()))
            for future in pending:
                future.result()

    def _one(self, client: httpx.Client, k: int) -> None:
        started = time.perf_counter()
        items = b_request(k, self.split)
        reply = client.post(self.url + "/v1/score", json={"items": items})
        kind = "+".join(i["domain"] for i in items)
        self.latencies.append((kind, time.perf_counter() - started))
        if reply.status_code != 200:
            self.wrong.append(f"request {k}: {reply.status_code} {reply.text[:200]}")
            return
        got = [(r["status"], r["score"]) for r in reply.json()["results"]]
        if got != [("ok", 1.0)] * len(items):
            self.wrong.append(f"request {k}: {got}")


def _auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile (with few samples, p99 is the slowest)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def b_alone(url: str, seconds: float, seed: int, split: bool) -> ClientB:
    b = ClientB(url, split=split, sent=seed * 100_000)  # B's items never repeat across phases
    stop = threading.Event()
    timer = threading.Timer(seconds, stop.set)
    timer.start()
    b.run_until(stop)
    return b


def a_batch(
    url: str, body: str, with_b: int | None, split: bool
) -> tuple[list[Any], float, ClientB | None]:
    """A's batch, alone or with B sending (its requests numbered from `with_b`)."""
    headers = _auth(KEY_A)
    if with_b is None:
        results, took = timed_score(url, body, headers)
        return results, took, None
    b = ClientB(url, split=split, sent=with_b)
    stop = threading.Event()
    thread = threading.Thread(target=b.run_until, args=(stop,))
    thread.start()
    try:
        results, took = timed_score(url, body, headers)
    finally:
        stop.set()
        thread.join()
    return results, took, b


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--short", action="store_true", help="1,024 items, one pair (CI)")
    parser.add_argument("--items", type=int, default=None)
    parser.add_argument("--b-seconds", type=float, default=None)
    parser.add_argument(
        "--b-split", action="store_true", help="B sends math and code in alternate requests"
    )
    args = parser.parse_args()
    short = args.short or os.environ.get("PROCTOR_SHORT") == "1"
    n = args.items or (1024 if short else 16_384)
    b_seconds = args.b_seconds or (5.0 if short else 20.0)
    order = [None, 1] if short else [None, 1, 2, None]  # (a), (ab), (ab), (a)
    bodies = [json.dumps({"items": mixed_batch(n, seed=s + 1)}) for s in range(len(order))]
    print(f"load average at start: {os.getloadavg()}")
    env = {"PROCTOR_API_KEYS": f"{KEY_A},{KEY_B}"}
    alone_a: list[float] = []
    beside_a: list[float] = []
    b_beside: list[tuple[str, float]] = []
    failures: list[str] = []
    with proctor_server(env) as url:
        timed_score(url, json.dumps({"items": mixed_batch(256, seed=999)}), _auth(KEY_A))
        b = b_alone(url, b_seconds, seed=9, split=args.b_split)
        failures += b.wrong
        for body, with_b in zip(bodies, order, strict=True):
            first_b = None if with_b is None else with_b * 100_000
            results, took, beside = a_batch(url, body, first_b, args.b_split)
            not_ok = sum(r["status"] != "ok" for r in results)
            if not_ok:
                failures.append(f"A: {not_ok} items not ok")
            (alone_a if beside is None else beside_a).append(n / took)
            if beside is not None:
                b_beside += beside.latencies
                failures += beside.wrong
            label = "(a) A alone " if beside is None else "(ab) A with B"
            print(f"{label}: {n / took:8.1f} items/s ({took:.1f} s)")
    print(f"load average at end: {os.getloadavg()}")
    report(b.latencies, b_beside, alone_a, beside_a)
    for line in failures[:10]:
        print("wrong:", line)
    return 1 if failures else 0


def report(
    b_alone: list[tuple[str, float]],
    b_beside: list[tuple[str, float]],
    a_alone: list[float],
    a_beside: list[float],
) -> None:
    for label, timed in (("alone", b_alone), ("beside A", b_beside)):
        kinds = sorted({kind for kind, _ in timed})
        for kind in ["all", *kinds] if len(kinds) > 1 else kinds:
            values = [t for k, t in timed if kind in ("all", k)]
            p50, p99 = percentile(values, 50), percentile(values, 99)
            print(
                f"B {label:<8} {kind:<12}: p50 {p50 * 1000:7.0f} ms, p99 {p99 * 1000:7.0f} ms, "
                f"max {max(values) * 1000:7.0f} ms over {len(values)} requests"
            )
    p99 = percentile([t for _, t in b_beside], 99)
    print(f"B's p99 beside A: {p99:.2f} s (target under 2 s): {'met' if p99 < 2 else 'missed'}")
    ratio = statistics.mean(a_beside) / statistics.mean(a_alone)
    print(
        f"A: {statistics.mean(a_alone):.1f} items/s alone, {statistics.mean(a_beside):.1f} beside "
        f"B: {ratio:.2f}x (target >= 0.90): {'met' if ratio >= 0.9 else 'missed'}"
    )


if __name__ == "__main__":
    sys.exit(main())
