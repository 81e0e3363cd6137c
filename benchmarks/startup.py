"""Start-up: `proctor specs`, and `proctor serve` until `/readyz` answers 200, in one run.

For this checkout and, with `--against REV`, the same commands run from that revision's source
(extracted with `git archive` into a temporary directory, put first on PYTHONPATH), alternating
between the two in every round so that both see the same machine. Each round also times the bare
floor of any FastAPI service, `python -c "import fastapi"`.

Measured per source (medians over the rounds):

  - `proctor specs`: wall time of the command, start to exit;
  - `proctor serve`: from the start of the command to the first HTTP answer of `/readyz` (a 503
    while the workers warm up) and to its first 200 (workers and sandboxes warm), polled every
    50 ms.

Then the example item of every domain (`service.http.examples`) is scored on each server: each
must be `ok`, and with `--against` both sources' `proctor specs` output (every spec's hash)
and verdicts must be identical; otherwise the script exits non-zero. `--short` (or
PROCTOR_SHORT=1): one round, one worker, this checkout only.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from service.http.examples import EXAMPLE_ITEMS  # noqa: E402 (this checkout's, as ROOT says)

POLL_S = 0.05
READY_LIMIT_S = 600.0


@dataclass
class Source:
    name: str
    root: Path
    specs_s: list[float] = field(default_factory=list)
    listening_s: list[float] = field(default_factory=list)
    ready_s: list[float] = field(default_factory=list)
    specs_output: str = ""
    verdicts: list[tuple[str, float | None]] = field(default_factory=list)

    def env(self) -> dict[str, str]:
        path = f"{self.root}{os.pathsep}{self.root / 'clients'}"
        return {**os.environ, "PYTHONPATH": path}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _request(port: int, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        headers = {"content-type": "application/json"} if body is not None else {}
        connection.request(method, path, body=body, headers=headers)
        reply = connection.getresponse()
        return reply.status, reply.read()
    finally:
        connection.close()


def time_specs(source: Source, workdir: Path) -> None:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "service.cli", "specs"],
        cwd=workdir,
        env=source.env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    source.specs_s.append(time.perf_counter() - started)
    if done.returncode != 0:
        raise RuntimeError(f"{source.name}: proctor specs failed:\n{done.stderr[-2000:]}")
    source.specs_output = done.stdout


def time_serve(source: Source, workdir: Path, workers: int) -> None:
    """One start of `proctor serve`: the times to listening and to ready, then the examples."""
    port = _free_port()
    command = [sys.executable, "-m", "service.cli", "serve", "--port", str(port)]
    started = time.perf_counter()
    server = subprocess.Popen(
        [*command, "--workers", str(workers), "--log-level", "warning"],
        cwd=workdir,
        env=source.env(),
    )
    try:
        listening = None
        while True:
            elapsed = time.perf_counter() - started
            try:
                status, _ = _request(port, "GET", "/readyz")
            except OSError:
                status = 0  # not listening yet
            if status and listening is None:
                listening = elapsed
            if status == 200:
                break
            if server.poll() is not None or elapsed > READY_LIMIT_S:
                raise RuntimeError(f"{source.name}: proctor serve never became ready")
            time.sleep(POLL_S)
        source.listening_s.append(listening if listening is not None else elapsed)
        source.ready_s.append(elapsed)
        items = [{"id": domain, **item} for domain, item in EXAMPLE_ITEMS.items()]
        status, body = _request(port, "POST", "/v1/score", json.dumps({"items": items}).encode())
        if status != 200:
            raise RuntimeError(f"{source.name}: /v1/score answered {status}: {body[:500]!r}")
        results = json.loads(body)["results"]
        source.verdicts = [(r["status"], r["score"]) for r in results]
    finally:
        server.terminate()
        server.wait(timeout=120)


def time_bare(samples: list[float], workdir: Path) -> None:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import fastapi"], cwd=workdir, check=True, timeout=300)
    samples.append(time.perf_counter() - started)


@contextmanager
def extracted(revision: str) -> Iterator[Path]:
    """The source tree of `revision` in a temporary directory (no worktree, no stash)."""
    with tempfile.TemporaryDirectory(prefix="proctor-startup-") as tmp:
        archive = Path(tmp) / "source.tar"
        subprocess.run(
            ["git", "-C", str(ROOT), "archive", "--output", str(archive), revision], check=True
        )
        with tarfile.open(archive) as tar:
            tar.extractall(Path(tmp) / "src", filter="data")
        yield Path(tmp) / "src"


@contextmanager
def _baseline(revision: str | None) -> Iterator[Path | None]:
    if revision is None:
        yield None
        return
    with extracted(revision) as root:
        yield root


def _median(samples: list[float]) -> float:
    return statistics.median(samples) if samples else float("nan")


def report(sources: list[Source], bare: list[float], loads: tuple[str, str]) -> None:
    print(f"load average at start -> end: {loads[0]} -> {loads[1]}")
    print(f'bare `python -c "import fastapi"`: {_median(bare):.2f} s (median of {len(bare)})')
    print(f"| {'measure':26} |" + "".join(f" {s.name:>23} |" for s in sources))
    print("|" + "-" * 28 + ("|" + "-" * 25) * len(sources) + "|")
    rows: list[tuple[str, str]] = [
        ("proctor specs", "specs_s"),
        ("serve to /readyz answering", "listening_s"),
        ("serve to /readyz 200", "ready_s"),
    ]
    for label, attr in rows:
        cells = ""
        for s in sources:
            value = _median(getattr(s, attr))
            cells += f" {value:6.2f} s ({value / _median(bare):5.1f}x bare) |"
        print(f"| {label:26} |{cells}")
    if len(sources) == 2:
        before, after = sources
        for label, attr in rows:
            ratio = _median(getattr(before, attr)) / _median(getattr(after, attr))
            print(f"{label}: {before.name} / {after.name} = {ratio:.2f}x")


def check(sources: list[Source]) -> list[str]:
    problems = []
    for s in sources:
        if any(status != "ok" for status, _ in s.verdicts):
            problems.append(f"{s.name}: an example was not scored: {s.verdicts}")
    if len(sources) == 2:
        before, after = sources
        if before.specs_output != after.specs_output:
            problems.append("proctor specs differs between the sources (a spec hash changed?)")
        if before.verdicts != after.verdicts:
            problems.append(f"verdicts differ: {before.verdicts} against {after.verdicts}")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", default=None, help="a git revision to compare with")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--short", action="store_true", help="one round, one worker (CI)")
    args = parser.parse_args()
    short = args.short or os.environ.get("PROCTOR_SHORT") == "1"
    rounds, workers = (1, 1) if short else (args.rounds, args.workers)
    loads = [" ".join(f"{x:.2f}" for x in os.getloadavg())]
    with _baseline(None if short else args.against) as before_root:
        sources = [Source("this checkout", ROOT)]
        if before_root is not None:
            sources.insert(0, Source(f"{args.against}", before_root))
        bare: list[float] = []
        with tempfile.TemporaryDirectory(prefix="proctor-startup-cwd-") as workdir:
            for _ in range(rounds):
                time_bare(bare, Path(workdir))
                for source in sources:
                    time_specs(source, Path(workdir))
                for source in sources:
                    time_serve(source, Path(workdir), workers)
    loads.append(" ".join(f"{x:.2f}" for x in os.getloadavg()))
    report(sources, bare, (loads[0], loads[1]))
    problems = check(sources)
    for problem in problems:
        print(f"FAIL: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
