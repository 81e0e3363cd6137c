"""The benchmarks still run, and on their workloads our verdicts still equal the baselines'.

Each script exits non-zero when any verdict of ours differs from its baseline's (or an item is not
`ok`); this runs their short modes. Speed is not checked here: the machines are shared, and the
figures are for a person to read from a full run (benchmarks/README.md).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.sandbox_fixtures import unavailable

ROOT = Path(__file__).parent.parent


def _run(script: str, *args: str) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), "--short", *args],
        cwd=ROOT,
        env={**os.environ, "PROCTOR_SHORT": "1"},
        capture_output=True,
        text=True,
        timeout=540,
    )
    assert done.returncode == 0, f"{script}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"


@pytest.mark.parametrize(
    "script",
    [
        "math_throughput.py",
        "ifeval_throughput.py",
        "puzzle_throughput.py",
        "client_overhead.py",
        "trainer_step.py",
        "eval_throughput.py",
        "startup.py",
        "fairness.py",
        "contamination.py",
        "eval_coverage.py",
        "judge_throughput.py",
    ],
)
def test_short_benchmark_agrees_with_its_baseline(script: str) -> None:
    _run(script)


@pytest.mark.docker
def test_short_code_benchmark_agrees_with_its_baselines() -> None:
    import docker

    from sandboxes.docker_backend import engine_socket_error
    from sandboxes.settings import SandboxSettings

    unreachable = engine_socket_error()
    if unreachable is not None:
        unavailable(f"no Docker engine: {unreachable}")
    client = docker.from_env()
    try:
        client.images.get(SandboxSettings().image)
    except docker.errors.ImageNotFound:
        unavailable(f"no sandbox image {SandboxSettings().image}")
    finally:
        client.close()
    _run("code_throughput.py")


def test_short_compat_benchmark_agrees_with_score(local_backend: object) -> None:
    # verl's own SandboxFusion scoring through /compat/sandbox-fusion/run_code and /v1/score give
    # every response the same score (local sandboxes; verl's venv, which tests/run builds)
    _run("compat_throughput.py")


@pytest.mark.redis
def test_short_compat_benchmark_in_queue_mode(local_backend: object) -> None:
    # the same, with the runs and the batch on a `proctor worker` through Redis
    from tests.redis_fixtures import redis_binary

    redis_binary()  # skipped without one, failed in CI
    _run("compat_throughput.py", "--queue")


@pytest.mark.redis
def test_short_scale_out_benchmark_agrees_across_modes() -> None:
    # the embedded default and one, two and four queue workers (each in a CPU cgroup on a
    # quota where the host allows it) give the same verdicts (real redis-server)
    from tests.redis_fixtures import redis_binary

    redis_binary()  # skipped without one, failed in CI
    _run("scale_out.py")


@pytest.mark.docker
def test_short_language_benchmark_agrees_with_its_baseline() -> None:
    # every language on local and docker against subprocess.run of the same build (toolchains
    # on the host and in the image: tests/run installs both)
    _run("lang_throughput.py")
