"""The step's process: forked by the template (or, exec'ing, by the supervisor), it takes its
pipes, writes its pid, reads the step's parameters from its stdin, confines itself (rlimits, the
run user) and execs the program, or becomes the forked Python program (`forked`).

Every page this process writes to is a copy-on-write fault, so it runs as little Python as it
can: the names it calls are bound here, not looked up on their modules (see `step`)."""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # signal.signal()'s enum conversions slow a child
import os

# Bound here, not looked up on their modules: the forked child runs its code cold (never
# specialised), where each `module.name` it evaluates writes to (copies the page of) the `name`
# string, while a global does not.
from marshal import loads as _loads
from os import O_CLOEXEC, O_WRONLY
from os import chdir as _chdir
from os import close as _os_close
from os import closerange as _closerange
from os import dup2 as _dup2
from os import geteuid as _geteuid
from os import getpid as _getpid
from os import open as _os_open
from os import read as _os_read
from os import setgid as _setgid
from os import setgroups as _setgroups
from os import setsid as _setsid
from os import setuid as _setuid
from os import write as _os_write
from resource import RLIM_INFINITY as _RLIM_INFINITY
from resource import RLIMIT_AS as _RLIMIT_AS
from resource import RLIMIT_CORE as _RLIMIT_CORE
from resource import RLIMIT_CPU as _RLIMIT_CPU
from resource import RLIMIT_FSIZE as _RLIMIT_FSIZE
from resource import RLIMIT_MSGQUEUE as _RLIMIT_MSGQUEUE
from resource import RLIMIT_NOFILE as _RLIMIT_NOFILE
from resource import RLIMIT_NPROC as _RLIMIT_NPROC
from resource import RLIMIT_STACK as _RLIMIT_STACK
from resource import getrlimit as _getrlimit
from resource import setrlimit as _setrlimit
from typing import TYPE_CHECKING, Any, NoReturn

from .forked import Invocation, python_main
from .shared import SHARED_CODE
from .template import TEMPLATE_STATE

if TYPE_CHECKING:
    from .config import SupervisorConfig


_OOM_ADJ_WRITABLE = True
"""Whether a run's processes can raise their own OOM score (not where, as the docker backend's
non-root supervisor, our /proc entries are root-owned): decided once, at start."""


def check_oom_adj() -> None:
    """Decide `_OOM_ADJ_WRITABLE`, once the supervisor is not dumpable: children inherit our
    non-dumpable /proc entries, so can they still write this one?"""
    global _OOM_ADJ_WRITABLE
    try:
        os.close(os.open("/proc/self/oom_score_adj", os.O_WRONLY | os.O_CLOEXEC))
    except OSError:
        _OOM_ADJ_WRITABLE = False


_O_WRONLY_CLOEXEC = O_WRONLY | O_CLOEXEC

Call = tuple[frozenset[str], str | None, str | None, list[str], tuple[str, str] | None]
"""How a step runs as forked Python, as sent to its process: (flags, script, -c code, args, the
shared runner it is: (blob key, path), whose code the template loaded, see `shared.preloaded`)."""
_Params = tuple[list[str], dict[str, Any], float, str, Call | None]
"""What a step's process reads first from its stdin pipe (`child_main`), `marshal`led after a
4-byte length: (argv, limits, CPU seconds, work directory, how it runs as forked Python)."""


def _set_rlimit(which: int, value: int) -> None:
    try:
        _setrlimit(which, (value, value))
    except (ValueError, OSError):
        _, hard = _getrlimit(which)
        capped = value if hard == _RLIM_INFINITY else min(value, hard)
        _setrlimit(which, (capped, hard))


def _confine(limits: dict[str, Any], cfg: SupervisorConfig, cpu_s: float) -> None:
    """The child's rlimits, then its uid and gid (the run user's, when the supervisor is root)."""
    # A backstop a second or more past the budget: the supervisor's polling acts first.
    cpu_limit = int(cpu_s) + 2
    _setrlimit(_RLIMIT_CPU, (cpu_limit, cpu_limit + 1))
    memory = int(limits["memory_bytes"])
    _set_rlimit(_RLIMIT_AS, int(limits.get("address_space_bytes") or memory))
    _set_rlimit(_RLIMIT_FSIZE, int(limits["file_size_bytes"]))
    _set_rlimit(_RLIMIT_NOFILE, cfg["nofile"])
    _set_rlimit(_RLIMIT_CORE, 0)
    # No POSIX message queue can be made: one would outlive the run, readable by the next.
    _set_rlimit(_RLIMIT_MSGQUEUE, 0)
    _set_rlimit(_RLIMIT_STACK, int(limits.get("stack_bytes") or min(memory, 256 * 1024 * 1024)))
    if cfg["set_nproc"]:
        _set_rlimit(_RLIMIT_NPROC, int(limits["max_processes"]))
    uid, gid = cfg["run_uid"], cfg["run_gid"]
    if uid is not None and _geteuid() == 0:
        _setgroups([])
        _setgid(uid if gid is None else gid)
        _setuid(uid)


def _read_exactly(n: int) -> bytes:
    data = b""
    while len(data) < n:
        piece = _os_read(0, n - len(data))
        if not piece:
            raise EOFError("the step's parameters were cut short")
        data += piece
    return data


def child_main(fds: list[int]) -> NoReturn:
    """The step's process, forked by the template (or, exec'ing, by the supervisor): take the
    pipes `fds` (stdin, stdout, stderr, exec errors), write our pid to the exec-error pipe (the
    supervisor waits for it, `step._spawn`), read the step's parameters from stdin (`_Params`),
    confine ourselves, then exec (or become the forked Python program). Never returns.

    Every page this process writes to is a copy-on-write fault, so it runs as little Python as
    it can: no text-mode `open` (codec and locale machinery), no path resolution, no module
    attributes (see `_setrlimit` and the other names bound above)."""
    stdin_r, stdout_w, stderr_w, err_w = fds
    try:
        _os_write(err_w, _getpid().to_bytes(PID_BYTES, "big"))
        _setsid()
        if _OOM_ADJ_WRITABLE:
            try:
                adj = _os_open("/proc/self/oom_score_adj", _O_WRONLY_CLOEXEC)
                try:
                    _os_write(adj, b"1000")
                finally:
                    _os_close(adj)
            except OSError:
                pass
        _dup2(stdin_r, 0)
        _dup2(stdout_w, 1)
        _dup2(stderr_w, 2)
        # Close-on-exec in the same call (dup3: err_w is never 3, the other pipes' descriptors
        # were allocated before it, in `step._spawn` or as the template received them).
        _dup2(err_w, 3, False)  # not inheritable (by position: keywords cost the child more)
        _closerange(4, 65536)
        params: _Params = _loads(_read_exactly(int.from_bytes(_read_exactly(4), "big")))
        argv, limits, cpu_s, workdir, call = params
        cfg, env = TEMPLATE_STATE
        invocation: Invocation | None = None
        if call is None:  # a forked `python3` keeps ignoring them, as `python3` does
            _signal.signal(_signal.SIGPIPE, _signal.SIG_DFL)
            _signal.signal(_signal.SIGXFSZ, _signal.SIG_DFL)
        else:
            flags, script, code, args, runner = call
            compiled, main = SHARED_CODE.get(runner, _NOT_LOADED) if runner else _NOT_LOADED
            invocation = (flags, script, code, args, compiled, main)
        _confine(limits, cfg, cpu_s)
        # no-new-privileges: set on the supervisor itself, inherited by every child
        _chdir(workdir)
        if invocation is not None:
            python_main(argv[0], invocation, env)
        os.execvpe(argv[0], argv, env)
    except BaseException as exc:  # noqa: BLE001 - reported to the supervisor, then exit 127
        try:
            os.write(3, f"{type(exc).__name__}: {exc}".encode("utf-8", "replace"))
        finally:
            os._exit(127)
    os._exit(127)


PID_BYTES = 4
"""A step's process's first write to its exec-error pipe: its pid (at most 2**22 on Linux)."""

_NOT_LOADED = (None, None)
"""(code, `__main__`) of a script the template did not load: read and compiled in the child."""
