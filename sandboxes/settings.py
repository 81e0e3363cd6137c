"""Operator settings for the sandbox backends, with their defaults in one place.

The service nests `SandboxSettings` as `sandbox` in its own settings, so each field is also an
environment variable: `PROCTOR_SANDBOX__BACKEND=docker`, `PROCTOR_SANDBOX__POOL_SIZE=8`, ...
Per-request limits (CPU budget, memory, output, processes) are not here: they come from the spec
through `sandboxes.api.Limits`. These are the caps of the sandboxes themselves.
"""

from __future__ import annotations

import os
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = ["DEFAULT_IMAGE", "SandboxSettings"]

MiB = 1024 * 1024
DEFAULT_IMAGE = "proctor-sandbox:2"
"""The tag `sandboxes/images/build-offline.sh` builds by default."""


def _default_pool_size() -> int:
    return max(1, os.cpu_count() or 1)


class SandboxSettings(BaseModel):
    """How untrusted code is run. Validators refuse values that would weaken isolation."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    backend: Literal["local", "docker", "unsafe"] = "local"
    """`local`: bubblewrap namespaces on this host (the embedded default; refuses to run where
    namespaces are unavailable). `docker`: warm containers. `unsafe`: the same supervisor with no
    namespaces at all, for machines that have none; it logs a loud warning and must be chosen
    explicitly."""

    pool_size: int = Field(default_factory=_default_pool_size, ge=1, le=256)
    """Supervisors (local, unsafe) or containers (docker) kept warm; each runs one request at a
    time, so this is the number of requests executed concurrently. Default: the CPU count."""

    recycle_after: int = Field(default=1000, ge=1, le=1_000_000)
    """Replace a supervisor or container after this many requests (also after any error, an
    out-of-memory kill or a process that outlived its run)."""

    start_timeout_s: float = Field(default=60.0, gt=0, le=600)
    """How long starting one sandbox (and its supervisor's hello) may take before it counts as
    failed. A request waits for a free sandbox as long as the pool is busy (first come, first
    served); it raises SandboxUnavailable only when no sandbox can be started."""

    answer_margin_s: float = Field(default=30.0, gt=0, le=600)
    """A sandbox that has not answered within the request's own caps plus this margin is
    considered hung: it is destroyed and the request raises SandboxError (infra_error)."""

    fork_python: bool = True
    """Run a step whose argv is the sandbox's own `python3` on a script (or `-c`), with flags
    among -I -E -S -B -s -u, in a fork of the sandbox's clean template (an interpreter that never
    holds anything of a request; sandboxes/README.md) instead of exec'ing a fresh interpreter:
    the same confinement, without a fresh interpreter's start-up. Differences a program can
    notice: `sys.flags` and /proc/self/cmdline are the supervisor's, and modules the
    supervisor imported (json, base64, selectors, ...) are already in `sys.modules`."""

    python: str = "/usr/bin/python3"
    """Interpreter that runs the supervisor on the host (local, unsafe). It must live under /usr
    (the only host tree the local sandbox sees). Inside containers `python3` from the image runs."""

    # --- local backend ---------------------------------------------------------------------------
    bwrap: str = "bwrap"
    """The bubblewrap executable (Debian package `bubblewrap`)."""

    run_uid_base: int = Field(default=61000, ge=1000, le=2**31 - 2)
    """When the service runs as root, programs run as a uid of their own, one per live supervisor,
    taken from [run_uid_base, run_uid_base + run_uid_count). A uid per supervisor keeps
    RLIMIT_NPROC per run and stops a program from signalling its supervisor."""

    run_uid_count: int = Field(default=2000, ge=1, le=100_000)
    """Size of the uid range above; uids are leased with lock files so that several processes
    of the service never share one."""

    uid_lock_dir: str = "/run/proctor-sandbox"
    """Where the uid leases (flock'd files) live."""

    local_work_bytes: int = Field(default=256 * MiB, ge=16 * MiB, le=16384 * MiB)
    """Size of the tmpfs holding a run's work directory (local backend)."""

    # --- docker backend --------------------------------------------------------------------------
    image: str = Field(default=DEFAULT_IMAGE, min_length=1)
    """Sandbox image (see sandboxes/images/)."""

    docker_url: str | None = None
    """Docker engine address; None means the environment's (DOCKER_HOST or the local socket)."""

    docker_label: str = Field(default="proctor", min_length=1, max_length=64, pattern=r"^[\w.-]+$")
    """Value of the `io.proctor.sandbox` label on our containers. At shutdown a process removes
    the containers it started; at start-up, any with this label whose owning process (on this host)
    is gone."""

    docker_uid: int = Field(default=10001, ge=1000, le=2**31 - 2)
    """Non-root uid (and gid) the container's processes run as."""

    docker_transport: Literal["socket", "attach"] = "socket"
    """How the service talks to a container's supervisor. `socket`: a Unix socket in a
    per-container host directory bind-mounted read-only, connected once at start-up and removed
    from the directory before any program runs (bypasses the engine: less CPU per request in
    dockerd and containerd-shim). Needs the engine on this host, seeing the service's
    file system at `docker_socket_dir`; where that fails (a remote engine, a service in a
    container without that directory shared) the backend falls back to `attach` with a
    warning. `attach`: the container's attached stdin/stdout through the engine."""

    docker_socket_dir: str | None = None
    """Where the per-container socket directories are made (`socket` transport), in a
    subdirectory named by the host name; the same path must name the same directory for the
    engine. None: a private directory under the system's temporary directory."""

    container_memory_bytes: int = Field(default=1024 * MiB, ge=64 * MiB, le=65536 * MiB)
    """Memory limit of one container (memory = memory+swap, i.e. no swap), tmpfs included. The
    per-request `Limits.memory_bytes` is applied inside as RLIMIT_AS; this is the backstop."""

    container_pids: int = Field(default=96, ge=16, le=32768)
    """pids limit of one container (threads count, the supervisor included): docker's bound on
    a run's processes, as RLIMIT_NPROC (`Limits.max_processes`, 64) is local's, so it caps
    `max_processes` here. Keep it near that: a fork bomb keeps every allowed process runnable,
    and the supervisor, one task among them, must still get enough CPU to stop it (how much
    longer that takes at 256: benchmarks/HISTORY.md)."""

    container_cpus: float | None = Field(default=None, gt=0, le=1024)
    """CPU quota of one container (None: no quota). CPU budgets are CPU time, so a quota only
    changes wall time, not verdicts."""

    work_tmpfs_bytes: int = Field(default=256 * MiB, ge=16 * MiB, le=16384 * MiB)
    """Size of the container's work tmpfs (/sandbox)."""

    tmp_tmpfs_bytes: int = Field(default=64 * MiB, ge=1 * MiB, le=16384 * MiB)
    """Size of each of /tmp, /var/tmp and /dev/shm in a sandbox (local and docker)."""

    tmpfs_files: int = Field(default=16384, ge=64, le=10_000_000)
    """Files and directories each of a sandbox's file systems (the work directory's, /tmp,
    /var/tmp, /dev/shm) may hold. Each costs kernel memory no size limit counts, and they must
    all be deleted after the run. docker: the tmpfs `nr_inodes` (one more gives ENOSPC); local
    (bubblewrap cannot set it): the run is stopped as a runtime_error once one holds more."""

    @field_validator("python")
    @classmethod
    def _python_under_usr(cls, value: str) -> str:
        if not os.path.isabs(value) or not os.path.normpath(value).startswith("/usr/"):
            raise ValueError("python must be an absolute path under /usr (visible in the sandbox)")
        return value

    @field_validator("uid_lock_dir", "docker_socket_dir")
    @classmethod
    def _absolute(cls, value: str | None) -> str | None:
        if value is not None and not os.path.isabs(value):
            raise ValueError("must be an absolute path")
        return value

    @model_validator(mode="after")
    def _uid_range_not_root(self) -> SandboxSettings:
        if self.run_uid_base + self.run_uid_count > 2**31 - 1:
            raise ValueError("run_uid_base + run_uid_count overflows the uid space")
        if self.container_memory_bytes <= self.work_tmpfs_bytes:
            raise ValueError("container_memory_bytes must exceed work_tmpfs_bytes")
        return self
