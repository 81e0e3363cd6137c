"""The trusted supervisor that runs inside every sandbox (standard library only, Python >= 3.10).

It is long-lived: a backend starts it once per sandbox (a bubblewrap jail, a container, or a plain
process for the `unsafe` backend) and sends it one request at a time as length-prefixed JSON frames
on stdin; results come back the same way on stdout. The backend does not run these files from disk:
it starts the interpreter with `BOOTSTRAP` (below), which reads the sources of `JAIL_MODULES` from
stdin and executes each into a module object registered in `sys.modules` under its name in this
package (nothing is written to disk), so the same code runs in every backend and the service's files
need not be visible.

Per request (`request`): a fresh private work directory with the request's files, then for the
build step and each execution a child (`step`), forked by the clean template (`template`), which
reads its parameters from its stdin pipe and, before `exec`: starts its own session,
sets rlimits (CPU, AS, NPROC, FSIZE, NOFILE, CORE), becomes the run user (when the supervisor is
root), sets no-new-privileges and gets a clean environment; a `python3` step may instead run in the
fork itself (`forked`). The supervisor is a child subreaper, so every process of the run, orphaned
or not, is eventually reaped here; the CPU time of all of them (from `wait4`, and `/proc/<pid>/stat`
while they are alive) is charged to the request's budget (`tree`). After each execution everything
the run left behind is killed and reaped; after each request the work directory and the private
/tmp, /var/tmp and /dev/shm are emptied.

Frames travel on stdin/stdout, or, when the config names a Unix socket (`connect`, the docker
backend's `socket` transport), on that socket: the supervisor connects once at start, sends
{"kind": "token", "token": ...} and uses the connection for every frame after.

Frames (`framing`): 4-byte big-endian length + UTF-8 JSON. Backend -> supervisor: a request object
(see `request._run_request`). Supervisor -> backend: {"kind": "ready"} once, then per request one
{"kind": "result", "index": i, "result": {...}} per step (index -1 is the build) and
{"kind": "done", "recycle": bool, ...}, all flushed together at the end; or
{"kind": "error", "message": str} when the supervisor itself failed (the backend then discards
this sandbox).
"""

from __future__ import annotations

from .config import CONFIG_DEFAULTS, SupervisorConfig, supervisor_config
from .seccomp import (
    ARG_CHECKED,
    LAST_REVIEWED_SYSCALL,
    NOT_IMPLEMENTED,
    REFUSED,
    SECCOMP_ARCHES,
    SYSCALL_NUMBERS,
    seccomp_program,
    syscall_numbers,
)
from .step import classify
from .tree import child_pids, descendant_pids

__all__ = [
    "ARG_CHECKED",
    "BOOTSTRAP",
    "CONFIG_DEFAULTS",
    "JAIL_MODULES",
    "LAST_REVIEWED_SYSCALL",
    "NOT_IMPLEMENTED",
    "REFUSED",
    "SECCOMP_ARCHES",
    "SYSCALL_NUMBERS",
    "SupervisorConfig",
    "child_pids",
    "classify",
    "descendant_pids",
    "seccomp_program",
    "supervisor_config",
    "syscall_numbers",
]

JAIL_MODULES = (
    "kernel",
    "framing",
    "tree",
    "forked",
    "shared",
    "template",
    "child",
    "running",
    "step",
    "request",
)
"""The modules the jail runs, in an order where each comes after those it imports; the last one's
`main` is the supervisor. `config` and `seccomp` stay on the host: the backend sends the finished
configuration, the seccomp filter included as bytes."""

BOOTSTRAP = """\
import sys;sys.path[:]=[p for p in sys.path if p not in ('','.')];import json,struct,types
r=sys.stdin.buffer;n=struct.unpack('>I',r.read(4))[0]
c=[(k,compile(s,k,'exec')) for k,s in json.loads(r.read(n))]
for k,s in c:
 m=sys.modules[k]=types.ModuleType(k);m.__package__='sandboxes.supervisor'
 exec(s,m.__dict__)
m.main(sys.argv[1])
"""
"""Run as `python3 -S -c BOOTSTRAP CONFIG_JSON` with PYTHONHASHSEED=0 in the environment (so that
forked Python programs hash like `python3` started with PYTHONHASHSEED=0). It reads a 4-byte
length and that much JSON, a list of [module name, source] (`frames.bootstrap_payload`), and
compiles every module before it runs any: their code objects are then made together, before the
imports' allocations, on fewer pages of memory, which each request writes to (the interpreter
counts references to the code it runs), copied on write once the next step forks."""
