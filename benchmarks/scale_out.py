"""Queue mode against the embedded default, and one queue worker against two, in one run.

The same mixed batch (math, code, puzzles, IFEval in ProRL's proportions without STEM; 4,096
items; fresh items each round, so no verdict memo helps) is scored through
  (a) the embedded default, `proctor serve --workers 1`, pinned to one core (`taskset`);
  (b) queue mode: `proctor serve --queue` and `redis-server` on another core, one
      `proctor worker --workers 1` pinned to the first;
  (c) as (b) with a second worker pinned to a core of its own.
Targets: (b) at least 0.9x (a), so the queue costs under 10%; (c) at least 1.8x (b). Prints
items/s, the ratios, the queue's cost per item in microseconds, the CPU time Redis and the API
spent per item, and a paper estimate of the worker cores one 256 x 16 GRPO step needs (from
each domain's time per item on one core, measured on a batch of that domain alone in (a)).

Needs `redis-server` and `taskset` (util-linux) and at least two cores; with fewer than three,
the API and Redis share a core with (c)'s second worker (said in the output). Exits non-zero if
the three runs disagree on any verdict or an item is not `ok`. `--short` (or PROCTOR_SHORT=1):
512 items, one round.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
from _served import timed_score
from code_throughput import _item as code_item
from code_throughput import make_responses
from ifeval_throughput import make_items as ifeval_items
from math_throughput import make_cases as math_cases
from puzzle_throughput import make_cases as puzzle_cases

ROOT = Path(__file__).resolve().parents[1]
MIX = {"math": 40, "code": 24, "puzzle": 37, "ifeval": 10}
"""ProRL's training mix (thousands of prompts, section 3), STEM left out as the issue asks."""
PRORL_STEP = {"math": 40, "code": 24, "stem": 25, "puzzle": 37, "ifeval": 10}
TICK = os.sysconf("SC_CLK_TCK")


def mixed_batch(n: int, seed: int) -> list[dict[str, Any]]:
    total = sum(MIX.values())
    counts = {d: n * w // total for d, w in MIX.items()}
    counts["math"] += n - sum(counts.values())
    items = [
        {"domain": "math", "response": c.response, "reference": {"answer": c.gold}}
        for c in math_cases(counts["math"], seed=seed, distinct=True)
    ]
    items += [code_item(r) for r in make_responses(counts["code"], seed=seed, tag=f"s{seed}")]
    items += [
        {"domain": "puzzle", "response": c.response, "reference": c.reference("entry")}
        for c in puzzle_cases(counts["puzzle"], seed=seed)
    ]
    items += ifeval_items(counts["ifeval"], seed=seed)
    random.Random(seed).shuffle(items)
    return items


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _cpu_s(pid: int) -> float:
    """CPU seconds of a process and its children still alive (utime + stime)."""
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(entry) == pid or int(fields[1]) == pid:
            total += int(fields[11]) + int(fields[12])
    return total / TICK


@contextmanager
def _process(argv: list[str], core: int | None, env: dict[str, str]) -> Iterator[int]:
    pinned = ["taskset", "-c", str(core), *argv] if core is not None else argv
    process = subprocess.Popen(pinned, env=env, cwd=ROOT, stdout=subprocess.DEVNULL)
    try:
        yield process.pid
    finally:
        process.terminate()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_ready(url: str, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/readyz", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"{url} did not become ready within {timeout:.0f} s")


def _proctor(*args: str) -> list[str]:
    return [sys.executable, "-m", "service.cli", *args, "--log-level", "warning"]


@contextmanager
def deployment(mode: str, cores: Sequence[int]) -> Iterator[tuple[str, dict[str, int]]]:
    """The service for `mode` ("embedded", "queue-1", "queue-2"); its URL and the pids whose CPU
    time is reported."""
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    serve = ["serve", "--port", str(port)]
    with ExitStack() as stack:
        if mode == "embedded":
            api = stack.enter_context(_process(_proctor(*serve, "--workers", "1"), cores[0], env))
            _wait_ready(url)
            yield url, {"api": api}
            return
        side = cores[2] if len(cores) > 2 else cores[-1]
        data = stack.enter_context(tempfile.TemporaryDirectory(prefix="proctor-scale-"))
        redis_port = _free_port()
        redis_argv = ["redis-server", "--port", str(redis_port), "--save", "", "--dir", data]
        redis = stack.enter_context(_process(redis_argv, side, env))
        queue = f"redis://127.0.0.1:{redis_port}/0"
        api = stack.enter_context(_process(_proctor(*serve, "--queue", queue), side, env))
        for core in cores[: 1 if mode == "queue-1" else 2]:
            worker = _proctor("worker", "--queue", queue, "--workers", "1")
            stack.enter_context(_process(worker, core, env))
        _wait_ready(url)
        yield url, {"api": api, "redis": redis}


def measure(
    mode: str, cores: Sequence[int], n: int, rounds: int
) -> tuple[float, list[list[Any]], dict[str, float], dict[str, float]]:
    """Median seconds per batch, each round's verdicts, CPU seconds per item of the reported
    processes, and (embedded only) each domain's seconds per item on the one core, from a batch
    of that domain's items alone."""
    seconds, verdicts = [], []
    with deployment(mode, cores) as (url, pids):
        timed_score(url, json.dumps({"items": mixed_batch(256, seed=999)}))  # warm
        before = {name: _cpu_s(pid) for name, pid in pids.items()}
        for r in range(rounds):
            results, took = timed_score(url, json.dumps({"items": mixed_batch(n, seed=r + 1)}))
            seconds.append(took)
            verdicts.append([(x["status"], x["score"]) for x in results])
        cpu = {name: (_cpu_s(pid) - before[name]) / (n * rounds) for name, pid in pids.items()}
        costs = {}
        if mode == "embedded":
            fresh = mixed_batch(n, seed=rounds + 1)
            for domain in MIX:
                alone = [item for item in fresh if item["domain"] == domain]
                _, took = timed_score(url, json.dumps({"items": alone}))
                costs[domain] = took / len(alone)
    return statistics.median(seconds), verdicts, cpu, costs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--short", action="store_true", help="512 items, one round (CI)")
    parser.add_argument("--rounds", type=int, default=None)
    args = parser.parse_args()
    short = args.short or os.environ.get("PROCTOR_SHORT") == "1"
    n = 512 if short else 4096
    rounds = args.rounds or (1 if short else 3)
    cores = sorted(os.sched_getaffinity(0))
    missing = [tool for tool in ("redis-server", "taskset") if shutil.which(tool) is None]
    if missing or len(cores) < 2:
        print(
            f"needs redis-server and taskset and two cores; missing {missing}, {len(cores)} cores"
        )
        return 2
    if len(cores) < 3:
        print(f"{len(cores)} cores: the API and Redis share core {cores[-1]} with (c)'s 2nd worker")
    runs = {mode: measure(mode, cores, n, rounds) for mode in ("embedded", "queue-1", "queue-2")}
    (a, va, _, costs), (b, vb, cpu_b, _), (c, vc, _, _) = runs.values()
    parts = ", ".join(f"{d} {w}" for d, w in MIX.items())
    print(f"{n} mixed items ({parts} parts), median of {rounds} rounds")
    print(f"(a) embedded, one core:                {n / a:8.1f} items/s")
    print(f"(b) queue, one worker on one core:     {n / b:8.1f} items/s")
    print(f"(c) queue, two workers, one core each: {n / c:8.1f} items/s")
    print(f"(b)/(a) = {a / b:.2f} (target >= 0.9); (c)/(b) = {b / c:.2f} (target >= 1.8)")
    print(f"queue cost per item: {(b - a) / n * 1e6:+.0f} us of wall time")
    api_us, redis_us = cpu_b["api"] * 1e6, cpu_b["redis"] * 1e6
    print(f"CPU per item in (b): API {api_us:.0f} us, Redis {redis_us:.0f} us")
    estimate(costs, scaling=b / c / 2, redis_s=cpu_b["redis"])
    agree = va == vb == vc
    all_ok = all(s == "ok" for v in va for s, _ in v)
    print(f"verdicts identical across (a), (b), (c): {agree}; all ok: {all_ok}")
    return 0 if agree and all_ok else 1


def estimate(costs: dict[str, float], scaling: float, redis_s: float) -> None:
    """The paper estimate: worker cores for one ProRL-mixed 256 x 16 step in under 10 s, and the
    rate at which Redis's one core is the limit."""
    costs = {**costs, "stem": costs["math"]}  # not measured: STEM's sympy path is math's
    total = sum(PRORL_STEP.values())
    core_s = sum(256 * 16 * w / total * costs[d] for d, w in PRORL_STEP.items())
    per_item = ", ".join(f"{d} {1000 * t:.1f} ms" for d, t in sorted(costs.items()))
    print(f"one core's time per item, each domain alone in (a): {per_item} (STEM: math's)")
    ideal = math.ceil(core_s / 10)
    measured = math.ceil(core_s / 10 / max(scaling, 0.05))
    print(
        f"one 256 x 16 ProRL-mixed step: {core_s:.1f} core-seconds; under 10 s: {ideal} worker "
        f"cores at perfect scaling, {measured} at (c)'s ({scaling:.0%} of a second core)"
    )
    if redis_s > 0:
        limit = 1 / redis_s
        print(
            f"Redis's one core is the limit at ~{limit:,.0f} items/s ({limit * 10:,.0f} per 10 s)"
        )


if __name__ == "__main__":
    sys.exit(main())
