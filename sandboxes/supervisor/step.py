"""One step: fork a program, confine it, feed its stdin, gather its output, watch its limits, kill
and reap everything it left, and say how it ended."""

from __future__ import annotations

import marshal
import os
import select
import signal

# Bound here, not looked up on their modules per step: every object a request touches (a module
# object too) is a page the supervisor writes, copied once the next step forks.
from binascii import b2a_base64
from collections.abc import Mapping
from gc import freeze, unfreeze
from math import ceil
from os import read as _os_read
from select import POLLIN
from time import monotonic
from typing import TYPE_CHECKING, Any

from .child import PID_BYTES, Call, child_main
from .forked import Invocation, adopt_environ, python_invocation, spare_streams
from .running import READ_CHUNK, RunningStep
from .shared import preloaded, shared_script
from .template import Template
from .tree import Reaper, live_usage, rusage_cpu

if TYPE_CHECKING:
    from .config import SupervisorConfig
    from .framing import StepResult

_POLL_S = 0.02
_MEMORY_MARKERS: tuple[bytes, ...] = (b"MemoryError", b"std::bad_alloc", b"Cannot allocate memory")
# The JVM, Node, Go and Rust say so in these words.
_MEMORY_MARKERS += (b"java.lang.OutOfMemoryError", b"heap out of memory", b"runtime: out of memory")
_MEMORY_MARKERS += (b"memory allocation of",)
_SIGXCPU = int(signal.SIGXCPU)
_SIGKILL = int(signal.SIGKILL)


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
        reaper: Reaper,
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


def _spawn(ctx: StepContext, call: Call | None) -> RunningStep | None:
    """Start the step's process (`child_main`): forked by the template, or where there is none (it
    died, or the test-only `_fork_supervisor`) by the supervisor, then only to exec (`call` is
    None). None when the template turned out to be gone: nothing was started."""
    stdin_r, stdin_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    exc_r, exc_w = os.pipe2(os.O_CLOEXEC)
    params = marshal.dumps((ctx.argv, ctx.limits, ctx.cpu_s, ctx.workdir, call))
    stdin = len(params).to_bytes(4, "big") + params + ctx.stdin
    step = RunningStep((stdin_w, out_r, err_r, exc_r), int(ctx.limits["output_bytes"]), stdin)
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
    answer = _os_read(exc_r, PID_BYTES) if started else b""
    pid = forked or (int.from_bytes(answer, "big") if len(answer) == PID_BYTES else 0)
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
        child_main(fds)
    unfreeze()
    return pid


def _feed(step: RunningStep, sel: select.poll, view: memoryview) -> memoryview:
    """Write the next piece of stdin; once all is written (or the program closed its end),
    close it. Returns what is left to write."""
    try:
        view = view[os.write(step.stdin_w, view[:READ_CHUNK]) :]
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


def _over_limits(step: RunningStep, ctx: StepContext, mem_cap: int) -> str | None:
    """At each poll: the limit the step's processes passed together, if any."""
    reaper, cfg = ctx.reaper, ctx.cfg
    step.cpu += reaper.reap_ready(step.statuses)
    live_cpu, resident = live_usage(reaper.run_processes())
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


def _watch(step: RunningStep, ctx: StepContext) -> None:
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
                    data = os.read(fd, READ_CHUNK)
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


def _reap(step: RunningStep, reaper: Reaper) -> tuple[int | None, set[int]]:
    """Kill and reap everything of the step (the main process included), counting CPU time;
    returns the main process's wait status and the other processes that were killed."""
    main_status = step.statuses.get(step.pid)
    if main_status is None and step.main_done:
        try:
            wpid, status, ru = os.wait4(step.pid, os.WNOHANG)
        except ChildProcessError:
            wpid = 0
        if wpid:
            step.cpu += rusage_cpu(ru)
            step.statuses[step.pid] = main_status = status
    extra_cpu, killed = reaper.kill_all(step.statuses)
    killed.discard(step.pid)
    step.cpu += extra_cpu
    if main_status is None:
        main_status = step.statuses.get(step.pid)
    return main_status, killed


def classify(
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


_INVOCATIONS: dict[tuple[str, ...], Invocation | None] = {}
"""`python_invocation` by (PATH, *argv), for a program named without a "/": found on PATH,
whose directories are the system's (read-only in a jail), the answer holds for every request."""
_INVOCATIONS_KEPT = 64


def _invocation(ctx: StepContext) -> Invocation | None:
    """How the step's argv runs in a fork of this interpreter, if it does (`python_invocation`).
    Decided here, not in the child: resolving paths in Python there costs copy-on-write faults."""
    argv = ctx.argv
    if "/" in argv[0]:  # relative to the work directory, which a run may change
        return python_invocation(argv, ctx.env, ctx.workdir)
    key = (ctx.env.get("PATH", ""), *argv)
    if key in _INVOCATIONS:
        return _INVOCATIONS[key]
    if len(_INVOCATIONS) >= _INVOCATIONS_KEPT:
        _INVOCATIONS.clear()
    invocation = _INVOCATIONS[key] = python_invocation(argv, ctx.env, ctx.workdir)
    return invocation


def forks_itself(cfg: Mapping[str, Any]) -> bool:
    """Whether the test-only `_fork_supervisor` is set (`config._TEST_ONLY_KEYS`)."""
    return bool(cfg.get("_fork_supervisor"))


def _call(ctx: StepContext) -> Call | None:
    """How the step runs as forked Python (`Call`), or None: exec'd. Only a fork of the template
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
        spare_streams("u" in flags)
        adopt_environ(ctx.env)
    return flags, script, code, args, runner


def run_step(ctx: StepContext) -> tuple[StepResult, float, int]:
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
    status, oom_killed = classify(step.killed_for, exit_code, sig, stderr)
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
