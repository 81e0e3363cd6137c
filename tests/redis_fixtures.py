"""pytest fixtures for queue mode (loaded as a plugin from tests/conftest.py): a real
`redis-server` on a free port in a temporary directory, and real `proctor worker` processes.

- `redis_server`: a fresh Redis for one test (no persistence unless `RedisServer(aof=True)`),
  which the test may stop and start again on the same port (`RedisServer(password=..., tls=True)`
  for one that needs a password and speaks TLS);
- `start_worker`: starts a `proctor worker` process (in a session of its own, killed with its
  children at the end of the test) and waits until Redis lists it as alive (`wait=False`: the
  test waits with `Worker.wait_alive`, so several warm up at once).

Without a `redis-server` binary the tests are skipped, except in CI (`CI=true`), where they fail.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
import redis

from service.queue import keys
from tests.helpers import TEST_SPECS, free_port, poll

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
ROOT = Path(__file__).resolve().parent.parent
TEST_REGISTRY = "tests.pool_scorers:registry"
WORKER_READY_S = 120.0
"""How long a worker may take to warm up (imports, a pool process per core) on a busy machine."""


def redis_binary() -> str:
    found = shutil.which("redis-server")
    if found is None:
        reason = "no redis-server binary (tests/run installs Debian's redis-server)"
        if IN_CI:
            pytest.fail(f"redis unavailable in CI: {reason}", pytrace=False)
        pytest.skip(reason)
    return found


def _self_signed(directory: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key, made with the openssl command."""
    openssl = shutil.which("openssl")
    if openssl is None:
        if IN_CI:
            pytest.fail("no openssl command in CI, for the TLS test", pytrace=False)
        pytest.skip("no openssl command")
    cert, key = directory / "redis-cert.pem", directory / "redis-key.pem"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", str(key), "-out", str(cert), "-subj", "/CN=proctor-test",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


class RedisServer:
    """A real redis-server of the test's own: `stop()` and `start()` keep its port. With `tls`,
    it speaks TLS only, with a self-signed certificate its URL tells clients to trust."""

    def __init__(
        self,
        directory: Path,
        *,
        aof: bool = False,
        password: str | None = None,
        tls: bool = False,
    ) -> None:
        self.binary = redis_binary()
        self.directory = directory
        self.aof = aof
        self.password = password
        self.tls = _self_signed(directory) if tls else None
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        if self.tls is None:
            return f"redis://{auth}127.0.0.1:{self.port}/0"
        return f"rediss://{auth}127.0.0.1:{self.port}/0?ssl_ca_certs={self.tls[0]}"

    def client(self) -> redis.Redis:
        return redis.Redis.from_url(self.url)

    def start(self) -> None:
        args = [self.binary, "--bind", "127.0.0.1"]
        if self.tls is None:
            args += ["--port", str(self.port)]
        else:
            cert, key = (str(path) for path in self.tls)
            args += ["--port", "0", "--tls-port", str(self.port), "--tls-auth-clients", "no"]
            args += ["--tls-cert-file", cert, "--tls-key-file", key, "--tls-ca-cert-file", cert]
        args += ["--dir", str(self.directory), "--save", "", "--daemonize", "no"]
        args += ["--appendonly", "yes" if self.aof else "no"]
        if self.password:
            args += ["--requirepass", self.password]
        log = open(self.directory / "redis.log", "ab")  # noqa: SIM115 - the process keeps it
        self.process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        poll(self._answers, timeout=30)

    def _answers(self) -> bool:
        try:
            return bool(self.client().ping())
        except redis.RedisError:
            return False

    def stop(self) -> None:
        """Stop at once (SIGKILL: what a crash or a lost node looks like to its clients)."""
        if self.process is not None:
            self.process.kill()
            self.process.wait(timeout=30)
            self.process = None


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path)
    server.start()
    yield server
    server.stop()


class Worker:
    """A `proctor worker` process, and the name it has in Redis."""

    def __init__(self, process: subprocess.Popen[bytes], log: Path) -> None:
        self.process = process
        self.log = log

    @property
    def pid(self) -> int:
        return self.process.pid

    def named(self, name: str) -> bool:
        return name.rsplit("-", 1)[-1] == str(self.pid)

    def wait_alive(self, url: str) -> None:
        """Wait until Redis lists this worker as alive (warm); fail if it exits instead."""
        client = redis.Redis.from_url(url)
        poll(
            lambda: (
                self.process.poll() is not None or any(self.named(n) for n in alive_names(client))
            ),
            timeout=WORKER_READY_S,
        )
        if self.process.poll() is not None:
            raise RuntimeError(f"the worker exited: {self.log.read_text()[-2000:]}")

    def signal(self, sig: int) -> None:
        os.kill(self.pid, sig)

    def kill_all(self) -> None:
        """Kill it and everything it started (its pool, its forkserver)."""
        with contextlib.suppress(ProcessLookupError):  # already gone, with its session
            os.killpg(self.pid, signal.SIGKILL)
        self.process.wait(timeout=30)


def proctor_env(registry: str | None = TEST_REGISTRY) -> dict[str, str]:
    """The environment of a `proctor` subprocess: this checkout first on the path, the local
    sandbox backend, and `registry` (None: the default one)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "clients")]))
    env["PROCTOR_SANDBOX__BACKEND"] = "local"
    if registry is not None:
        env["PROCTOR_REGISTRY"] = registry
    return env


def alive_names(client: redis.Redis) -> list[str]:
    prefix = len(keys.alive_key(""))
    return [k.decode()[prefix:] for k in client.scan_iter(match=keys.alive_key("*"))]


@pytest.fixture
def start_worker(tmp_path: Path) -> Iterator[Callable[..., Worker]]:
    started: list[Worker] = []

    def start(
        url: str,
        *,
        domains: str | None = None,
        workers: int = 1,
        concurrency: int = 2,
        registry: str | None = TEST_REGISTRY,
        wait: bool = True,
        env: dict[str, str] | None = None,
    ) -> Worker:
        args = [sys.executable, "-m", "service.cli", "worker", "--queue", url]
        args += ["--workers", str(workers), "--concurrency", str(concurrency)]
        args += ["--spec-dir", str(TEST_SPECS), "--log-level", "warning"]
        if domains:
            args += ["--domains", domains]
        env = {**proctor_env(registry), **(env or {})}
        log = tmp_path / f"worker-{len(started)}.log"
        with open(log, "wb") as out:
            process = subprocess.Popen(
                args,
                env=env,
                cwd=ROOT,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        worker = Worker(process, log)
        started.append(worker)
        if wait:
            worker.wait_alive(url)
        return worker

    yield start
    for worker in started:
        worker.kill_all()


def status_of(url: str) -> int | None:
    """The status `GET url` answers, or None while nothing listens there."""
    try:
        return httpx.get(url, timeout=5).status_code
    except httpx.HTTPError:
        return None


def serve_queue(
    queue_url: str,
    log: Path,
    registry: str | None = TEST_REGISTRY,
    extra_env: dict[str, str] | None = None,
) -> tuple[subprocess.Popen[bytes], str]:
    """`proctor serve --queue` as a real process (the caller stops it) and its URL, once it
    listens (it is ready only when a worker is); `extra_env`: settings as variables."""
    port = free_port()
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "service.cli", "serve", "--queue", queue_url,
             "--port", str(port), "--spec-dir", str(TEST_SPECS), "--log-level", "warning"],
            cwd=ROOT, env={**proctor_env(registry), **(extra_env or {})}, stdout=out,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    poll(lambda: status_of(url + "/healthz") == 200 or process.poll() is not None, timeout=120)
    if process.poll() is not None:
        raise RuntimeError(f"proctor serve exited: {log.read_text()[-2000:]}")
    return process, url
