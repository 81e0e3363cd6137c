"""One request (a work directory, the build, the executions, the cleanup) and the supervisor's
`main`: set itself up, then serve requests until its stream ends."""

from __future__ import annotations

import base64
import errno
import json
import os
import signal
import sys
from binascii import a2b_base64  # bound here, as in `step`
from time import monotonic
from typing import TYPE_CHECKING, Any

from .child import check_oom_adj, child_main
from .forked import SITE_PATH, STDLIB_PATH
from .framing import (
    KEEP,
    OOM_KILLED,
    STATUS,
    Outbox,
    read_frame,
    write_done,
    write_frame,
    write_result,
    write_skipped,
)
from .kernel import (
    PR_SET_CHILD_SUBREAPER,
    PR_SET_DUMPABLE,
    PR_SET_NO_NEW_PRIVS,
    install_filter,
    prctl,
)
from .running import READ_BUFFER, read_some
from .shared import request_files
from .step import StepContext, forks_itself, run_step
from .template import TEMPLATE_STATE, Template
from .tree import Reaper

if TYPE_CHECKING:
    from .config import SupervisorConfig

PROTOCOL_VERSION = 1


def _safe_path(root: str, name: str) -> str:
    if "/" not in name and name not in ("", ".", ".."):
        return f"{root}/{name}"  # what the normalised join below is for such a name
    path = os.path.normpath(os.path.join(root, name))
    if os.path.isabs(name) or not path.startswith(root + os.sep):
        raise ValueError(f"file name escapes the work directory: {name!r}")
    return path


_SYSVIPC = ("/proc/sysvipc/shm", "/proc/sysvipc/sem", "/proc/sysvipc/msg")


def _ipc_objects_left() -> bool:
    """Whether a System V shared memory segment, semaphore set or message queue exists in this
    sandbox's IPC namespace. They outlive the processes that made them, so a run could leave
    data (and memory) to the next; the supervisor then asks for a new sandbox. Each file is a
    header line, then a line per object."""
    for path in _SYSVIPC:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            n = read_some(fd)
        finally:
            os.close(fd)
        head = READ_BUFFER[:n]
        if head[head.find(b"\n") + 1 :].strip():
            return True
    return False


def _rmtree(path: str, ignore_errors: bool = False) -> None:
    """`shutil.rmtree`, imported on first use: only a run that leaves a directory behind needs
    it, and every fork of a supervisor that loaded it copies the mappings of its libraries."""
    import shutil

    shutil.rmtree(path, ignore_errors=ignore_errors)


def _remove_tree(path: str) -> None:
    """Remove the directory `path` and what it holds (never following a symbolic link): a
    directory of plain files, as a run usually leaves its work directory, with a call per
    file; anything else with `shutil.rmtree`."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return
    except OSError:
        _rmtree(path, ignore_errors=True)
        return
    try:
        # listdir of the path: of the descriptor it would dup it and reset its flags (the run's
        # processes are all gone, nothing can replace the directory meanwhile)
        names = os.listdir(path)
        for name in names:
            os.unlink(name, dir_fd=fd)  # a directory fails (EISDIR): then rmtree below
        os.rmdir(path)
    except OSError:
        _rmtree(path, ignore_errors=True)
    finally:
        os.close(fd)


def _empty_dir(path: str) -> None:
    try:
        names = os.listdir(path)
    except FileNotFoundError:
        return
    for name in names:
        full = os.path.join(path, name)
        if os.path.isdir(full) and not os.path.islink(full):
            _rmtree(full, ignore_errors=True)
        else:
            try:  # noqa: SIM105 - not contextlib.suppress: more objects each request touches
                os.unlink(full)
            except FileNotFoundError:
                pass


_UMASK = [0o777]
"""The supervisor's umask (`main` reads it): what O_CREAT's mode loses."""


class _Setup:
    """What every request of this supervisor shares, worked out once (in `main`), not in each
    request: each object a request computes or touches is a page it writes.

    `workdir`: the requests' work directory; `env`: the programs' environment (`_environment`);
    `owner`: (uid, gid) their files are given (None: the supervisor's own); `emptied`: the
    directories emptied after each request; `template`: what forks every step's process
    (`template.Template`, started by `main` before it reads a request)."""

    __slots__ = ("cfg", "emptied", "env", "owner", "reaper", "template", "workdir")

    def __init__(self, cfg: SupervisorConfig, reaper: Reaper) -> None:
        self.cfg = cfg
        self.reaper = reaper
        self.workdir = os.path.join(cfg["work_root"], "work")
        self.env = _environment(self.workdir, cfg["tmpdir"] or "/tmp")
        uid, gid = cfg["run_uid"], cfg["run_gid"]
        self.owner = None
        if uid is not None and os.geteuid() == 0:
            self.owner = (uid, uid if gid is None else gid)
        self.emptied = (cfg["work_root"], *cfg["wipe"])
        self.template = Template(0, None)


def _prepare_workdir(setup: _Setup, files: dict[str, bytes]) -> str:
    workdir, owner = setup.workdir, setup.owner
    try:
        os.mkdir(workdir, 0o700)
    except FileExistsError:  # not removed after the last request
        _rmtree(workdir)
        os.mkdir(workdir, 0o700)
    nested = False
    for name, data in files.items():
        path = _safe_path(workdir, name)
        if "/" in name:
            nested = True
            os.makedirs(os.path.dirname(path), 0o700, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o700)
        try:
            if _UMASK[0] & 0o700:  # else the new file has its mode already
                os.fchmod(fd, 0o700)
            if owner is not None:
                os.fchown(fd, *owner)
            written = os.write(fd, data)  # usually the whole file at once
            if written < len(data):
                view = memoryview(data)[written:]
                while view:
                    view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
    if owner is not None:
        os.chown(workdir, *owner)
        if nested:  # the subdirectories (their files are owned already)
            for dirpath, dirnames, _ in os.walk(workdir):
                for d in dirnames:
                    os.chown(os.path.join(dirpath, d), *owner)
    return workdir


def _environment(workdir: str, tmpdir: str) -> dict[str, str]:
    """The programs' environment: made once (`_Setup`), the same object in every request of
    this supervisor, so that `forked.adopt_environ` has nothing to redo."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": workdir,
        "TMPDIR": tmpdir,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }


def _build_limits(limits: dict[str, Any]) -> dict[str, Any]:
    """The build step's limits: the run's, with `build_memory_bytes` when the request sets it
    (a problem's own memory limit bounds the program, not its compiler)."""
    build_memory = limits.get("build_memory_bytes")
    return limits if build_memory is None else {**limits, "memory_bytes": build_memory}


def _build_context(
    build: dict[str, Any], limits: dict[str, Any], workdir: str, setup: _Setup
) -> StepContext:
    """The build step: its own CPU limit (`build_cpu_s`), twice that and a second more of wall
    time, and the build's limits (`_build_limits`)."""
    cpu = float(limits["build_cpu_s"])
    return StepContext(
        build["argv"],
        a2b_base64(build["stdin"]),
        workdir,
        setup.env,
        _build_limits(limits),
        cpu,
        cpu * 2 + 1,
        setup.reaper,
        setup.cfg,
        setup.template,
    )


def _run_request(req: dict[str, Any], setup: _Setup, out: Outbox) -> None:
    cfg, reaper, env, limits = setup.cfg, setup.reaper, setup.env, req["limits"]
    files, shared_keys = request_files(req)
    setup.template.share(req.get("shared"))
    workdir = _prepare_workdir(setup, files)
    leftover = 0
    oom = False
    try:
        build = req.get("build")
        build_ok = True
        if build is not None:
            result, _, left = run_step(_build_context(build, limits, workdir, setup))
            leftover += left
            oom = oom or result[OOM_KILLED]
            build_ok = result[STATUS] == "ok"
            write_result(out, -1, result)
        cpu_left = float(limits["cpu_budget_s"])
        wall_end = monotonic() + float(limits["wall_cap_s"])
        for i, ex in enumerate(req["executions"]):
            wall_left = wall_end - monotonic()
            if not build_ok or cpu_left <= 0 or wall_left <= 0:
                write_skipped(out, i)
                continue
            ctx = StepContext(
                ex["argv"],
                a2b_base64(ex["stdin"]),
                workdir,
                env,
                limits,
                cpu_left,
                wall_left,
                reaper,
                cfg,
                setup.template,
                # before any program of this request ran, its shared files are as sent
                shared_keys if build is None and i == 0 else None,
            )
            result, used, left = run_step(ctx)
            leftover += left
            oom = oom or result[OOM_KILLED]
            cpu_left -= used
            write_result(out, i, result)
        # A process outlived its step, the kernel killed one, or System V IPC objects remain: the
        # next run starts in a new sandbox (`ipc_namespace`: ours alone, so all are a run's).
        ipc_left = cfg["ipc_namespace"] and _ipc_objects_left()
        # A program killed the template: the rest ran exec'd, the next request gets a new one.
        lost = setup.template.lost
        write_done(out, leftover, leftover > 0 or oom or ipc_left or lost)
    finally:
        # After the results are out (the service reads them while we clean), before the next
        # request is read: no run ever sees what an earlier one left.
        _remove_tree(workdir)
        for path in setup.emptied:
            _empty_dir(path)


def main(config_json: str) -> None:
    """The supervisor: `config_json` is a `SupervisorConfig` the backend made (and checked) with
    `supervisor_config`."""
    cfg: SupervisorConfig = json.loads(config_json)
    prctl(PR_SET_DUMPABLE, 0)  # our /proc entries become root-owned: no peeking at our pipes
    # Inherited by every process of every run, and irrevocable: no exec gains privileges.
    prctl(PR_SET_NO_NEW_PRIVS, 1)
    if cfg["seccomp"]:
        install_filter(base64.b64decode(cfg["seccomp"]))  # needs no-new-privileges
    check_oom_adj()
    prctl(PR_SET_CHILD_SUBREAPER, 1)  # orphans of a run come back to us to be killed and reaped
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    os.makedirs(cfg["work_root"], exist_ok=True)
    _UMASK[0] = os.umask(0o022)
    os.umask(_UMASK[0])  # unchanged: the programs inherit it
    sys.stdout.flush()
    KEEP.append(sys.stdout)
    out = Outbox(1)
    sys.stdout = sys.stderr  # nothing but frames may reach the backend's stream
    STDLIB_PATH[:] = sys.path
    import site

    site.ENABLE_USER_SITE = False
    site.main()  # what `python3 -I` adds: the system's site-packages (numpy etc.)
    SITE_PATH[:] = sys.path
    setup = _Setup(cfg, Reaper(cfg["pid_namespace"]))
    TEMPLATE_STATE[:] = [cfg, setup.env]  # what a step's process the supervisor forks runs with
    if not forks_itself(cfg):
        # Before any request is read (and before the backend's socket is connected): the
        # template holds nothing of any run, ever.
        setup.template = Template.start(cfg, setup.env, child_main)
        setup.reaper.spared = setup.template.pid
    # Frames are read from a descriptor (`read_frame`): the backend sends nothing past the
    # bootstrap payload before our "ready" frame, so sys.stdin's buffer holds nothing of them.
    stream = 0
    if cfg["connect"]:
        # The backend's Unix socket (docker `socket` transport): frames travel there from now
        # on; stdin/stdout stay open but unused. The token tells the backend it is us.
        import socket

        try:
            conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # close-on-exec
            conn.settimeout(30.0)
            conn.connect(cfg["connect"])
            conn.settimeout(None)
        except OSError as exc:
            write_frame(out, {"kind": "error", "message": f"connect: {exc}", "socket": False})
            return
        KEEP.append(conn)
        out = Outbox(conn.fileno())
        stream = conn.fileno()
        write_frame(out, {"kind": "token", "token": cfg["token"]}, flush=False)
    write_frame(out, {"kind": "ready", "pid": os.getpid(), "version": PROTOCOL_VERSION})
    while True:
        req = read_frame(stream)
        if req is None:
            return
        try:
            _run_request(req, setup, out)
        except OSError as exc:
            if exc.errno == errno.EPIPE:
                return
            write_frame(out, {"kind": "error", "message": f"{type(exc).__name__}: {exc}"})
        except Exception as exc:  # noqa: BLE001 - reported; the backend discards this sandbox
            write_frame(out, {"kind": "error", "message": f"{type(exc).__name__}: {exc}"})
