"""verl's own SandboxFusion scoring through Proctor's compat route, against the same responses
through `/v1/score` in one batch, on one server in the same run.

(a) verl 0.9.1's `verl.utils.reward_score.sandbox_fusion.compute_score`, in verl's venv
    (PROCTOR_VERL_PYTHON), one call per response from `--threads` threads sharing one semaphore of
    64 (verl's `sandbox_fusion.max_concurrent` default), posting one `run_code` request per test
    case to `/compat/sandbox-fusion/run_code`, as verl's reward loop does. Timed inside that
    process, from the first call to the last answer.
(b) The same responses as code items (stdio tests) in one `POST /v1/score`.
(c) The compat route's per-request overhead: one trivial program, `--overhead-runs` times in
    sequence, through `run_code` and through `/v1/run`; p50 of each and their difference.

With `--queue`, the server is in queue mode with one `proctor worker` (and `redis-server`): runs
and scoring both go to the worker (docs/api.md, `POST /v1/run`), so (c) is the cost of a run's
trip through Redis to a worker's run pool.

Prints both throughputs (responses/s) and the ratio (b)/(a). Exits non-zero when a response's
score differs between (a) and (b) (the programs print exactly the expected text, so
SandboxFusion's comparison and the spec's agree), or when any case of (a) was not judged.

    python benchmarks/compat_throughput.py [--responses 256] [--cases 10] [--threads 8]
    python benchmarks/compat_throughput.py --short   # or PROCTOR_SHORT=1: 16 responses x 3 cases
    python benchmarks/compat_throughput.py --queue   # queue mode, one worker
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks._served import proctor_server, queue_backend, timed_score

VERL_PYTHON = Path(os.environ.get("PROCTOR_VERL_PYTHON", "/opt/proctor-verl/bin/python"))

VERL_DRIVER = r"""
import json, sys, threading, time
from concurrent.futures import ThreadPoolExecutor
from verl.utils.reward_score.sandbox_fusion import compute_score
url, threads = sys.argv[1], int(sys.argv[2])
samples = json.loads(sys.stdin.read())
semaphore = threading.Semaphore(64)
def one(sample):
    score, metadata = compute_score(url, semaphore, 1024, sample["completion"], sample["tests"])
    return score, [m.get("status") for m in metadata]
started = time.perf_counter()
with ThreadPoolExecutor(threads) as pool:
    outcomes = list(pool.map(one, samples))
elapsed = time.perf_counter() - started
print(json.dumps({"elapsed": elapsed, "outcomes": outcomes}))
"""


def programs(n: int, tag: str = "response") -> list[str]:
    """`n` distinct responses (no verdict cache hit between them): most double their input,
    every fourth adds one to it (wrong on every case), every seventh does a little work first
    (still right)."""
    out = []
    for i in range(n):
        if i % 4 == 3:
            body = "n = int(input())\nprint(n * 2 + 1)"
        elif i % 7 == 6:
            body = "n = int(input())\ns = sum(range(20000))\nprint(n * 2 if s else 0)"
        else:
            body = "n = int(input())\nprint(n * 2)"
        out.append(f"Here is my program:\n```python\n# {tag} {i}\n{body}\n```")
    return out


def stdio(cases: int) -> dict[str, list[str]]:
    inputs = [f"{k * 7 + 1}\n" for k in range(cases)]
    return {"inputs": inputs, "outputs": [f"{(k * 7 + 1) * 2}\n" for k in range(cases)]}


def run_verl(url: str, completions: list[str], tests: dict[str, Any], threads: int) -> Any:
    samples = [{"completion": c, "tests": tests} for c in completions]
    done = subprocess.run(
        [str(VERL_PYTHON), "-c", VERL_DRIVER, f"{url}/compat/sandbox-fusion/run_code",
         str(threads)],
        input=json.dumps(samples),
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"verl's scoring failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_score(url: str, completions: list[str], tests: dict[str, Any]) -> tuple[list[Any], float]:
    stdio_tests = [
        {"input": i, "output": o} for i, o in zip(tests["inputs"], tests["outputs"], strict=True)
    ]
    reference = {"language": "python", "tests": {"stdio": stdio_tests}}
    items = [{"domain": "code", "response": c, "reference": reference} for c in completions]
    return timed_score(url, json.dumps({"items": items}))


def overhead(url: str, runs: int) -> tuple[float, float]:
    """p50 ms of `run_code` and of `/v1/run` for one trivial program, in sequence."""
    compat: list[float] = []
    direct: list[float] = []
    with httpx.Client(base_url=url, timeout=60) as client:
        for _ in range(runs):
            started = time.perf_counter()
            answer = client.post(
                "/compat/sandbox-fusion/run_code", json={"code": "print(1)", "language": "python"}
            ).json()
            compat.append(time.perf_counter() - started)
            if answer["run_result"]["stdout"] != "1\n":
                raise SystemExit(f"run_code answered {answer}")
            started = time.perf_counter()
            ran = client.post("/v1/run", json={"language": "python", "source": "print(1)"}).json()
            direct.append(time.perf_counter() - started)
            if ran["stdout"] != "1\n":
                raise SystemExit(f"/v1/run answered {ran}")
    return statistics.median(compat) * 1000, statistics.median(direct) * 1000


@contextmanager
def served(env: dict[str, str], queue: bool) -> Iterator[str]:
    """The server's URL: embedded, or in queue mode with one worker."""
    if not queue:
        with proctor_server(env) as url:
            yield url
        return
    with (
        queue_backend(1, env) as redis_url,
        proctor_server({**env, "PROCTOR_QUEUE_URL": redis_url}) as url,
    ):
        yield url


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--responses", type=int, default=256)
    parser.add_argument("--cases", type=int, default=10)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--overhead-runs", type=int, default=200)
    parser.add_argument("--backend", default="local", choices=["local", "docker"])
    parser.add_argument("--queue", action="store_true", help="queue mode, one worker")
    parser.add_argument("--short", action="store_true")
    args = parser.parse_args()
    if args.short or os.environ.get("PROCTOR_SHORT") == "1":
        args.responses, args.cases, args.overhead_runs = 16, 3, 20
    if not VERL_PYTHON.exists():
        raise SystemExit(f"no verl environment at {VERL_PYTHON} (tests/run builds it)")
    completions = programs(args.responses)
    tests = stdio(args.cases)
    env = {"PROCTOR_SANDBOX__BACKEND": args.backend}
    print(
        f"load average {os.getloadavg()[0]:.1f}, {os.cpu_count()} cores, "
        f"{args.responses} responses x {args.cases} cases, backend {args.backend}, "
        f"{'queue mode, one worker' if args.queue else 'embedded'}"
    )
    with served(env, args.queue) as url:
        warm = programs(4, "warm-up")  # both pools warm before either is timed
        run_score(url, warm, tests)
        run_verl(url, warm, tests, args.threads)
        verl = run_verl(url, completions, tests, args.threads)
        results, score_s = run_score(url, completions, tests)
        compat_ms, direct_ms = overhead(url, args.overhead_runs)
    verl_s = verl["elapsed"]
    n = args.responses
    print(f"(a) verl sandbox_fusion via compat run_code  {n / verl_s:8.1f} responses/s "
          f"({verl_s:.2f} s, {n * args.cases} requests)")  # fmt: skip
    print(f"(b) /v1/score, one batch                      {n / score_s:8.1f} responses/s "
          f"({score_s:.2f} s)")  # fmt: skip
    print(f"ratio (b)/(a)                                 {verl_s / score_s:8.2f}x")
    print(f"(c) per request, p50: run_code {compat_ms:.1f} ms, /v1/run {direct_ms:.1f} ms, "
          f"overhead {compat_ms - direct_ms:+.1f} ms")  # fmt: skip
    differ = []
    for i, ((score, statuses), result) in enumerate(zip(verl["outcomes"], results, strict=True)):
        judged = all(s in ("success", "wrong_answer") for s in statuses)
        if not judged or result["status"] != "ok" or abs(score - result["score"]) > 1e-9:
            differ.append((i, score, statuses, result.get("score"), result["status"]))
    if differ:
        print(f"{len(differ)} responses differ or were not judged, e.g. {differ[:3]}")
        raise SystemExit(1)
    print(f"verdicts agree on all {n} responses")


if __name__ == "__main__":
    main()
