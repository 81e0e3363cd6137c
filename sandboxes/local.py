"""The `local` backend (bubblewrap namespaces on this host) and the `unsafe` one (no namespaces).

Each pool slot is one long-lived bubblewrap jail with its own network, PID, mount, IPC and UTS
namespaces, a view of the host limited to /usr and a few files of /etc, private tmpfs /tmp,
/var/tmp, /dev/shm and work directory, and a clean environment. The supervisor inside forks a
child per step, so no namespace is created per request (creating one costs far more than a
run). When the service runs as root, programs run as a uid leased to that jail alone: they
cannot signal the supervisor, and RLIMIT_NPROC counts only their own processes.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import selectors
import shutil
import signal
import subprocess
import tempfile
import threading
from typing import IO

from sandboxes._pool import SupervisorPool
from sandboxes.api import SandboxUnavailable
from sandboxes.settings import SandboxSettings
from sandboxes.supervisor import (
    BOOTSTRAP,
    SupervisorConfig,
    child_pids,
    descendant_pids,
    supervisor_config,
)

__all__ = ["LocalBackend", "UnsafeBackend"]

log = logging.getLogger("sandboxes")

_ETC = (
    "alternatives",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "python3",
    "python3.11",
    "java-17-openjdk",  # the JDK's configuration (its conf/ links there)
)
_ROOT_DIRS = ("bin", "lib", "lib32", "lib64", "libx32", "sbin")


class UidLease:
    """A uid nobody else on this host uses while we hold the flock on its lock file."""

    def __init__(self, settings: SandboxSettings) -> None:
        os.makedirs(settings.uid_lock_dir, mode=0o700, exist_ok=True)
        start = (os.getpid() * 7) % settings.run_uid_count
        for i in range(settings.run_uid_count):
            uid = settings.run_uid_base + (start + i) % settings.run_uid_count
            fd = os.open(
                os.path.join(settings.uid_lock_dir, f"uid-{uid}.lock"),
                os.O_RDWR | os.O_CREAT | os.O_CLOEXEC,
                0o600,
            )
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            self.uid = uid
            self._fd = fd
            return
        raise SandboxUnavailable("no free sandbox uid: raise run_uid_count")

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class ProcessChannel:
    """A supervisor in a child process of ours, framed over its stdin and stdout pipes."""

    def __init__(
        self,
        argv: list[str],
        lease: UidLease | None = None,
        workdir: str | None = None,
        *,
        jailed: bool,
    ) -> None:
        self._jailed = jailed
        self._owned = contextlib.ExitStack()  # given back when the channel closes, lease first
        if workdir is not None:
            self._owned.callback(shutil.rmtree, workdir, ignore_errors=True)
        if lease is not None:
            self._owned.callback(lease.release)
        # The pool's close and a run's retirement may close one channel at the same time; a
        # second pass would close the uid lease's descriptor again, by then maybe someone else's.
        self._close_lock = threading.Lock()
        self._closed = False
        self._stderr: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 - closed in close()
        try:
            self._proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._stderr,
                env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONHASHSEED": "0"},
                close_fds=True,
                start_new_session=True,
            )
        except OSError:
            self._owned.close()
            raise
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._in = self._proc.stdin
        self._out = self._proc.stdout.fileno()
        os.set_blocking(self._out, False)
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._out, selectors.EVENT_READ)

    def send(self, data: bytes) -> None:
        self._in.write(data)
        self._in.flush()

    def recv(self, timeout: float) -> bytes:
        if not self._sel.select(timeout):
            raise TimeoutError
        try:
            return os.read(self._out, 1 << 20)
        except BlockingIOError:
            return self.recv(0.01)

    def died_of_oom(self) -> bool:
        return False

    def stderr_text(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read(4000).decode("utf-8", "replace").strip()

    def close(self) -> None:
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
            self._shut_down()

    def _shut_down(self) -> None:
        if self._proc.poll() is None:
            if self._jailed:
                # bwrap's child is the jail's init (the supervisor): killing it from out here ends
                # the whole PID namespace, and bwrap then reaps it and exits by itself.
                for pid in child_pids(self._proc.pid):
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                try:
                    self._proc.wait(timeout=2.0)
                except subprocess.TimeoutExpired:
                    self._proc.kill()
            else:
                # No namespace: a run in progress would outlive its supervisor. Kill it first.
                for pid in descendant_pids(self._proc.pid):
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                self._proc.kill()
        self._proc.wait()
        self._sel.close()
        for f in (self._proc.stdin, self._proc.stdout, self._stderr):
            if f is not None:
                with contextlib.suppress(BrokenPipeError):  # unsent bytes for a dead jail
                    f.close()
        self._owned.close()


def _bwrap_argv(settings: SandboxSettings, config: SupervisorConfig, as_root: bool) -> list[str]:
    bwrap = shutil.which(settings.bwrap)
    if bwrap is None:
        raise SandboxUnavailable(
            f"{settings.bwrap!r} not found: install Debian's `bubblewrap` package, or choose "
            "the `unsafe` sandbox backend explicitly (no isolation)"
        )
    argv = [bwrap]
    if not as_root:
        argv += ["--unshare-user"]
    argv += [
        "--unshare-ipc",
        "--unshare-pid",
        "--as-pid-1",
        "--unshare-net",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--die-with-parent",
        "--new-session",
        "--clearenv",
        "--setenv",
        "PYTHONHASHSEED",
        "0",
        # Every symbol the supervisor's libraries use bound at start-up, not at first call: a
        # forked run's first calls (the confinement's setuid, setrlimit...) would otherwise bind
        # them in its copy, writing (copy-on-write faulting) the binding tables in every run.
        "--setenv",
        "LD_BIND_NOW",
        "1",
        "--hostname",
        "sandbox",
        "--ro-bind",
        "/usr",
        "/usr",
    ]
    for name in _ROOT_DIRS:
        path = "/" + name
        if os.path.islink(path):
            argv += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            argv += ["--ro-bind", path, path]
    argv += [
        "--perms",
        "0755",
        "--dir",
        "/etc",
    ]  # else bwrap makes it 0700: unusable by the run uid
    for name in _ETC:
        path = "/etc/" + name
        if os.path.exists(path):
            argv += ["--ro-bind", path, path]
    tmp = str(settings.tmp_tmpfs_bytes)
    argv += ["--proc", "/proc", "--dev", "/dev"]
    for path in ("/tmp", "/var/tmp", "/dev/shm"):
        argv += ["--perms", "1777", "--size", tmp, "--tmpfs", path]
    argv += ["--perms", "0755", "--size", str(settings.local_work_bytes), "--tmpfs", "/sandbox"]
    argv += ["--chdir", "/sandbox", "--"]
    argv += [settings.python, "-S", "-c", BOOTSTRAP, json.dumps(config)]
    return argv


class LocalBackend(SupervisorPool):
    """Supervisors in bubblewrap jails; see the module docstring and sandboxes/README.md."""

    name = "local"

    def __init__(self, settings: SandboxSettings) -> None:
        self._as_root = os.geteuid() == 0
        if not os.path.exists(settings.python):
            raise SandboxUnavailable(f"{settings.python} not found (the sandbox's interpreter)")
        # fails early when bubblewrap is missing
        _bwrap_argv(settings, supervisor_config({"work_root": "/sandbox"}), self._as_root)
        # The supervisor is the jail's init (bwrap --as-pid-1): the program cannot signal it.
        super().__init__(settings, program_can_kill_supervisor=False)

    def _start(self) -> ProcessChannel:
        lease = UidLease(self._settings) if self._as_root else None
        config = supervisor_config(
            {
                "work_root": "/sandbox",
                "run_uid": lease.uid if lease else None,
                "pid_namespace": True,
                "ipc_namespace": True,
                "wipe": ["/tmp", "/var/tmp", "/dev/shm"],
                "max_files": self._settings.tmpfs_files,  # bubblewrap's tmpfs has no nr_inodes
                "set_nproc": self._as_root,
                "fork_python": self._settings.fork_python,
                **self._supervisor_extra,
            }
        )
        argv = _bwrap_argv(self._settings, config, self._as_root)
        channel = ProcessChannel(argv, lease, jailed=True)
        try:
            # A jail that cannot be built shows up as an immediate exit with bwrap's message.
            if channel._proc.wait(timeout=0.05) is not None:
                raise SandboxUnavailable(
                    "the local sandbox cannot start here (namespaces unavailable?): "
                    f"{channel.stderr_text() or 'bwrap exited'}; choose the `docker` backend, "
                    "or `unsafe` explicitly to run without isolation"
                )
        except subprocess.TimeoutExpired:
            pass
        except BaseException:
            channel.close()
            raise
        return channel


class UnsafeBackend(SupervisorPool):
    """The same supervisor with no namespaces: rlimits, a private directory and kill-after-run
    only. For machines without namespaces; the operator must choose it explicitly."""

    name = "unsafe"

    def __init__(self, settings: SandboxSettings) -> None:
        log.warning(
            "SANDBOX BACKEND 'unsafe': model-written code runs on this host WITHOUT namespaces; "
            "it can read files, use the network and see other processes. Use only on a machine "
            "you are prepared to lose."
        )
        self._as_root = os.geteuid() == 0
        if not os.path.exists(settings.python):
            raise SandboxUnavailable(f"{settings.python} not found (the sandbox's interpreter)")
        super().__init__(settings, program_can_kill_supervisor=not self._as_root)

    def _start(self) -> ProcessChannel:
        lease = UidLease(self._settings) if self._as_root else None
        workdir = tempfile.mkdtemp(prefix="proctor-unsafe-")
        os.chmod(workdir, 0o755)
        config = supervisor_config(
            {
                "work_root": workdir,
                "run_uid": lease.uid if lease else None,
                "pid_namespace": False,
                "wipe": [],
                "set_nproc": self._as_root,
                "tmpdir": workdir,
                "fork_python": self._settings.fork_python,
                **self._supervisor_extra,
            }
        )
        argv = [self._settings.python, "-S", "-c", BOOTSTRAP, json.dumps(config)]
        return ProcessChannel(argv, lease, workdir, jailed=False)
