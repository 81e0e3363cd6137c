"""Per-run overhead of the sandbox backends: a trivial Python program, many times.

Baseline (a): `subprocess.run(["/usr/bin/python3", "-c", "print(1)"], timeout=5)` per run, no
isolation, 8 threads. Ours: `backend.run()` of `python3 -I main.py` (main.py = `print(1)`) on the
local and the docker backend, 16 threads, pool of `--pool` sandboxes. Prints runs/s, p50/p99 latency
and the ratio to (a) for each, with the forked-Python fast path on and off. Every run must print 1.

    python benchmarks/sandbox_runs.py [--runs 1000] [--pool 2] [--backends local,docker]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from sandboxes import Execution, RunRequest, SandboxBackend, SandboxSettings, open_backend


def measure(n: int, threads: int, one: Callable[[], None]) -> tuple[float, float, float]:
    """runs/s, p50 and p99 latency in ms."""
    latencies: list[float] = []

    def timed(_: int) -> None:
        t = time.perf_counter()
        one()
        latencies.append(time.perf_counter() - t)

    start = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(timed, range(n)))
    elapsed = time.perf_counter() - start
    q = statistics.quantiles(latencies, n=100)
    return n / elapsed, q[49] * 1000, q[98] * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--pool", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--backends", default="local,docker")
    args = parser.parse_args()

    def baseline() -> None:
        p = subprocess.run(
            ["/usr/bin/python3", "-c", "print(1)"], capture_output=True, timeout=5, check=True
        )
        assert p.stdout == b"1\n"

    print(f"load average {os.getloadavg()[0]:.1f}, {os.cpu_count()} cores, {args.runs} runs")
    base, p50, p99 = measure(args.runs, 8, baseline)
    print(
        f"(a) subprocess.run python3 -c    {base:7.0f} runs/s  p50 {p50:6.1f} ms  p99 {p99:6.1f} ms"
    )
    request = RunRequest(
        files={"main.py": b"print(1)"}, executions=[Execution(("python3", "-I", "main.py"))]
    )
    for name in args.backends.split(","):
        for fork in (True, False):
            backend = open_backend(
                SandboxSettings(backend=name, pool_size=args.pool, fork_python=fork)
            )  # type: ignore[arg-type]
            try:

                def one(backend: SandboxBackend = backend) -> None:
                    res = backend.run(request).executions[0]
                    assert (res.status, res.stdout) == ("ok", b"1\n"), res

                for _ in range(20):
                    one()
                rate, p50, p99 = measure(args.runs, 16, one)
            finally:
                backend.close()
            label = f"{name} pool={args.pool} fork_python={fork}"
            print(
                f"    {label:29s} {rate:7.0f} runs/s  p50 {p50:6.1f} ms  p99 {p99:6.1f} ms"
                f"  {rate / base:5.2f}x (a)"
            )


if __name__ == "__main__":
    main()
