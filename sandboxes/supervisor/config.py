"""How a backend configures the supervisor it starts: `SupervisorConfig`, sent as JSON on the
interpreter's command line."""

from __future__ import annotations

import base64
import os
from typing import Any, TypedDict

from .seccomp import seccomp_program


class SupervisorConfig(TypedDict):
    """How a backend sets up the supervisor it starts (JSON on the command line). A backend
    gives `work_root` and what differs from `CONFIG_DEFAULTS`; `supervisor_config` fills in
    the rest and refuses a key it does not know."""

    work_root: str
    """Where each request's work directory is made (emptied after each request)."""
    wipe: list[str]
    """Directories emptied after each request (the jail's writable tmpfs mounts)."""
    run_uid: int | None
    """The uid programs run as, when the supervisor is root (None: the supervisor's own)."""
    run_gid: int | None
    """Their gid (None: the same number as `run_uid`)."""
    set_nproc: bool
    """Whether RLIMIT_NPROC bounds a run's processes (not where every sandbox shares one uid,
    as docker's: the pids cgroup bounds them there)."""
    nofile: int
    """RLIMIT_NOFILE of the programs."""
    max_files: int
    """Files a run may create in one file system, polled (0: not polled, as where the tmpfs
    has an inode limit)."""
    pid_namespace: bool
    """The supervisor is its jail's init: every process left at a step's end is killed."""
    ipc_namespace: bool
    """System V IPC objects left after a run are the run's: the sandbox is then recycled."""
    fork_python: bool
    """`python3` steps run in a fork of the template (see `_python_invocation`)."""
    tmpdir: str | None
    """TMPDIR of the programs (None: /tmp)."""
    connect: str | None
    """The backend's Unix socket, used for frames instead of stdin/stdout."""
    token: str
    """Sent first on that socket, so the backend knows it is us."""
    seccomp: str
    """The seccomp filter the supervisor installs on itself (base64 of classic BPF; "": none).
    Built here on the host for its machine, which is the jail's: every backend shares the
    host's kernel."""


def _host_filter() -> str:
    code = seccomp_program(os.uname().machine)
    return "" if code is None else base64.b64encode(code).decode("ascii")


CONFIG_DEFAULTS: dict[str, Any] = {
    "wipe": [],
    "run_uid": None,
    "run_gid": None,
    "set_nproc": True,
    "nofile": 256,
    "max_files": 0,
    "pid_namespace": False,
    "ipc_namespace": False,
    "fork_python": True,
    "tmpdir": None,
    "connect": None,
    "token": "",
    "seccomp": _host_filter(),
}


_TEST_ONLY_KEYS = frozenset({"_fork_supervisor"})
"""Keys only a test adds (`SupervisorPool._supervisor_extra`), never a backend. `_fork_supervisor`:
no template; programs fork from the supervisor itself, holding its memory, as before the
template (`step._call`), so that the remnant tests can show they catch that."""


def supervisor_config(given: dict[str, Any]) -> SupervisorConfig:
    """`given` over the defaults; a key the supervisor does not know is a backend's mistake."""
    unknown = set(given) - set(SupervisorConfig.__annotations__) - _TEST_ONLY_KEYS
    if unknown or "work_root" not in given:
        raise ValueError(f"bad supervisor configuration: unknown {sorted(unknown)} or no work_root")
    config: SupervisorConfig = {**CONFIG_DEFAULTS, **given}  # type: ignore[typeddict-item]
    return config
