"""Queue mode's scale-out with 1, 2 and 4 `proctor worker`s on CPU quotas, and the embedded
default on the same quota, in one run.

Each worker (its pool process, sandbox supervisors and whatever they fork) runs in a CPU cgroup
of its own limited to `--quota` of a core (0.25 by default), so that four workers take one of
this machine's two cores and the API, Redis and the client keep the other: the workers' scaling
is measured, not the machine's. The same mixed batches (math, code, puzzles, IFEval in ProRL's
proportions without STEM; 2,048 items; fresh items each round, math answers all distinct, so no
verdict memo helps) are scored through
  (e) the embedded default, `proctor serve --workers 1`, its scoring processes in one group on
      the quota (the API process outside it);
  (1), (2), (4) `proctor serve --queue` and `redis-server`, with that many `proctor worker
      --workers 1`, each in its own group on the quota (fresh workers for each count).
Before the timed rounds, each run scores two batches of the rounds' size per worker untimed, off
the quota (a fresh worker's caches fill on first use, once per worker: `warm_up`).
Targets: (2)/(1) and (4)/(2) at least 1.8, (1)/(e) at least 0.9. For every run it prints where
the time went: the workers' CPU per item and how much of their quota they used (the rest is
time spent waiting for a chunk: a batch's start, its end, the hand-offs), and the CPU per item
of the API, Redis and the client; and from those the ceiling, as items/s per worker core and the
worker count at which the API or Redis would saturate a core.

Needs root, cgroup v1 (`cpu` and `cpuacct`) or v2 (`cpu`), and `redis-server`; the groups are
removed on exit. Exits non-zero if any run's verdicts differ from another's or an item is not
`ok`. `--short` (or PROCTOR_SHORT=1): 256 items, one round; without cgroups it runs unquoted and
says so (its verdicts are still compared).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import redis
from _cgroups import CpuGroup, CpuGroups, Unsupported, descendants
from _code_responses import make_responses
from _code_responses import request_item as code_item
from _served import timed_score
from ifeval_throughput import make_items as ifeval_items
from math_throughput import make_cases as math_cases
from puzzle_throughput import make_cases as puzzle_cases

ROOT = Path(__file__).resolve().parents[1]
MIX = {"math": 40, "code": 24, "puzzle": 37, "ifeval": 10}
"""ProRL's training mix (thousands of prompts, section 3), STEM left out as the issue asks."""
COUNTS = (1, 2, 4)
TARGET = 1.8
WARM_BATCHES = 2
"""Warm-up batches per worker, each of the timed rounds' size (see `warm_up`)."""
WARM_SEED = 1000


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


def _proctor(*args: str) -> list[str]:
    return [sys.executable, "-m", "service.cli", *args, "--log-level", "warning"]


ENV = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}


@contextmanager
def _process(argv: list[str], group: CpuGroup | None) -> Iterator[int]:
    """`argv` running (in `group` from its start), stopped on exit."""
    process = subprocess.Popen(
        argv,
        env=ENV,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        preexec_fn=group.join_self if group is not None else None,
    )
    try:
        yield process.pid
    finally:
        process.terminate()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait(ready: Callable[[], bool], what: str, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} within {timeout:.0f} s")
        time.sleep(0.5)


def _ready(url: str) -> bool:
    try:
        return httpx.get(url + "/readyz", timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


@contextmanager
def _sweeping(group: CpuGroup | None, root: int) -> Iterator[None]:
    """Keep moving every process below `root` (not `root` itself) into `group`: the embedded
    server starts its sandbox supervisors itself, during the run too (a recycled one)."""
    stop = threading.Event()

    def sweep() -> None:
        while not stop.wait(0.25):
            for pid in descendants([root]) - moved:
                try:
                    group.join(pid)  # type: ignore[union-attr]
                    moved.add(pid)
                except (ProcessLookupError, OSError):
                    pass  # exited meanwhile

    moved: set[int] = set()
    thread = threading.Thread(target=sweep, daemon=True)
    if group is not None:
        thread.start()
    try:
        yield
    finally:
        stop.set()
        if group is not None:
            thread.join()


@dataclass
class Groups:
    """The run's groups (all `None` without cgroups): the service's and one per worker."""

    api: CpuGroup | None = None
    redis: CpuGroup | None = None
    workers: list[CpuGroup | None] = field(default_factory=lambda: [None] * max(COUNTS))
    quota: float | None = None

    def cpu(self, workers: int) -> dict[str, float]:
        out = {"api": _cpu(self.api), "redis": _cpu(self.redis), "client": time.process_time()}
        out["workers"] = sum(_cpu(g) for g in self.workers[:workers])
        periods = [g.throttled() if g else (0, 0) for g in self.workers[:workers]]
        out["periods"], out["throttled"] = (sum(p[i] for p in periods) for i in (0, 1))
        return out

    def limit(self, workers: int, on: bool) -> None:
        for group in self.workers[:workers]:
            if group is not None:
                group.set_quota(self.quota if on else None)


def _cpu(group: CpuGroup | None) -> float:
    return group.cpu_s() if group is not None else 0.0


@dataclass
class Run:
    label: str
    n: int
    workers: int
    seconds: list[float]
    verdicts: list[list[tuple[str, Any]]]
    per_item: dict[str, float]
    """CPU seconds per item: workers, api, redis, client."""
    busy: float
    """Share of the workers' quota they used while the batches ran."""
    throttled: float
    """Share of the workers' scheduling periods in which the quota held them back."""
    by_round: list[float]
    """The workers' CPU seconds per item in each round."""

    @property
    def rate(self) -> float:
        return self.n / statistics.median(self.seconds)


def score_rounds(url: str, label: str, groups: Groups, workers: int, n: int, rounds: int) -> Run:
    """Time `rounds` batches (seeds 1..rounds, the same in every run)."""
    bodies = [json.dumps({"items": mixed_batch(n, seed=r + 1)}) for r in range(rounds)]
    seconds, verdicts, by_round = [], [], []
    before = last = groups.cpu(workers)
    for body in bodies:
        results, took = timed_score(url, body)
        seconds.append(took)
        verdicts.append([(x["status"], x["score"]) for x in results])
        now = groups.cpu(workers)
        by_round.append((now["workers"] - last["workers"]) / n)
        last = now
    after = last
    spent = {k: after[k] - before[k] for k in after}
    per_item = {k: spent[k] / (n * rounds) for k in ("workers", "api", "redis", "client")}
    quota_s = (groups.quota or 1.0) * workers * sum(seconds)
    busy = spent["workers"] / quota_s
    throttled = spent["throttled"] / max(1.0, spent["periods"])
    return Run(label, n, workers, seconds, verdicts, per_item, busy, throttled, by_round)


def warm_bodies(n: int, batches: int) -> list[str]:
    """`batches` mixed batches of `n` items (seeds after `WARM_SEED`), built once for all runs."""
    return [json.dumps({"items": mixed_batch(n, seed=WARM_SEED + k)}) for k in range(batches)]


def warm_up(url: str, groups: Groups, workers: int, bodies: Sequence[str]) -> None:
    """`WARM_BATCHES` batches per worker of the timed rounds' size, untimed, before the quota
    applies. A fresh worker fills its caches on first use, once: the sandboxes' first runs, and
    one per Reasoning Gym task (its module and scoring data), which must not be counted against
    the runs with more workers. A batch of the rounds' size names the rounds' tasks whatever its
    seed (`puzzle_cases` goes through the tasks in order), with other entries and answers; and
    since chunks go to whichever worker is free, each worker has seen every task only after
    several such batches, hence a number of them that grows with the workers."""
    groups.limit(workers, on=False)
    for body in bodies[: WARM_BATCHES * workers]:
        timed_score(url, body)
    groups.limit(workers, on=True)


def embedded(groups: Groups, n: int, rounds: int, warm: Sequence[str]) -> Run:
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    argv = _proctor("serve", "--port", str(port), "--workers", "1")
    with _process(argv, groups.api) as api:
        _wait(lambda: _ready(url), "the embedded server was not ready")
        with _sweeping(groups.workers[0], api):
            time.sleep(1.0)  # the first sweep
            warm_up(url, groups, 1, warm)
            return score_rounds(url, "(e) embedded", groups, 1, n, rounds)


def _alive(client: redis.Redis) -> int:
    from service.queue import keys

    names = [m.decode() for m in client.smembers(keys.WORKERS_KEY)]
    return sum(bool(client.exists(keys.alive_key(name))) for name in names)


def queued(groups: Groups, n: int, rounds: int, warm: Sequence[str]) -> list[Run]:
    """One Redis and one API for every worker count; fresh workers for each."""
    runs = []
    with ExitStack() as stack:
        data = stack.enter_context(tempfile.TemporaryDirectory(prefix="proctor-scale-"))
        redis_port, port = _free_port(), _free_port()
        redis_argv = ["redis-server", "--port", str(redis_port), "--save", "", "--dir", data]
        stack.enter_context(_process(redis_argv, groups.redis))
        queue = f"redis://127.0.0.1:{redis_port}/0"
        client = redis.Redis.from_url(queue)
        url = f"http://127.0.0.1:{port}"
        serve = _proctor("serve", "--port", str(port), "--queue", queue)
        stack.enter_context(_process(serve, groups.api))
        for count in COUNTS:
            with ExitStack() as fleet:
                groups.limit(count, on=False)  # start at full speed
                for group in groups.workers[:count]:
                    worker = _proctor("worker", "--queue", queue, "--workers", "1")
                    fleet.enter_context(_process(worker, group))
                _wait(lambda: _alive(client) == count, f"{count} workers were not alive")  # noqa: B023
                _wait(lambda: _ready(url), "the queue API was not ready")
                warm_up(url, groups, count, warm)
                runs.append(score_rounds(url, f"({count}) queue", groups, count, n, rounds))
            _wait(lambda: _alive(client) == 0, "stopped workers still listed", timeout=60)
    return runs


def report(runs: Sequence[Run], quota: float | None, rounds: int) -> list[str]:
    """Print the table and the ceiling; the targets missed."""
    share = f"{quota:g} core each" if quota else "no quota (no cgroups)"
    print(f"{runs[0].n} mixed items ({', '.join(f'{d} {w}' for d, w in MIX.items())} parts), ")
    print(f"median of {rounds} rounds; workers' groups: {share}")
    print(
        f"{'run':<13} {'items/s':>8} {'ratio':>6} {'worker CPU/item':>15} {'quota used':>10} "
        f"{'throttled':>9} {'API':>7} {'Redis':>7} {'client':>7}  (CPU per item)"
    )
    queue = {r.workers: r for r in runs if r.label.endswith("queue")}
    for run in runs:
        before = queue.get(run.workers // 2) if run.label.endswith("queue") else None
        ratio = f"{run.rate / before.rate:.2f}" if before and before is not run else "-"
        us = {k: f"{v * 1e6:.0f} us" for k, v in run.per_item.items()}
        print(
            f"{run.label:<13} {run.rate:8.1f} {ratio:>6} {run.per_item['workers'] * 1e3:12.2f} ms "
            f"{run.busy:10.0%} {run.throttled:9.0%} {us['api']:>7} {us['redis']:>7} "
            f"{us['client']:>7}  rounds: {', '.join(f'{c * 1e3:.2f}' for c in run.by_round)} ms"
        )
    missed = []
    for low, high in itertools.pairwise(COUNTS):
        ratio = queue[high].rate / queue[low].rate
        print(f"{low} -> {high} workers: {ratio:.2f}x (target >= {TARGET})")
        if ratio < TARGET:
            missed.append(f"{low} -> {high} workers: {ratio:.2f}x")
    e = next((r for r in runs if r.label.startswith("(e)")), None)
    if e is not None:
        print(f"(1) queue / (e) embedded: {queue[1].rate / e.rate:.2f} (target >= 0.9)")
    ceiling(queue[1], queue[max(COUNTS)], quota)
    return missed


def ceiling(one: Run, most: Run, quota: float | None) -> None:
    """items/s <= min(W * q * r, 1 / c_api, 1 / c_redis): W workers of q cores each scoring r
    items per second of CPU, the API's and Redis's single core at c CPU-seconds per item."""
    r = 1 / one.per_item["workers"]
    q = quota or 1.0
    print(f"items/s per worker core (1 worker): r = {r:.0f}; per worker on its quota: {r * q:.0f}")
    for name in ("api", "redis"):
        c = most.per_item[name]
        if c > 0:
            print(
                f"{name}: {c * 1e6:.0f} us of CPU per item with {most.workers} workers -> one "
                f"core saturates at {1 / c:,.0f} items/s, i.e. at {1 / (c * r * q):.0f} workers "
                f"of {q:g} core ({1 / (c * r):.1f} worker cores)"
            )
    idle = 1 - most.busy
    print(
        f"with {most.workers} workers: {most.busy:.0%} of the quota used; the other {idle:.0%} "
        f"({idle * q * most.workers * statistics.median(most.seconds):.1f} worker-core-s of "
        "each batch) waited for chunks"
    )


def _open_groups(stack: ExitStack, quota: float, short: bool) -> Groups:
    try:
        cgroups = stack.enter_context(CpuGroups.open())
    except Unsupported as e:
        if not short:
            raise
        print(f"no CPU cgroups ({e}): running without quotas")
        return Groups()
    print(f"cgroup v{cgroups.version}")
    return Groups(
        api=cgroups.make("api"),
        redis=cgroups.make("redis"),
        workers=[cgroups.make(f"w{i}", quota) for i in range(max(COUNTS))],
        quota=quota,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--short", action="store_true", help="256 items, one round (CI)")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--items", type=int, default=None)
    parser.add_argument("--quota", type=float, default=0.25, help="cores per worker")
    parser.add_argument("--no-embedded", action="store_true", help="queue runs only")
    args = parser.parse_args()
    short = args.short or os.environ.get("PROCTOR_SHORT") == "1"
    n = args.items or (256 if short else 2048)
    rounds = args.rounds or (1 if short else 3)
    if shutil.which("redis-server") is None:
        print("needs redis-server")
        return 2
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so the groups are removed
    print(f"load average at start: {os.getloadavg()}")
    with ExitStack() as stack:
        try:
            groups = _open_groups(stack, args.quota, short)
        except Unsupported as e:
            print(f"needs CPU cgroups: {e}")
            return 2
        warm = warm_bodies(n, WARM_BATCHES * max(COUNTS))
        runs = [] if args.no_embedded else [embedded(groups, n, rounds, warm)]
        runs += queued(groups, n, rounds, warm)
    print(f"load average at end: {os.getloadavg()}")
    missed = report(runs, groups.quota, rounds)
    if missed:
        print("target missed: " + "; ".join(missed) + " (where the time went: above)")
    agree = all(run.verdicts == runs[0].verdicts for run in runs)
    all_ok = all(s == "ok" for v in runs[0].verdicts for s, _ in v)
    print(f"verdicts identical across all runs: {agree}; all ok: {all_ok}")
    return 0 if agree and all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
