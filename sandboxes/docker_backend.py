"""The `docker` backend: a pool of warm, long-lived, locked-down containers.

Each container runs the same supervisor as the local backend (sent over stdin at start; nothing is
mounted) with no network, a read-only root, size-capped tmpfs for /sandbox, /tmp, /var/tmp and
/dev/shm, memory = memory+swap, a pids limit, every capability dropped, no-new-privileges, a
non-root user, and the supervisor itself as PID 1 (the reaping init). The service sends the
supervisor's source over the container's attached stdin, then talks to it over a Unix socket in a
per-container directory bind-mounted read-only (`socket` transport; the socket and directory are
deleted once the supervisor has connected), or over the attached stdin/stdout (`attach`: one
hijacked connection per container through the engine). Never a `docker exec` per run.

Containers are made from the image the backend opened with, by its id: a tag moved to another
image later changes nothing the backend runs, and the backend says so (`environment_changed`,
checked before each container start) so that the service stops scoring under the hash it
probed.

Containers carry the label `io.proctor.sandbox=<docker_label>` and an owner label (host name and
pid). At shutdown a service removes its own; at start-up, those whose owner on this host is gone.
A container whose service dies sees its stdin close (the attach connection drops), exits and is
auto-removed.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import shutil
import socket
import tempfile
import threading
from typing import Any

import docker
import docker.errors
import docker.types

from sandboxes._pool import SupervisorPool
from sandboxes.api import SandboxUnavailable
from sandboxes.docker_transport import AttachStream, SocketUnusable, SupervisorSocket
from sandboxes.frames import bootstrap_payload
from sandboxes.settings import SandboxSettings
from sandboxes.supervisor import BOOTSTRAP, SupervisorConfig, supervisor_config

__all__ = [
    "LABEL",
    "OWNER_LABEL",
    "DockerBackend",
    "engine_socket_error",
    "owner_id",
    "remove_containers",
]

log = logging.getLogger("sandboxes")

LABEL = "io.proctor.sandbox"
OWNER_LABEL = "io.proctor.sandbox.owner"


def owner_id() -> str:
    """This process, as written in the owner label: host name and pid."""
    return f"{socket.gethostname()}/{os.getpid()}"


def _owner_alive(owner: str) -> bool:
    """Is the service that started a container still running? Unknown hosts count as alive."""
    host, _, pid = owner.rpartition("/")
    if host != socket.gethostname() or not pid.isdigit():
        return True
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_containers(
    client: Any, label: str, *, owner: str | None = None, name_prefix: str = ""
) -> int:
    """Force-remove containers labelled `io.proctor.sandbox=<label>`: those of `owner` when given
    (and named `name_prefix...`: one backend's, where a process opened several), else those
    whose owner on this host is gone. A live owner's containers are its own business, whatever
    their state: one being started is not yet running."""
    removed = 0
    filters = {"label": [f"{LABEL}={label}"] + ([f"{OWNER_LABEL}={owner}"] if owner else [])}
    # sparse: no inspect per container, which would race with containers being removed
    for container in client.containers.list(all=True, filters=filters, sparse=True):
        names = container.attrs.get("Names") or []
        if name_prefix and not any(n.lstrip("/").startswith(name_prefix) for n in names):
            continue
        owner_of = (container.attrs.get("Labels") or {}).get(OWNER_LABEL, "")
        if owner is None and _owner_alive(owner_of):
            continue
        try:
            container.remove(force=True)
            removed += 1
        except docker.errors.NotFound:
            continue
        except docker.errors.APIError as exc:
            if "already in progress" not in str(exc):
                raise
    return removed


_SOCKET_MOUNT = "/run/proctor"


class ContainerChannel:
    """One container and the connection to its supervisor: a `SupervisorSocket` (`socket_dir`
    given) once the supervisor has connected, else the frames in the `AttachStream`."""

    def __init__(
        self,
        client: Any,
        settings: SandboxSettings,
        name: str,
        image: str,
        socket_dir: str | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        self._closed = False
        self._start_timeout = settings.start_timeout_s
        self._attach: AttachStream | None = None
        self._socket: SupervisorSocket | None = None
        config = supervisor_config(
            {
                "work_root": "/sandbox",
                "pid_namespace": True,
                "ipc_namespace": True,
                "wipe": ["/tmp", "/var/tmp", "/dev/shm"],
                "set_nproc": False,  # every container's uid is the same: the pids cgroup limits
                "fork_python": settings.fork_python,
                **(extra or {}),
            }
        )
        mounts: list[Any] = []
        if socket_dir is not None:
            token = secrets.token_hex(16)
            self._socket = SupervisorSocket(socket_dir, settings.docker_uid, token)
            config["connect"], config["token"] = f"{_SOCKET_MOUNT}/s", token
            directory = self._socket.directory
            mounts.append(docker.types.Mount(_SOCKET_MOUNT, directory, type="bind", read_only=True))
        try:
            self._container = self._create(client, settings, name, image, config, mounts)
        except docker.errors.APIError as exc:
            if self._socket is not None:
                self._socket.close()
            if mounts and "mount" in str(exc).lower():
                raise SocketUnusable(f"cannot bind-mount the socket directory: {exc}") from exc
            raise
        try:
            raw = self._container.attach_socket(
                params={"stdin": 1, "stdout": 1, "stderr": 0, "stream": 1}
            )
            self._attach = AttachStream(raw)
            self._container.start()
        except BaseException:
            self.close()
            raise

    @staticmethod
    def _create(
        client: Any,
        settings: SandboxSettings,
        name: str,
        image: str,
        config: SupervisorConfig,
        mounts: list[Any],
    ) -> Any:
        files = f"nr_inodes={settings.tmpfs_files}"
        work = f"size={settings.work_tmpfs_bytes},{files},mode=1777,nosuid,nodev,exec"
        tmp = f"size={settings.tmp_tmpfs_bytes},{files},mode=1777,noexec,nosuid,nodev"
        return client.containers.create(
            image,
            command=["python3", "-S", "-c", BOOTSTRAP, json.dumps(config)],
            name=name,
            labels={LABEL: settings.docker_label, OWNER_LABEL: owner_id()},
            user=f"{settings.docker_uid}:{settings.docker_uid}",
            network_mode="none",
            read_only=True,
            tmpfs={
                "/sandbox": work,
                "/tmp": tmp,
                "/var/tmp": tmp,
                "/dev/shm": tmp,  # in place of the engine's own, which has no nr_inodes
            },
            mem_limit=settings.container_memory_bytes,
            memswap_limit=settings.container_memory_bytes,
            pids_limit=settings.container_pids,
            nano_cpus=None
            if settings.container_cpus is None
            else int(settings.container_cpus * 1e9),
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            # The supervisor is the container's PID 1 (Docker's init would be a process the
            # program could signal and whose stdio it could open): it reaps every orphan, and
            # the kernel shields a namespace's init from the signals of its own processes.
            init=False,
            stdin_open=True,
            detach=False,  # with stdin_open: StdinOnce, so our disconnect closes its stdin
            tty=False,
            auto_remove=True,
            working_dir="/sandbox",
            # LD_BIND_NOW: see `_bwrap_argv` (local.py).
            environment={"LANG": "C.UTF-8", "PYTHONHASHSEED": "0", "LD_BIND_NOW": "1"},
            ipc_mode="private",
            log_config={"type": "none"},  # frames are for us, not for the engine's log files
            hostname="sandbox",
            mounts=mounts,
        )

    bootstrapped = False
    """True once `bootstrap` sent the supervisor's source (the pool then does not)."""

    def bootstrap(self, payload: bytes) -> None:
        """Send the supervisor's source on the attach stream, then take its connection on the
        Unix socket (`socket` transport); raises SocketUnusable where that does not work."""
        assert self._attach is not None
        self._attach.send(payload)
        self.bootstrapped = True
        if self._socket is not None:
            self._socket.accept(self._attach, self._start_timeout)

    def _transport(self) -> AttachStream | SupervisorSocket:
        assert self._attach is not None
        return self._socket if self._socket is not None and self._socket.connected else self._attach

    def send(self, data: bytes) -> None:
        self._transport().send(data)

    def recv(self, timeout: float) -> bytes:
        """The next supervisor bytes (see `Channel.recv`)."""
        return self._transport().recv(timeout)

    def died_of_oom(self) -> bool:
        try:
            self._container.reload()
        except docker.errors.NotFound:
            return False
        return bool(self._container.attrs.get("State", {}).get("OOMKilled"))

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for transport in (self._socket, self._attach):
            if transport is not None:
                try:
                    transport.close()
                except OSError as exc:
                    log.debug("closing a connection to the supervisor: %s", exc)
        container = getattr(self, "_container", None)
        if container is None:
            return
        try:
            container.remove(force=True)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as exc:
            if "already in progress" not in str(exc):
                log.warning("could not remove sandbox container %s: %s", container.id, exc)


def _remove_orphan_socket_dirs(parent: str, label: str) -> None:
    """Socket directories (`proctor-<label>-<pid>-*`) of services on this host that are gone
    (killed before they could remove theirs)."""
    prefix = f"proctor-{label}-"
    try:
        names = os.listdir(parent)
    except OSError:
        return
    host = socket.gethostname()
    for name in names:
        # mkdtemp's suffix has no "-": another label's directories never parse as ours
        pid, dash, suffix = name[len(prefix) :].partition("-")
        ours = name.startswith(prefix) and pid.isdigit() and dash and "-" not in suffix
        if ours and not _owner_alive(f"{host}/{pid}"):
            shutil.rmtree(os.path.join(parent, name), ignore_errors=True)


_DEFAULT_HOST = "unix:///var/run/docker.sock"


def engine_socket_error(url: str | None = None) -> str | None:
    """Why the engine's unix socket (`url`, else DOCKER_HOST, else the default) cannot be
    connected to, or None if it can (or the engine is not behind a unix socket).

    Checked before the Docker SDK is asked: its unix connection leaves its socket open when the
    connection fails (docker/docker-py#3356), which turns "no engine here" into a leaked socket.
    """
    host = url or os.environ.get("DOCKER_HOST") or _DEFAULT_HOST
    if not host.startswith("unix://"):
        return None
    path = host.removeprefix("unix://")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(5)
        try:
            probe.connect(path)
        except OSError as exc:
            return f"cannot connect to {path}: {exc}"
    return None


class DockerBackend(SupervisorPool):
    """Warm containers, each with a supervisor; see the module docstring and sandboxes/README.md."""

    name = "docker"

    def __init__(self, settings: SandboxSettings) -> None:
        unreachable = engine_socket_error(settings.docker_url)
        if unreachable is not None:
            raise SandboxUnavailable(f"no Docker engine reachable: {unreachable}")
        try:
            self._client = (
                docker.DockerClient(base_url=settings.docker_url, timeout=120)
                if settings.docker_url
                else docker.from_env(timeout=120)
            )
        except docker.errors.DockerException as exc:
            raise SandboxUnavailable(f"no Docker engine reachable: {exc}") from exc
        self._changed: str | None = None
        try:
            self._image_id = self._check_engine(settings.image)
        except BaseException:
            self._client.close()  # its connection pool, whatever went wrong
            raise
        removed = remove_containers(self._client, settings.docker_label)
        if removed:
            log.warning("removed %d leftover sandbox containers (label %s)", removed, LABEL)
        self._seq = 0
        self._seq_lock = threading.Lock()
        # Random, not id(self): identical worker processes on one engine would pick equal names.
        self._name_prefix = f"proctor-sandbox-{settings.docker_label}-{secrets.token_hex(4)}-"
        self._socket_dir: str | None = None  # None once the socket transport is off
        if settings.docker_transport == "socket":
            parent = tempfile.gettempdir()
            if settings.docker_socket_dir is not None:
                # One subdirectory per host name: services sharing the directory (containers
                # with it mounted) only ever sweep their own host's leftovers.
                parent = os.path.join(settings.docker_socket_dir, socket.gethostname())
                os.makedirs(parent, mode=0o700, exist_ok=True)
            _remove_orphan_socket_dirs(parent, settings.docker_label)
            self._socket_dir = tempfile.mkdtemp(
                prefix=f"proctor-{settings.docker_label}-{os.getpid()}-", dir=parent
            )
        self._sockets_root = self._socket_dir
        # The supervisor is the container's init: the program cannot signal it.
        super().__init__(settings, program_can_kill_supervisor=False)

    def _check_engine(self, image: str) -> str:
        """The id of the sandbox image, if the engine answers and holds it; else
        SandboxUnavailable says which not."""
        try:
            self._client.ping()
        except docker.errors.DockerException as exc:
            raise SandboxUnavailable(f"no Docker engine reachable: {exc}") from exc
        try:
            found: str = self._client.images.get(image).id
        except docker.errors.ImageNotFound as exc:
            raise SandboxUnavailable(
                f"sandbox image {image!r} not found: build it with "
                f"`sandboxes/images/build-offline.sh {image}`"
            ) from exc
        return found

    def environment_changed(self) -> str | None:
        return self._changed

    def same_environment(self, settings: SandboxSettings) -> SandboxSettings:
        return settings.model_copy(update={"image": self._image_id})

    def _check_image(self) -> None:
        """Before each start: whether the image's tag still names the image this backend opened
        with. Once it does not, `environment_changed` says so for good; containers are still
        made from the image opened with (by its id), never from the one the tag names now."""
        if self._changed is not None:
            return
        image = self._settings.image
        try:
            current: str | None = self._client.images.get(image).id
        except docker.errors.ImageNotFound:
            current = None
        except docker.errors.DockerException as exc:
            raise SandboxUnavailable(f"could not inspect the sandbox image: {exc}") from exc
        if current != self._image_id:
            self._changed = (
                f"the sandbox image {image!r} is {current or 'gone'} now, not {self._image_id}, "
                "the one this backend opened with"
            )
            log.error("docker sandboxes: %s", self._changed)

    def _start(self) -> ContainerChannel:
        with self._seq_lock:
            self._seq += 1
            seq = self._seq
        name = f"{self._name_prefix}{seq}"
        socket_dir = self._socket_dir
        try:
            self._check_image()
            channel = ContainerChannel(
                self._client,
                self._settings,
                name,
                self._image_id,
                socket_dir,
                self._supervisor_extra,
            )
            if socket_dir is None:
                return channel
            try:
                channel.bootstrap(bootstrap_payload())
            except BaseException:
                channel.close()
                raise
            return channel
        except SocketUnusable as exc:
            with self._seq_lock:
                if self._socket_dir is not None:
                    log.warning("docker sandboxes: %s; using the attach stream instead", exc)
                    self._socket_dir = None
            return self._start()
        except docker.errors.DockerException as exc:
            raise SandboxUnavailable(f"could not start a sandbox container: {exc}") from exc

    def _after_close(self) -> None:
        """Remove this backend's containers (any the pool lost track of, too), close the engine
        client and delete the socket directory."""
        try:
            remove_containers(
                self._client,
                self._settings.docker_label,
                owner=owner_id(),
                name_prefix=self._name_prefix,
            )
        finally:
            self._client.close()
            if self._sockets_root is not None:
                shutil.rmtree(self._sockets_root, ignore_errors=True)
                if self._settings.docker_socket_dir is not None:
                    # this host name's directory, unless another service of the host uses it
                    with contextlib.suppress(OSError):
                        os.rmdir(os.path.dirname(self._sockets_root))
