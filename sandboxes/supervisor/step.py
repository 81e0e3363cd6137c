"""One step: fork a program, confine it, feed its stdin, gather its output, watch its limits, kill
and reap everything it left, and say how it ended."""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # signal.signal()'s enum conversions slow a child
import fcntl
import marshal
import os
import select
import signal

# Bound here, not looked up on their modules per step: every object a request touches (a module
# object too) is a page the supervisor writes, copied once the next step forks; and the forked
# child (`_child`) runs its code cold (never specialised), where each `module.name` it evaluates
# writes to (copies the page of) the `name` string, while a global does not.
from binascii import b2a_base64
from collections.abc import Mapping
from gc import freeze, unfreeze
from marshal import loads as _loads
from math import ceil
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
from select import POLLIN, POLLOUT, poll
from time import monotonic
from typing import TYPE_CHECKING, Any, NoReturn

from .forked import _adopt_environ, _Invocation, _python_invocation, _python_main, _spare_streams
from .shared import _SHARED_CODE, preloaded, shared_script
from .template import TEMPLATE_STATE, Template
from .tree import _live_usage, _Reaper, _rusage_cpu

if TYPE_CHECKING:
    from .config import SupervisorConfig
    from .framing import StepResult

_READ_CHUNK = 65536
_POLL_S = 0.02
_MEMORY_MARKERS: tuple[bytes, ...] = (b"MemoryError", b"std::bad_alloc", b"Cannot allocate memory")
# The JVM, Node, Go and Rust say so in these words.
_MEMORY_MARKERS += (b"java.lang.OutOfMemoryError", b"heap out of memory", b"runtime: out of memory")
_MEMORY_MARKERS += (b"memory allocation of",)
_SIGXCPU = int(signal.SIGXCPU)
_SIGKILL = int(signal.SIGKILL)


_OOM_ADJ_WRITABLE = True
"""Whether a run's processes can raise their own OOM score (not where, as the docker backend's
non-root supervisor, our /proc entries are root-owned): decided once, at start."""


class StepContext:
    """What one step runs with. A class with slots, not a dataclass (`dataclasses` would load
    `inspect` and `ast` into every sandbox, and into every forked Python program's memory) nor
    a NamedTuple (whose constructor and field descriptors are more objects a request touches).

    `env`: the programs' environment, the same object for every step of a request. `limits`:
    the request's limits (the build's: `request._build_limits`). `cpu_s`: the CPU seconds the
    step may use (what is left of the request's budget); `wall_s`: the wall seconds it may
    take. `shared_keys`: the request's shared files (name -> blob key), given for its first
    program only: before any program of the request ran, they are as sent. `template`: what
    forks the step's process (`template.Template`)."""

    __slots__ = (
        "argv",
        "cfg",
        "cpu_s",
        "env",
        "limits",
        "reaper",
        "shared_keys",
        "stdin",
        "template",
        "wall_s",
        "workdir",
    )

    def __init__(
        self,
        argv: list[str],
        stdin: bytes,
        workdir: str,
        env: dict[str, str],
        limits: dict[str, Any],
        cpu_s: float,
        wall_s: float,
        reaper: _Reaper,
        cfg: SupervisorConfig,
        template: Template,
        shared_keys: dict[str, str] | None = None,
    ) -> None:
        self.argv = argv
        self.stdin = stdin
        self.workdir = workdir
        self.env = env
        self.limits = limits
        self.cpu_s = cpu_s
        self.wall_s = wall_s
        self.reaper = reaper
        self.cfg = cfg
        self.template = template
        self.shared_keys = shared_keys


def check_oom_adj() -> None:
    """Decide `_OOM_ADJ_WRITABLE`, once the supervisor is not dumpable: children inherit our
    non-dumpable /proc entries, so can they still write this one?"""
    global _OOM_ADJ_WRITABLE
    try:
        os.close(os.open("/proc/self/oom_score_adj", os.O_WRONLY | os.O_CLOEXEC))
    except OSError:
        _OOM_ADJ_WRITABLE = False


_O_WRONLY_CLOEXEC = O_WRONLY | O_CLOEXEC

_Call = tuple[frozenset[str], str | None, str | None, list[str], tuple[str, str] | None]
"""How a step runs as forked Python, as sent to its process: (flags, script, -c code, args, the
shared runner it is: (blob key, path), whose code the template loaded, see `shared.preloaded`)."""
_Params = tuple[list[str], dict[str, Any], float, str, _Call | None]
"""What a step's process reads first from its stdin pipe (`_child`), `marshal`led after a
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


def _child(fds: list[int]) -> NoReturn:
    """The step's process, forked by the template (or, exec'ing, by the supervisor): take the
    pipes `fds` (stdin, stdout, stderr, exec errors), write our pid to the exec-error pipe (the
    supervisor waits for it, `_spawn`), read the step's parameters from stdin (`_Params`),
    confine ourselves, then exec (or become the forked Python program). Never returns.

    Every page this process writes to is a copy-on-write fault, so it runs as little Python as
    it can: no text-mode `open` (codec and locale machinery), no path resolution, no module
    attributes (see `_setrlimit` and the other names bound above)."""
    stdin_r, stdout_w, stderr_w, err_w = fds
    try:
        _os_write(err_w, _getpid().to_bytes(_PID_BYTES, "big"))
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
        # were allocated before it, in `_spawn` or as the template received them).
        _dup2(err_w, 3, False)  # not inheritable (by position: keywords cost the child more)
        _closerange(4, 65536)
        params: _Params = _loads(_read_exactly(int.from_bytes(_read_exactly(4), "big")))
        argv, limits, cpu_s, workdir, call = params
        cfg, env = TEMPLATE_STATE
        invocation: _Invocation | None = None
        if call is None:  # a forked `python3` keeps ignoring them, as `python3` does
            _signal.signal(_signal.SIGPIPE, _signal.SIG_DFL)
            _signal.signal(_signal.SIGXFSZ, _signal.SIG_DFL)
        else:
            flags, script, code, args, runner = call
            compiled, main = _SHARED_CODE.get(runner, _NOT_LOADED) if runner else _NOT_LOADED
            invocation = (flags, script, code, args, compiled, main)
        _confine(limits, cfg, cpu_s)
        # no-new-privileges: set on the supervisor itself, inherited by every child
        _chdir(workdir)
        if invocation is not None:
            _python_main(argv[0], invocation, env)
        os.execvpe(argv[0], argv, env)
    except BaseException as exc:  # noqa: BLE001 - reported to the supervisor, then exit 127
        try:
            os.write(3, f"{type(exc).__name__}: {exc}".encode("utf-8", "replace"))
        finally:
            os._exit(127)
    os._exit(127)


_PID_BYTES = 4
"""A step's process's first write to its exec-error pipe: its pid (at most 2**22 on Linux)."""

_NOT_LOADED = (None, None)
"""(code, `__main__`) of a script the template did not load: read and compiled in the child."""


_PIPE_MAX: list[int] = []


def _enlarge_pipe(fd: int, cap: int) -> bool:
    """Make the pipe hold `cap` bytes (at least its default 64 KiB, at most what the system
    allows); False when it cannot (the caller then reads it as data arrives)."""
    if not _PIPE_MAX:
        try:
            with open("/proc/sys/fs/pipe-max-size", "rb") as f:
                _PIPE_MAX.append(int(f.read()))
        except (OSError, ValueError):
            _PIPE_MAX.append(0)
    if _PIPE_MAX[0] < cap:
        return False
    try:
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, max(cap, 65536))
    except OSError:  # over the user's total of pipe pages (pipe-user-pages-soft)
        return False
    return True


_CHUNK = bytearray(_READ_CHUNK)
"""What the supervisor reads a pipe or a /proc file into, the same buffer every time: os.read
would allocate (and write to) a buffer of the whole size at a new place of the heap each call."""
_CHUNK_VIEW = memoryview(_CHUNK)
_CHUNKS = (_CHUNK,)


def _read_some(fd: int) -> int:
    """One read of `fd` into `_CHUNK`; returns how many bytes it holds now (0: end of file)."""
    return os.readv(fd, _CHUNKS)


def _drain(fd: int, buf: bytearray, total: int, cap: int) -> int:
    """Read what is in the (non-blocking) pipe into `buf`, keeping at most `cap` bytes over all
    outputs; returns the new total, which exceeds `cap` when the output limit was passed."""
    while total <= cap:
        try:
            n = _read_some(fd)
        except OSError:  # BlockingIOError too: nothing more to read now
            break
        if not n:
            break
        buf += _CHUNK_VIEW[: min(n, max(cap - total, 0))]
        total += n
    return total


class _Step:
    """One program of a request while it runs: its pipes, and what watching it has seen."""

    __slots__ = (
        "cpu",
        "err_r",
        "exc_r",
        "killed_for",
        "main_done",
        "note",
        "out_cap",
        "out_r",
        "outputs",
        "pid",
        "pidfd",
        "ready",
        "sel",
        "start",
        "statuses",
        "stdin_w",
        "total_out",
        "view",
    )

    def __init__(self, fds: tuple[int, int, int, int], out_cap: int, stdin: bytes) -> None:
        self.start = 0.0
        self.pid = 0
        self.stdin_w, self.out_r, self.err_r, self.exc_r = fds
        self.pidfd = -1
        self.out_cap = out_cap
        self.outputs = {self.out_r: bytearray(), self.err_r: bytearray()}
        self.total_out = 0
        self.killed_for: str | None = None
        self.note = ""
        self.cpu = 0.0
        self.statuses: dict[int, int] = {}
        self.main_done = False
        # poll(), not an epoll selector: no descriptor to create and close in every step.
        self.sel = poll()
        self.ready: select.poll | None = None
        """The output pipes, polled before each drain (lazy reading, see `prepare`)."""
        self.view = memoryview(stdin)
        """What is left to write of the program's stdin."""

    def prepare(self) -> None:
        """Before the step's process starts: the pipes' modes and what to poll. The supervisor
        no longer shares pages with the program (the template forks it), but its polling costs
        the program's CPU: as little as can be runs while it is alive."""
        # Pipes as large as the output limit need not be read while the program runs: it cannot
        # block on them before it has written more than it may. They are read at each poll and
        # at the end, so that a program's every write is not also a wake-up of the supervisor.
        out_r, err_r = self.out_r, self.err_r
        lazy = _enlarge_pipe(out_r, self.out_cap) and _enlarge_pipe(err_r, self.out_cap)
        os.set_blocking(out_r, False)
        os.set_blocking(err_r, False)
        if lazy:
            self.ready = poll()
            self.ready.register(out_r, POLLIN)
            self.ready.register(err_r, POLLIN)
        else:
            self.sel.register(out_r, POLLIN)
            self.sel.register(err_r, POLLIN)
        # The step's parameters come first (`_Params`): written now, so that its process finds
        # them as soon as it starts, without waiting for us to hear its pid.
        os.set_blocking(self.stdin_w, False)
        try:  # noqa: SIM105 - not contextlib.suppress: more objects each step touches
            self.view = self.view[os.write(self.stdin_w, self.view[:_READ_CHUNK]) :]
        except BlockingIOError:
            pass
        if self.view:
            self.sel.register(self.stdin_w, POLLOUT)
        else:
            # The program reads end-of-file once it has read all, as when it is closed.
            self.close_stdin()

    def take(self, fd: int, data: bytes) -> None:
        """Keep what fits of `data` under the output limit; past it, the step is stopped."""
        self.outputs[fd] += data[: max(self.out_cap - self.total_out, 0)]
        self.total_out += len(data)
        if self.total_out > self.out_cap:
            self.killed_for = "output_limit"

    def drain(self) -> None:
        """Take what is already in both (non-blocking) output pipes: when they are polled
        (`ready`), those with data or no writer left, so no read fails for want of data."""
        polled = ((self.out_r, 0), (self.err_r, 0)) if self.ready is None else self.ready.poll(0)
        for fd, _ in polled:
            self.total_out = _drain(fd, self.outputs[fd], self.total_out, self.out_cap)
        if self.total_out > self.out_cap:
            self.killed_for = "output_limit"

    def close_stdin(self) -> None:
        if self.stdin_w >= 0:
            try:  # noqa: SIM105 - not contextlib.suppress: more objects each step touches
                os.close(self.stdin_w)
            except OSError:
                pass
            self.stdin_w = -1

    def close(self) -> None:
        self.close_stdin()
        for fd in (self.out_r, self.err_r, self.pidfd):
            if fd >= 0:
                try:  # noqa: SIM105 - as in close_stdin
                    os.close(fd)
                except OSError:
                    pass

    def exec_error(self) -> bytes:
        """What the child wrote to the exec-error pipe (nothing once the program started)."""
        data = b""
        while n := _read_some(self.exc_r):
            data += _CHUNK[:n]
        os.close(self.exc_r)
        return data


def _spawn(ctx: StepContext, call: _Call | None) -> _Step | None:
    """Start the step's process (`_child`): forked by the template, or where there is none (it
    died, or the test-only `_fork_supervisor`) by the supervisor, then only to exec (`call` is
    None). None when the template turned out to be gone: nothing was started."""
    stdin_r, stdin_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    exc_r, exc_w = os.pipe2(os.O_CLOEXEC)
    params = marshal.dumps((ctx.argv, ctx.limits, ctx.cpu_s, ctx.workdir, call))
    stdin = len(params).to_bytes(4, "big") + params + ctx.stdin
    step = _Step((stdin_w, out_r, err_r, exc_r), int(ctx.limits["output_bytes"]), stdin)
    fds = [stdin_r, out_w, err_w, exc_w]
    template = ctx.template
    forked = 0
    try:
        step.prepare()
        step.start = monotonic()
        if template.alive():
            started = template.spawn(fds, call[4] if call is not None else None)
        else:
            started = True
            forked = _fork_here(fds)
    except BaseException:
        step.close()
        os.close(exc_r)
        raise
    finally:
        for fd in fds:
            os.close(fd)
    # The step's process writes its pid first; end-of-file instead: nothing was started (the
    # template is gone, or could not fork), or what was died before its first line.
    answer = _os_read(exc_r, _PID_BYTES) if started else b""
    pid = forked or (int.from_bytes(answer, "big") if len(answer) == _PID_BYTES else 0)
    if not pid:
        step.close()
        os.close(exc_r)
        template.kill()  # gone, or no step came of it: never trusted with another
        return None
    step.pid = pid
    step.pidfd = os.pidfd_open(pid)
    step.sel.register(step.pidfd, POLLIN)
    return step


def _fork_here(fds: list[int]) -> int:
    """Fork the step's process from the supervisor itself (see `_spawn`)."""
    # Every object so far is left out of the child's garbage collections, which would otherwise
    # write to (copy) the pages of objects the program never uses.
    freeze()
    try:
        pid = os.fork()
    except BaseException:
        unfreeze()
        raise
    if pid == 0:
        _child(fds)
    unfreeze()
    return pid


def _feed(step: _Step, sel: select.poll, view: memoryview) -> memoryview:
    """Write the next piece of stdin; once all is written (or the program closed its end),
    close it. Returns what is left to write."""
    try:
        view = view[os.write(step.stdin_w, view[:_READ_CHUNK]) :]
    except BlockingIOError:
        pass
    except OSError:  # the program closed its stdin
        view = view[:0]
    if not view:
        sel.unregister(step.stdin_w)
        step.close_stdin()
    return view


def _files_over(roots: list[str], cap: int) -> bool:
    """Whether one of the file systems at `roots` holds more than `cap` files and directories
    (where no `nr_inodes` mount option could bound them)."""
    for root in roots:
        try:
            st = os.statvfs(root)
        except OSError:
            continue
        if st.f_files - st.f_ffree > cap:
            return True
    return False


def _over_limits(step: _Step, ctx: StepContext, mem_cap: int) -> str | None:
    """At each poll: the limit the step's processes passed together, if any."""
    reaper, cfg = ctx.reaper, ctx.cfg
    step.cpu += reaper.reap_ready(step.statuses)
    live_cpu, resident = _live_usage(reaper.run_processes())
    if step.cpu + live_cpu >= ctx.cpu_s:
        return "timeout"
    if resident > mem_cap:
        # RLIMIT_AS bounds each process; this bounds them together (no cgroup needed).
        return "memory"
    max_files = cfg["max_files"]  # 0: not polled (docker: nr_inodes bounds it)
    if max_files and _files_over([cfg["work_root"], *cfg["wipe"]], max_files):
        step.note = f"sandbox: more than {max_files} files in one file system\n"
        return "runtime_error"
    return None


def _watch(step: _Step, ctx: StepContext) -> None:
    """Feed stdin and gather output until the main process exits or a limit is passed (then
    `step.killed_for` names it)."""
    mem_cap = int(ctx.limits["memory_bytes"])
    sel = step.sel
    view = step.view
    deadline = step.start + ctx.wall_s
    next_check = step.start + _POLL_S
    while not step.main_done and step.killed_for is None:
        timeout = max(0.0, min(deadline, next_check) - monotonic())
        for fd, _ in sel.poll(ceil(timeout * 1000)):
            if fd == step.pidfd:
                step.main_done = True
            elif fd == step.stdin_w:
                view = _feed(step, sel, view)
            else:
                try:
                    data = os.read(fd, _READ_CHUNK)
                except BlockingIOError:
                    continue
                if data:
                    step.take(fd, data)
                else:
                    sel.unregister(fd)
        now = monotonic()
        if step.killed_for is None and now >= next_check:
            next_check = now + _POLL_S
            if step.ready is not None:
                step.drain()
            if step.killed_for is None:
                step.killed_for = _over_limits(step, ctx, mem_cap)
        if step.killed_for is None and now >= deadline:
            step.killed_for = "timeout"
    if step.killed_for is None:
        step.drain()  # the main process has exited: take what is already in the pipes


def _reap(step: _Step, reaper: _Reaper) -> tuple[int | None, set[int]]:
    """Kill and reap everything of the step (the main process included), counting CPU time;
    returns the main process's wait status and the other processes that were killed."""
    main_status = step.statuses.get(step.pid)
    if main_status is None and step.main_done:
        try:
            wpid, status, ru = os.wait4(step.pid, os.WNOHANG)
        except ChildProcessError:
            wpid = 0
        if wpid:
            step.cpu += _rusage_cpu(ru)
            step.statuses[step.pid] = main_status = status
    extra_cpu, killed = reaper.kill_all(step.statuses)
    killed.discard(step.pid)
    step.cpu += extra_cpu
    if main_status is None:
        main_status = step.statuses.get(step.pid)
    return main_status, killed


def _classify(
    killed_for: str | None, exit_code: int | None, sig: int | None, stderr: bytes | bytearray
) -> tuple[str, bool]:
    """A step's status from how it ended, and whether the kernel's OOM killer ended it."""
    if killed_for is not None:
        return killed_for, False
    if sig == _SIGXCPU:
        return "timeout", False
    if exit_code == 0:
        return "ok", False
    if sig == _SIGKILL:
        # Not killed by us: the kernel's OOM killer (container memory cap) is the usual cause.
        return "memory", True
    if any(marker in stderr for marker in _MEMORY_MARKERS):
        return "memory", False
    return "runtime_error", False


_INVOCATIONS: dict[tuple[str, ...], _Invocation | None] = {}
"""`_python_invocation` by (PATH, *argv), for a program named without a "/": found on PATH,
whose directories are the system's (read-only in a jail), the answer holds for every request."""
_INVOCATIONS_KEPT = 64


def _invocation(ctx: StepContext) -> _Invocation | None:
    """How the step's argv runs in a fork of this interpreter, if it does (`_python_invocation`).
    Decided here, not in the child: resolving paths in Python there costs copy-on-write faults."""
    argv = ctx.argv
    if "/" in argv[0]:  # relative to the work directory, which a run may change
        return _python_invocation(argv, ctx.env, ctx.workdir)
    key = (ctx.env.get("PATH", ""), *argv)
    if key in _INVOCATIONS:
        return _INVOCATIONS[key]
    if len(_INVOCATIONS) >= _INVOCATIONS_KEPT:
        _INVOCATIONS.clear()
    invocation = _INVOCATIONS[key] = _python_invocation(argv, ctx.env, ctx.workdir)
    return invocation


def forks_itself(cfg: Mapping[str, Any]) -> bool:
    """Whether the test-only `_fork_supervisor` is set (`config._TEST_ONLY_KEYS`)."""
    return bool(cfg.get("_fork_supervisor"))


def _call(ctx: StepContext) -> _Call | None:
    """How the step runs as forked Python (`_Call`), or None: exec'd. Only a fork of the template
    runs Python itself (`fork_python`); a process the supervisor forks only execs, except under
    the test-only `_fork_supervisor`, which forks programs from the supervisor as it did before
    the template (the remnant tests show they catch that)."""
    cfg = ctx.cfg
    legacy = forks_itself(cfg)
    if not cfg["fork_python"] or not (ctx.template.alive() or legacy):
        return None
    invocation = _invocation(ctx)
    if invocation is None:
        return None
    flags, script, code, args, _, _ = invocation
    runner = shared_script(script, ctx.workdir, ctx.shared_keys) if ctx.shared_keys else None
    if legacy:
        if runner is not None:
            preloaded(runner)
        _spare_streams("u" in flags)
        _adopt_environ(ctx.env)
    return flags, script, code, args, runner


def _run_step(ctx: StepContext) -> tuple[StepResult, float, int]:
    """Run one program; returns (its result, CPU seconds used, leftover processes killed)."""
    step = _spawn(ctx, _call(ctx))
    if step is None:  # the template is gone: this step and the next are exec'd afresh
        step = _spawn(ctx, None)
        if step is None:
            raise OSError("could not start the step's process")
    try:
        _watch(step, ctx)
        wall = monotonic() - step.start
        main_status, killed = _reap(step, ctx.reaper)
    finally:
        step.close()
    template = ctx.template
    if ctx.reaper.spared_exited:
        template.forget()  # a program killed it
    else:
        template.wake()  # no process of the run is left to stop it again
    exec_error = step.exec_error()
    out_cap = step.out_cap
    stdout = step.outputs[step.out_r]
    stderr = step.outputs[step.err_r]
    exit_code = sig = None
    if main_status is not None:
        if os.WIFEXITED(main_status):
            exit_code = os.WEXITSTATUS(main_status)
        elif os.WIFSIGNALED(main_status):
            sig = os.WTERMSIG(main_status)
    if exec_error:
        stderr = (stderr + b"\nsandbox: could not start the program: " + exec_error)[-out_cap:]
    if step.note:
        stderr = (stderr + step.note.encode())[-out_cap:]
    if step.cpu >= ctx.cpu_s:
        step.killed_for = "timeout"
    status, oom_killed = _classify(step.killed_for, exit_code, sig, stderr)
    result = (
        status,
        exit_code,
        sig,
        b2a_base64(stdout, newline=False),
        b2a_base64(stderr, newline=False),
        round(step.cpu, 6),
        round(wall, 6),
        oom_killed,
        step.killed_for is not None or sig == _SIGXCPU,
    )
    return result, step.cpu, len(killed)
