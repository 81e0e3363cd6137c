"""The docker backend's containers: how they are locked down, recycled, and never leaked."""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from typing import Any

import pytest

from sandboxes import Execution, Limits, RunRequest, SandboxBackend
from sandboxes.docker_backend import _SOCKET_MOUNT, LABEL, OWNER_LABEL, owner_id
from sandboxes.docker_transport import SupervisorSocket
from tests.sandbox_fixtures import (
    TEST_LABEL,
    TEST_POOL_SIZE,
    open_or_skip,
    sandbox_settings,
    unavailable,
)

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    import docker

    from sandboxes.docker_backend import engine_socket_error

    unreachable = engine_socket_error()
    if unreachable is not None:
        unavailable(f"no Docker engine: {unreachable}")
    try:
        c = docker.from_env()
    except Exception as exc:  # any failure to reach the engine
        unavailable(f"no Docker engine: {exc}")
    try:
        c.ping()
    except Exception as exc:
        c.close()
        unavailable(f"no Docker engine: {exc}")
    yield c
    c.close()


def ours(client: Any, label: str = TEST_LABEL, owner: str | None = None) -> list[Any]:
    labels = [f"{LABEL}={label}"] + ([f"{OWNER_LABEL}={owner}"] if owner else [])
    return list(client.containers.list(all=True, filters={"label": labels}, sparse=True))


def wait_until(predicate: Any, seconds: float = 60.0) -> bool:
    """Poll a condition (not a timing assertion: a generous bound on something that must happen)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.2)
    return bool(predicate())


def test_containers_are_locked_down(docker_backend: SandboxBackend, client: Any) -> None:
    docker_backend.run(RunRequest(files={}, executions=[Execution(("true",))]))
    containers = ours(client, owner=owner_id())
    assert containers
    for sparse in containers:
        container = client.containers.get(sparse.id)
        host = container.attrs["HostConfig"]
        config = container.attrs["Config"]
        assert host["NetworkMode"] == "none"
        assert host["ReadonlyRootfs"] is True
        assert host["CapDrop"] == ["ALL"] and not host.get("CapAdd")
        assert "no-new-privileges" in host["SecurityOpt"]
        assert host["Memory"] > 0 and host["Memory"] == host["MemorySwap"]
        assert host["PidsLimit"] > 0
        assert host["Privileged"] is False
        # Nothing mounted but the socket directory: read-only, and already removed on the host.
        mounts = container.attrs.get("Mounts") or []
        assert [(m["Type"], m["Destination"], m["RW"]) for m in mounts] == [
            ("bind", _SOCKET_MOUNT, False)
        ]
        # (a container still being started may not have connected yet)
        source = mounts[0]["Source"]
        assert wait_until(lambda source=source: not os.path.exists(source))
        assert set(host["Tmpfs"]) == {"/sandbox", "/tmp", "/var/tmp", "/dev/shm"}
        assert all("size=" in opts for opts in host["Tmpfs"].values())
        assert all("nr_inodes=" in opts for opts in host["Tmpfs"].values())
        assert host["LogConfig"]["Type"] == "none"
        assert config["User"] and not config["User"].startswith("0")


def test_work_tmpfs_is_size_capped(docker_backend: SandboxBackend) -> None:
    code = "f = open('fill', 'wb')\nwhile True:\n    f.write(bytes(2**20))"
    limits = Limits(file_size_bytes=2 * 1024**3)
    req = RunRequest(
        files={"main.py": code.encode()}, executions=[Execution(("python3", "main.py"))]
    )
    res = docker_backend.run(RunRequest(req.files, req.executions, limits=limits)).executions[0]
    assert res.status == "runtime_error" and b"No space left" in res.stderr


def test_close_removes_every_container() -> None:
    backend = open_or_skip(sandbox_settings("docker", pool_size=2, docker_label="proctor-close"))
    import docker

    client = docker.from_env()
    try:
        backend.run(RunRequest(files={}, executions=[Execution(("true",))]))
        assert len(ours(client, "proctor-close")) >= 1
        backend.close()
        assert ours(client, "proctor-close") == []
    finally:
        client.close()


def test_recycled_after_n_runs_and_after_oom(client: Any) -> None:
    backend = open_or_skip(
        sandbox_settings(
            "docker",
            pool_size=1,
            recycle_after=3,
            docker_label="proctor-recycle",
            container_memory_bytes=256 * 1024**2,
            work_tmpfs_bytes=64 * 1024**2,
        )
    )
    try:

        def container_ids() -> set[str]:
            return {c.id for c in ours(client, "proctor-recycle") if c.attrs["State"] == "running"}

        trivial = RunRequest(files={}, executions=[Execution(("true",))])
        seen: set[str] = set()
        for _ in range(7):
            assert backend.run(trivial).executions[0].status == "ok"
            wait_until(lambda: len(container_ids()) == 1)
            seen |= container_ids()
        assert len(seen) >= 3  # 7 runs, a new container every 3

        before = container_ids()
        hog = "import os\nx = []\nfor _ in range(8):\n    if os.fork() == 0:\n        break\n"
        hog += "while True:\n    x.append(bytearray(10**7))\n"
        limits = Limits(memory_bytes=200 * 1024**2, cpu_budget_s=5, wall_cap_s=20)
        res = backend.run(
            RunRequest(
                {"main.py": hog.encode()}, [Execution(("python3", "main.py"))], limits=limits
            )
        )
        assert res.executions[0].status in ("memory", "runtime_error", "timeout")
        assert backend.run(trivial).executions[0].status == "ok"
        if res.executions[0].status == "memory":
            assert container_ids().isdisjoint(before) or wait_until(
                lambda: container_ids().isdisjoint(before)
            )
    finally:
        backend.close()


SERVICE = textwrap.dedent(
    """
    import sys, time
    from sandboxes import SandboxSettings, open_backend, RunRequest, Execution
    backend = open_backend(SandboxSettings(backend="docker", pool_size=2, image=sys.argv[1],
                                           docker_label="proctor-killed"))
    from concurrent.futures import ThreadPoolExecutor
    req = RunRequest(files={}, executions=[Execution(("sleep", "0.2"))])
    with ThreadPoolExecutor(4) as pool:  # needs both containers: both are started
        list(pool.map(lambda _: backend.run(req), range(4)))
    print("ready", flush=True)
    time.sleep(600)
    """
)


def test_no_leak_when_the_service_is_killed(client: Any) -> None:
    image = sandbox_settings("docker").image
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVICE, image],
        stdout=subprocess.PIPE,
        cwd=root,
        env={**os.environ, "PYTHONPATH": root},
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"ready\n"
        assert len(ours(client, "proctor-killed")) >= 1
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        # Its connections drop, the supervisors see EOF and exit, Docker removes them.
        # (A container created but not yet started when the service dies stays "created" until
        # the next start-up's sweep: test_start_up_removes_containers_of_dead_owners.)
        ok = wait_until(lambda: ours(client, "proctor-killed") == [], 60)
        assert ok, [(c.attrs["State"], c.attrs["Status"]) for c in ours(client, "proctor-killed")]
        # Its socket directory is left behind; the next start-up with its label removes it.
        orphans = glob.glob(
            os.path.join(tempfile.gettempdir(), f"proctor-proctor-killed-{proc.pid}-*")
        )
        assert orphans
        open_or_skip(sandbox_settings("docker", pool_size=1, docker_label="proctor-killed")).close()
        assert not any(os.path.exists(path) for path in orphans)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
        for c in ours(client, "proctor-killed"):
            c.remove(force=True)


def test_start_up_removes_containers_of_dead_owners(client: Any) -> None:
    import docker.errors

    image = sandbox_settings("docker").image
    stale = client.containers.run(
        image,
        ["sleep", "600"],
        detach=True,
        network_mode="none",
        labels={LABEL: "proctor-stale", OWNER_LABEL: f"{owner_id().split('/')[0]}/999999999"},
    )
    try:
        backend = open_or_skip(
            sandbox_settings("docker", pool_size=1, docker_label="proctor-stale")
        )
        try:
            ids = {c.id for c in ours(client, "proctor-stale")}
            assert stale.id not in ids
        finally:
            backend.close()
    finally:
        with contextlib.suppress(docker.errors.NotFound):
            stale.remove(force=True)


SOCKET_PROBE = """
import os, socket
print(sorted(os.listdir("/run/proctor")))
for name in ("s", "x"):
    try:
        socket.socket(socket.AF_UNIX).connect("/run/proctor/" + name)
        print("connected", name)
    except OSError as exc:
        print(type(exc).__name__)
try:
    open("/run/proctor/f", "w")
    print("wrote")
except OSError as exc:
    print(type(exc).__name__)
"""


def test_socket_directory_is_empty_and_read_only(docker_backend: SandboxBackend) -> None:
    req = RunRequest(
        files={"main.py": SOCKET_PROBE.encode()}, executions=[Execution(("python3", "main.py"))]
    )
    res = docker_backend.run(req).executions[0]
    assert res.status == "ok", res
    lines = res.stdout.decode().split()
    assert lines[0] == "[]" and "connected" not in lines and "wrote" not in lines, lines


def _answers(backend: SandboxBackend, runs: int) -> None:
    """`runs` requests in a row each run a program and get its output back."""
    req = RunRequest(
        files={"main.py": b"print(6 * 7)"}, executions=[Execution(("python3", "main.py"))]
    )
    for _ in range(runs):
        res = backend.run(req).executions[0]
        assert (res.status, res.stdout) == ("ok", b"42\n")


@pytest.fixture
def short_dir() -> Iterator[str]:
    """A directory with a short path (a Unix socket's path has at most 107 bytes)."""
    path = tempfile.mkdtemp(prefix="ps-", dir="/tmp")
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_shared_socket_directory(
    client: Any, short_dir: str, caplog: pytest.LogCaptureFixture
) -> None:
    # As in docker-compose.yml: the sockets live under an operator's directory, in a
    # subdirectory of this host's name, and the transport is the socket, not the fallback.
    shared = os.path.join(short_dir, "sockets")
    settings = sandbox_settings(
        "docker", pool_size=1, docker_socket_dir=shared, docker_label="proctor-shared"
    )
    backend = open_or_skip(settings)
    try:
        _answers(backend, runs=3)
        assert "using the attach stream instead" not in caplog.text
        mine = glob.glob(os.path.join(shared, socket.gethostname(), "proctor-proctor-shared-*"))
        assert len(mine) == 1
        containers = ours(client, "proctor-shared", owner=owner_id())
        assert containers
        for sparse in containers:
            mounts = client.containers.get(sparse.id).attrs["Mounts"]
            assert [m["Source"].startswith(mine[0]) for m in mounts] == [True]
    finally:
        backend.close()
    assert os.listdir(shared) == []  # its directory and this host's are gone


def test_socket_path_too_long_falls_back_to_attach(
    short_dir: str, caplog: pytest.LogCaptureFixture
) -> None:
    deep = os.path.join(short_dir, "d" * 100)
    settings = sandbox_settings("docker", pool_size=2, docker_socket_dir=deep)
    backend = open_or_skip(settings)
    try:
        _answers(backend, runs=4)
        assert "AF_UNIX path too long" in caplog.text
        assert "using the attach stream instead" in caplog.text
    finally:
        backend.close()


def test_closing_a_backend_spares_another_of_the_same_label(
    docker_backend: SandboxBackend,
) -> None:
    # Both in this process: the same label and owner. Closing one removes its containers only.
    other = open_or_skip(sandbox_settings("docker", pool_size=1))
    _answers(other, runs=1)
    other.close()
    _answers(docker_backend, runs=2 * TEST_POOL_SIZE)  # each of its sandboxes, twice over


def test_a_sandbox_killed_while_idle_is_replaced(client: Any) -> None:
    # Its container removed from outside between requests: the next request, which the dead
    # sandbox never received, runs in another one.
    settings = sandbox_settings("docker", pool_size=1, docker_label="proctor-killed-idle")
    backend = open_or_skip(settings)
    try:
        _answers(backend, runs=1)
        containers = ours(client, "proctor-killed-idle", owner=owner_id())
        assert len(containers) == 1
        containers[0].remove(force=True)
        _answers(backend, runs=2)
    finally:
        backend.close()


def test_attach_transport(client: Any) -> None:
    settings = sandbox_settings(
        "docker", pool_size=1, docker_transport="attach", docker_label="proctor-attach"
    )
    backend = open_or_skip(settings)
    try:
        _answers(backend, runs=3)
        containers = ours(client, "proctor-attach", owner=owner_id())
        assert containers
        for sparse in containers:
            assert not client.containers.get(sparse.id).attrs.get("Mounts")
    finally:
        backend.close()


def test_socket_transport_falls_back_to_attach(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # The supervisor finds no socket to connect to (as where the engine does not see the
    # service's directory): the backend says so and uses the attach stream.
    listen = SupervisorSocket.__init__

    def listen_then_unlink(self: SupervisorSocket, socket_dir: str, uid: int, token: str) -> None:
        listen(self, socket_dir, uid, token)
        assert self.directory is not None
        os.unlink(os.path.join(self.directory, "s"))

    monkeypatch.setattr(SupervisorSocket, "__init__", listen_then_unlink)
    backend = open_or_skip(sandbox_settings("docker", pool_size=2))
    try:
        _answers(backend, runs=4)
        assert "using the attach stream instead" in caplog.text
    finally:
        backend.close()
