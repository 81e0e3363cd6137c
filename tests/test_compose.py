"""docker-compose.yml as an operator runs it: Redis, the API and two workers from the service
image, built offline (service/image/build-offline.sh), scoring a batch of every domain, with
code run in sibling sandbox containers. Needs docker-compose, the engine and both images; in CI
(which builds them: tests/run) it must run."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from service.http.examples import EXAMPLE_ITEMS
from tests.helpers import check_documented, documented_examples, free_port, poll
from tests.sandbox_fixtures import unavailable

pytestmark = pytest.mark.docker

ROOT = Path(__file__).resolve().parents[1]
SERVICE_IMAGE = os.environ.get("PROCTOR_IMAGE", "proctor:latest")
SANDBOX_IMAGE = os.environ.get("PROCTOR_SANDBOX_IMAGE", "proctor-sandbox:2")


def _image_missing(image: str) -> bool:
    found = subprocess.run(["docker", "image", "inspect", image], capture_output=True)
    return found.returncode != 0


PROJECT = f"proctortest{os.getpid()}"
REDIS_PASSWORD = secrets.token_hex(16)
SOCKETS = Path("/run/proctor-sockets")


def _containers(service: str | None = None) -> list[str]:
    labels = ["--filter", f"label=com.docker.compose.project={PROJECT}"]
    if service is not None:
        labels += ["--filter", f"label=com.docker.compose.service={service}"]
    found = subprocess.run(["docker", "ps", "-q", *labels], capture_output=True, text=True)
    return found.stdout.split()


@pytest.fixture(scope="module")
def stack() -> Iterator[tuple[str, str]]:
    compose = shutil.which("docker-compose")
    if compose is None or shutil.which("docker") is None:
        unavailable("docker-compose or docker is not installed")
    for image in (SERVICE_IMAGE, SANDBOX_IMAGE):
        if _image_missing(image):
            unavailable(f"image {image} is missing (service/image/build-offline.sh builds it)")
    key, port = secrets.token_hex(16), free_port()
    env = {
        **os.environ,
        "PROCTOR_API_KEYS": key,
        "PROCTOR_REDIS_PASSWORD": REDIS_PASSWORD,
        "PROCTOR_DOCKER_GID": str(os.stat("/var/run/docker.sock").st_gid),
        "PROCTOR_PORT": str(port),
        "PROCTOR_SANDBOX_IMAGE": SANDBOX_IMAGE,
        "PROCTOR_IMAGE": SERVICE_IMAGE,
    }
    base = [compose, "-f", str(ROOT / "docker-compose.yml"), "-p", PROJECT]
    # what the file's header asks of the operator: a socket directory the workers' user owns
    SOCKETS.mkdir(mode=0o755, exist_ok=True)
    os.chown(SOCKETS, 10001, 10001)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*base, *args], env=env, capture_output=True, text=True, timeout=300)

    url = f"http://127.0.0.1:{port}"
    try:
        up = run("up", "-d", "--scale", "worker=2")
        assert up.returncode == 0, up.stderr

        def ready() -> bool:
            try:
                return httpx.get(f"{url}/readyz", timeout=5).status_code == 200
            except httpx.HTTPError:
                return False

        poll(ready, 240, every=1.0)
        yield url, key
    except BaseException:
        print(run("logs", "--no-color", "--tail", "60").stdout)
        raise
    finally:
        run("down", "--volumes", "--remove-orphans", "--timeout", "20")


def test_the_documented_examples_score_as_documented_through_the_stack(
    stack: tuple[str, str],
) -> None:
    # docs/api.md's examples cover every domain (code runs in the workers' sandbox containers)
    # and the per-item refusals; each is sent eight times, as a GRPO group would.
    url, key = stack
    examples = documented_examples() * 8
    reply = httpx.post(
        f"{url}/v1/score",
        json={"items": [item for _, item in examples]},
        headers={"authorization": f"Bearer {key}"},
        timeout=300,
    )
    assert reply.status_code == 200, reply.text
    results = reply.json()["results"]
    assert len(results) == len(examples)
    for (expect, _), result in zip(examples, results, strict=True):
        check_documented(expect, result)
    domains = {item["domain"] for _, item in examples}
    assert {"math", "stem", "code", "puzzle", "ifeval"} <= domains


def test_the_published_api_wants_a_key(stack: tuple[str, str]) -> None:
    url, _ = stack
    reply = httpx.post(f"{url}/v1/score", json={"items": [EXAMPLE_ITEMS["math"]]}, timeout=30)
    assert reply.status_code == 401


def test_the_api_health_check_is_readiness(stack: tuple[str, str]) -> None:
    # The compose health check polls /readyz, so a restart-looping or unready API shows as
    # unhealthy in `docker ps` instead of `up -d` saying "done" and nothing more.
    compose_file = (ROOT / "docker-compose.yml").read_text(encoding="utf-8")
    assert "8000/readyz" in compose_file and "8000/healthz" not in compose_file

    def api_healthy() -> bool:
        ids = _containers("api")
        if not ids:
            return False
        health = subprocess.run(
            ["docker", "inspect", "--format", "{{.State.Health.Status}}", *ids],
            capture_output=True,
            text=True,
        )
        return health.stdout.split() == ["healthy"] * len(ids)

    poll(api_healthy, 120, every=1.0)


def test_every_service_is_hardened_and_no_secret_is_on_a_command_line(
    stack: tuple[str, str],
) -> None:
    # Every container: a non-root user, a read-only root, no capabilities, no new privileges, a
    # memory limit; the Redis password in no container's command and in no process's argv on
    # this host (where the containers' processes are visible), only in environments.
    _, key = stack
    ids = _containers()
    assert len(ids) == 4  # redis, api, two workers
    inspected = json.loads(
        subprocess.run(["docker", "inspect", *ids], capture_output=True, text=True).stdout
    )
    for container in inspected:
        name, config, host = container["Name"], container["Config"], container["HostConfig"]
        assert config["User"] == "10001:10001", name
        assert host["ReadonlyRootfs"] is True, name
        assert host["CapDrop"] == ["ALL"], name
        assert "no-new-privileges:true" in host["SecurityOpt"], name
        assert host["Memory"] > 0, name
        command = json.dumps([config["Entrypoint"], config["Cmd"], container["Args"]])
        assert REDIS_PASSWORD not in command and key not in command, name
    argv = subprocess.run(["ps", "-eww", "-o", "args="], capture_output=True, text=True).stdout
    assert "redis-server" in argv and "proctor worker" in argv
    assert REDIS_PASSWORD not in argv and key not in argv


def test_redis_refuses_writes_rather_than_evict_and_keeps_an_append_only_file(
    stack: tuple[str, str],
) -> None:
    # noeviction: past maxmemory a write fails (our 503 / infra_error), never a running job's
    # key dropped in silence; the append-only file on a volume is what lets jobs survive a
    # restart of Redis, as docs/api.md says.
    (redis,) = _containers("redis")

    def config(name: str) -> str:
        got = subprocess.run(
            ["docker", "exec", redis, "redis-cli", "config", "get", name],
            capture_output=True,
            text=True,
        )
        return got.stdout.split()[-1]

    assert config("maxmemory-policy") == "noeviction"
    assert int(config("maxmemory")) > 0
    assert config("appendonly") == "yes"
