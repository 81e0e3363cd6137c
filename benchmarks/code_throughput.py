"""Code scoring throughput: Proctor's /v1/score against running each response in its own process.

Builds 500 Python responses to 8 small problems, each with 10 assert tests (60% correct, 25%
partly wrong, 10% raising on some inputs, 5% syntax errors; every response unique, so no cache
hit flatters us), and scores them, in one run, with:

  (a) one `subprocess.run(["/usr/bin/python3", "-c", program], timeout=5)` per response, no
      isolation at all, as many trainers do (the program runs each assert in try/except and
      prints how many passed); as many at a time as there are cores;
  (b) one `docker run --rm --network none` of the sandbox image per response, same program,
      as many at a time as there are cores;
  (f) a bare warm fork server per core (a Python process that forks a child per response, which
      sets rlimits and runs the same program compiled in the fork): no jail, no seccomp, no
      separate uid, no harness; what the sandbox's own forked-Python step is measured against;
  (c) `POST /v1/score` against `proctor serve` on the docker backend, then on the local backend:
      all items in one request (throughput), then single-item requests from 4 client threads
      (latency), all on one kept `httpx.Client` (see `post`).

Separately, 20 infinite loops (single-item requests, one at a time) on the docker backend must
each come back as a zero with reason `budget_exceeded`, within the budget plus one second.

Prints responses/s, p50/p99 latency and the ratios, and checks every verdict against the expected
score of each response. `--short` (or PROCTOR_SHORT=1): 120 responses, 40 for (b), 4 loops.

Exits non-zero when a verdict is wrong, and in a full run also when a loop came back late. In
`--short` mode (the test suite's) lateness is printed but not judged: on a shared machine other
jobs' load stretches a loop's wall time towards the wall-clock cap, and tests check no timings.
"""

from __future__ import annotations

import argparse
import os
import statistics
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
from _code_responses import Response, make_responses, request_item
from _served import proctor_server

IMAGE = os.environ.get("PROCTOR_SANDBOX_IMAGE", "proctor-sandbox:2")
CORES = max(1, len(os.sched_getaffinity(0)))
LABEL = "proctor-bench"
"""The docker label of this benchmark's sandboxes (others' containers, such as test suites
running beside it, are not counted in its CPU)."""


# ----------------------------------------------------------------------------- (a) and (b)

RUNNER = """
passed = 0
for _t in TESTS:
    try:
        exec(_t, globals())
        passed += 1
    except BaseException:
        pass
print("PASSED", passed)
"""


def program(r: Response) -> str:
    return r.code + "\nTESTS = " + repr(list(r.asserts)) + "\n" + RUNNER


def _score_stdout(stdout: str, total: int) -> float:
    for line in reversed(stdout.splitlines()):
        if line.startswith("PASSED "):
            return int(line.split()[1]) / total
    return 0.0


def run_subprocess(r: Response) -> float:
    try:
        done = subprocess.run(
            ["/usr/bin/python3", "-c", program(r)], capture_output=True, text=True, timeout=5
        )
    except subprocess.TimeoutExpired:
        return 0.0
    return _score_stdout(done.stdout, len(r.asserts))


def run_docker(r: Response) -> float:
    cmd = ["docker", "run", "--rm", "-i", "--network", "none", IMAGE, "python3", "-"]
    try:
        done = subprocess.run(cmd, input=program(r), capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return 0.0
    return _score_stdout(done.stdout, len(r.asserts))


FORK_SERVER = r"""
import marshal, os, resource, struct, sys
inp, out = sys.stdin.buffer, sys.stdout.buffer
while True:
    head = inp.read(4)
    if len(head) < 4:
        break
    program = inp.read(struct.unpack(">I", head)[0]).decode()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.dup2(w, 1)
        resource.setrlimit(resource.RLIMIT_CPU, (6, 7))
        resource.setrlimit(resource.RLIMIT_AS, (512 << 20, 512 << 20))
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
        try:
            exec(compile(program, "<program>", "exec"), {"__name__": "__main__"})
            sys.stdout.flush()
        finally:
            os._exit(0)
    os.close(w)
    chunks = []
    while data := os.read(r, 65536):
        chunks.append(data)
    os.close(r)
    os.waitpid(pid, 0)
    reply = b"".join(chunks)
    out.write(struct.pack(">I", len(reply)) + reply)
    out.flush()
"""


class ForkServers:
    """One warm fork server per core, each lent to one thread at a time."""

    def __init__(self, count: int) -> None:
        import queue

        self._free: queue.Queue[subprocess.Popen[bytes]] = queue.Queue()
        self._all = []
        for _ in range(count):
            proc = subprocess.Popen(
                ["/usr/bin/python3", "-c", FORK_SERVER],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
            )
            self._all.append(proc)
            self._free.put(proc)

    def run(self, r: Response) -> float:
        proc = self._free.get()
        try:
            assert proc.stdin is not None and proc.stdout is not None
            data = program(r).encode()
            proc.stdin.write(struct.pack(">I", len(data)) + data)
            proc.stdin.flush()
            (n,) = struct.unpack(">I", proc.stdout.read(4))
            stdout = proc.stdout.read(n).decode()
        finally:
            self._free.put(proc)
        return _score_stdout(stdout, len(r.asserts))

    def close(self) -> None:
        for proc in self._all:
            assert proc.stdin is not None
            proc.stdin.close()
            proc.wait()


def timed_pool(
    fn: Callable[[Response], float], items: Sequence[Response], workers: int
) -> tuple[list[float], list[float], float]:
    def one(r: Response) -> tuple[float, float]:
        t = time.perf_counter()
        score = fn(r)
        return score, time.perf_counter() - t

    started = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        results = list(pool.map(one, items))
    elapsed = time.perf_counter() - started
    return [s for s, _ in results], [t for _, t in results], elapsed


# ----------------------------------------------------------------------------- (c)


class Server:
    """`proctor serve` on one sandbox backend, kept up across several measurements."""

    def __init__(self, backend: str) -> None:
        env = {
            "PROCTOR_SANDBOX__BACKEND": backend,
            "PROCTOR_SANDBOX__IMAGE": IMAGE,
            "PROCTOR_SANDBOX__DOCKER_LABEL": LABEL,
        }
        self._served = proctor_server(env)
        self.url = self._served.__enter__()

    def stop(self) -> None:
        self._served.__exit__(None, None, None)


_HTTP: list[httpx.Client] = []


def post(url: str, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One POST of `items`, on one client kept for the whole run, as a trainer keeps its own:
    `httpx.post` makes a client per call, whose TLS context alone costs the caller as much CPU
    as (c) spends scoring many items, and (c)'s CPU counts this process's."""
    if not _HTTP:
        _HTTP.append(httpx.Client(timeout=1800))
    reply = _HTTP[0].post(url + "/v1/score", json={"items": items})
    reply.raise_for_status()
    results: list[dict[str, Any]] = reply.json()["results"]
    return results


_HZ = os.sysconf("SC_CLK_TCK")


def _tree_cpu(pid: int) -> float:
    """CPU seconds of `pid` and its descendants (with what each has reaped) so far."""
    total = 0.0
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += sum(int(v) for v in fields[11:15]) / _HZ
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                total += sum(_tree_cpu(int(c)) for c in f.read().split())
    except OSError:  # exited meanwhile: its parent counts it now
        pass
    return total


def _containers_cpu() -> float:
    """CPU seconds of this benchmark's running sandbox containers (cgroup v1 cpuacct), which are
    not our descendants; 0 without docker."""
    root = "/sys/fs/cgroup/cpuacct/docker"
    try:
        ids = subprocess.run(
            ["docker", "ps", "-q", "--no-trunc", "--filter", f"label=io.proctor.sandbox={LABEL}"],
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout.split()
    except (OSError, subprocess.TimeoutExpired):
        return 0.0
    total = 0
    for cid in ids:
        try:
            with open(f"{root}/{cid}/cpuacct.usage") as f:
                total += int(f.read())
        except OSError:
            continue
    return total / 1e9


def cpu_now() -> float:
    """CPU seconds of everything this benchmark started (fork servers, `proctor serve`, its
    sandboxes), itself included: what a side of a paired round costs the machine's cores."""
    return _tree_cpu(os.getpid()) + _containers_cpu()


def paired_rounds(
    url: str, fork: ForkServers, rounds: list[list[Response]]
) -> tuple[list[float], list[float], int]:
    """Each round: the fork server on a fresh batch, then one POST of another fresh batch of the
    same size (so no cache hit). Returns each round's wall ratio (POST rate / fork-server rate),
    its CPU ratio (the fork server's CPU per response / the POST's, all processes), and the
    number of wrong verdicts on either side."""
    ratios, cpu_ratios, bad = [], [], 0
    for k in range(0, len(rounds), 2):
        forked, posted = rounds[k], rounds[k + 1]
        cpu = cpu_now()
        scores, _, fork_s = timed_pool(fork.run, forked, CORES)
        fork_cpu = cpu_now() - cpu
        bad += wrong(scores, forked)
        cpu = cpu_now()
        started = time.perf_counter()
        results = post(url, [request_item(r) for r in posted])
        post_s = time.perf_counter() - started
        post_cpu = cpu_now() - cpu
        bad += wrong([r["score"] if r["status"] == "ok" else None for r in results], posted)
        ratios.append(fork_s / post_s)
        cpu_ratios.append(fork_cpu / post_cpu)
    return ratios, cpu_ratios, bad


def run_service(
    backend: str,
    batch: list[Response],
    single: list[Response],
    loops: int,
    fork: ForkServers | None = None,
    rounds: list[list[Response]] | None = None,
) -> dict[str, Any]:
    server = Server(backend)
    try:
        post(server.url, [request_item(batch[0])])  # warm up
        started = time.perf_counter()
        results = post(server.url, [request_item(r) for r in batch])
        batch_s = time.perf_counter() - started
        ratios, cpu_ratios, fork_bad = (
            paired_rounds(server.url, fork, rounds) if fork and rounds else ([], [], 0)
        )

        def one(r: Response) -> tuple[dict[str, Any], float]:
            t = time.perf_counter()
            (res,) = post(server.url, [request_item(r)])
            return res, time.perf_counter() - t

        with ThreadPoolExecutor(4) as pool:
            singles = list(pool.map(one, single))

        loop_results: list[tuple[dict[str, Any], float]] = []
        if loops:
            spin = Response(
                "```python\ndef square(x):\n    while True:\n        pass\n```",
                "",
                ("assert square(2) == 4",) * 10,
                0.0,
            )
            texts = [
                Response(spin.text.replace("pass", f"pass  # {k}"), "", spin.asserts, 0.0)
                for k in range(loops)
            ]
            loop_results = [one(r) for r in texts]  # one at a time: the latency of a timeout
    finally:
        server.stop()
    return {
        "results": results,
        "batch_s": batch_s,
        "fork_ratios": ratios,
        "fork_cpu_ratios": cpu_ratios,
        "fork_wrong": fork_bad,
        "single": singles,
        "loops": loop_results,
    }


# ----------------------------------------------------------------------------- report


def pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def wrong(scores: Sequence[float | None], responses: Sequence[Response]) -> int:
    return sum(
        s is None or abs(s - r.expected) > 1e-9 for s, r in zip(scores, responses, strict=True)
    )


def report_service(
    backend: str,
    out: dict[str, Any],
    responses: list[Response],
    single: list[Response],
    rates: tuple[float, float],
    short: bool,
) -> int:
    """Print one backend's figures; returns its count of failures."""
    n = len(responses)
    got = [r["score"] if r["status"] == "ok" else None for r in out["results"]]
    rate_c = n / out["batch_s"]
    bad: int = wrong(got, responses) + int(out["fork_wrong"])
    line = f"(c) POST /v1/score, {backend:6}:     {rate_c:8.1f}/s  "
    if out["single"]:
        s_lat = [t for _, t in out["single"]]
        bad += wrong([r["score"] for r, _ in out["single"]], single)
        line += f"p50 {pct(s_lat, 0.5) * 1000:7.1f} ms  p99 {pct(s_lat, 0.99) * 1000:7.1f} ms  "
    rate_a, rate_b = rates
    if rate_a:
        line += f"ratio to (a) {rate_c / rate_a:5.2f}x, to (b) {rate_c / rate_b:6.1f}x  "
    print(line + f"wrong verdicts: {bad}")
    if out["fork_ratios"]:
        ratios = " ".join(f"{r:.2f}x" for r in out["fork_ratios"])
        cpu = " ".join(f"{r:.2f}x" for r in out["fork_cpu_ratios"])
        print(
            f"    to (f) the fork server, paired rounds: {ratios}; "
            f"median {statistics.median(out['fork_ratios']):.2f}x\n"
            f"    CPU per response, (f)'s over (c)'s (all processes): {cpu}; "
            f"median {statistics.median(out['fork_cpu_ratios']):.2f}x"
        )
    failures = bad
    if out["loops"]:
        budget = 5.0
        late = [t for _, t in out["loops"] if t > budget + 1.0]
        not_timeout = [
            r for r, _ in out["loops"] if r["details"].get("reason") != "budget_exceeded"
        ]
        failures += len(not_timeout) + (0 if short else len(late))
        times = [t for _, t in out["loops"]]
        print(
            f"    {len(times)} infinite loops: max {max(times):.2f} s, median "
            f"{statistics.median(times):.2f} s; later than budget + 1 s: {len(late)}"
            f"{' (not judged in --short)' if short and late else ''}; "
            f"not budget_exceeded: {len(not_timeout)}"
        )
    return failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--short", action="store_true", help="a small run for CI")
    parser.add_argument("--backends", default="docker,local")
    parser.add_argument(
        "--fork-rounds", type=int, default=3, help="paired rounds against the fork server (f)"
    )
    parser.add_argument("--fork-batch", type=int, default=190, help="responses per round of (f)")
    parser.add_argument("--only-fork", action="store_true", help="skip (a), (b), latency, loops")
    args = parser.parse_args()
    short = args.short or os.environ.get("PROCTOR_SHORT") == "1"
    n, n_docker, n_loops = (120, 40, 4) if short else (500, 500, 20)
    if short:
        args.fork_rounds = min(args.fork_rounds, 1)
    if args.only_fork:
        n = args.fork_batch
    rounds = [
        make_responses(args.fork_batch, seed=10 + k, tag=f"f{k}-")
        for k in range(2 * args.fork_rounds)
    ]
    responses = make_responses(n)
    single = make_responses(min(n, 100), seed=1, tag="s")
    mix = {
        "correct": sum(r.expected == 1.0 for r in responses),
        "zero": sum(r.expected == 0.0 for r in responses),
    }
    print(f"responses: {n}, 10 asserts each; {mix}; cores: {CORES}")
    failures = 0

    rate_a = rate_b = 0.0
    if not args.only_fork:
        scores, lat, elapsed = timed_pool(run_subprocess, responses, CORES)
        rate_a = n / elapsed
        failures += wrong(scores, responses)
        print(
            f"(a) subprocess.run per response:  {rate_a:8.1f}/s  p50 {pct(lat, 0.5) * 1000:7.1f}"
            f" ms  p99 {pct(lat, 0.99) * 1000:7.1f} ms  wrong verdicts: {wrong(scores, responses)}"
        )
        sub = responses[:n_docker]
        scores, lat, elapsed = timed_pool(run_docker, sub, CORES)
        rate_b = len(sub) / elapsed
        failures += wrong(scores, sub)
        print(
            f"(b) docker run --rm per response: {rate_b:8.1f}/s  p50 {pct(lat, 0.5) * 1000:7.1f}"
            f" ms  p99 {pct(lat, 0.99) * 1000:7.1f} ms  wrong verdicts: {wrong(scores, sub)}"
            f"  ({len(sub)} responses)"
        )
    fork = ForkServers(CORES)
    try:
        for backend in args.backends.split(","):
            loops = n_loops if backend == "docker" and not args.only_fork else 0
            out = run_service(
                backend, responses, [] if args.only_fork else single, loops, fork, rounds
            )
            failures += report_service(backend, out, responses, single, (rate_a, rate_b), short)
    finally:
        fork.close()
    print("every verdict correct" if not failures else f"FAILURES: {failures}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
