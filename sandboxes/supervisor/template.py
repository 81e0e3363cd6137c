"""The clean template: the process every step's process is forked from.

The supervisor reads requests, their files, stdin and results; a process forked from it holds
copies of all of that, of this request and of earlier ones, and a forked Python program can read
its own memory. So the supervisor never forks a program. At start, before it reads any request,
it forks the template (`Template.start`), which then only ever receives, on a socket of its own:

- `spawn`, carrying nothing but the new step's pipes (as file descriptors) and, for a step that
  runs a shared runner, that runner's key and path. It forks the step's process as the
  supervisor's child (which reaps it and counts its CPU time): clone(CLONE_PARENT), or where that
  is refused two forks, the first exiting at once so that the second is reparented (`_fork`).
  It answers nothing: the step's process writes its own pid first (`child.child_main`), so that the
  template, whose pages the program shares, writes as little as it can while it runs; it
  closes the pipes and waits for the next message. Only the step's process then reads its
  parameters and stdin from its pipe and becomes the program;
- `blob` and `reset`: the shared files (trusted runners, `RunRequest.shared_files`), so that a
  runner's definitions are run and compiled once here (`shared.preloaded`), not in every run.

A program may kill or stop the template (on docker it runs as the supervisor's uid). The
supervisor sends it SIGCONT after each step (no program runs between steps, none can stop it
again before the next); one found dead is never replaced: the supervisor runs the rest of the
request exec'd afresh (`step._spawn`) and asks for a new sandbox. A dead template closes the
step's pipes unwritten, so the supervisor, waiting for the pid, reads end-of-file.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import marshal
import os
import signal
import socket
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

from .forked import DEPTH, adopt_environ, spare_streams, stack_depth
from .shared import BLOBS, SHARED_CODE, preloaded

if TYPE_CHECKING:
    from .config import SupervisorConfig

_CHUNK = 32 * 1024
"""The most bytes of a shared file in one message (a datagram of the socket)."""
_MSG_MAX = _CHUNK + 4096

TEMPLATE_STATE: list[Any] = []
"""In the template and its forks: (cfg, env), what every step's process runs with."""


class Template:
    """The supervisor's end of the template: its pid and socket. `pid` is 0 once it is gone
    (`lost`), or when none was started (the test-only `_fork_supervisor`)."""

    __slots__ = ("lost", "pid", "sock")

    def __init__(self, pid: int, sock: socket.socket | None) -> None:
        self.pid = pid
        self.sock = sock
        self.lost = False

    @classmethod
    def start(
        cls, cfg: SupervisorConfig, env: dict[str, str], child: Callable[[list[int]], NoReturn]
    ) -> Template:
        """Fork the template (before any request is read); `child(fds)` is what each step's
        process runs, with the descriptors `spawn` sent."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pid = os.fork()
        if pid == 0:
            ours.close()
            try:
                _serve(theirs, cfg, env, child)
            finally:
                os._exit(1)
        theirs.close()
        return cls(pid, ours)

    def alive(self) -> bool:
        return self.pid > 0

    def _send(self, message: Any, fds: list[int] | None = None) -> bool:
        sock = self.sock
        if self.pid <= 0 or sock is None:
            return False
        try:
            if fds:
                socket.send_fds(sock, [marshal.dumps(message)], fds)
            else:
                sock.send(marshal.dumps(message))
        except OSError:  # dead (EPIPE, ECONNRESET)
            self.kill()
            return False
        return True

    def share(self, shared: dict[str, Any] | None) -> None:
        """Forward a request's `shared` changes (`shared.request_files` applied them here)."""
        if not shared:
            return
        if shared.get("reset"):
            self._send(("reset",))
        for key in shared.get("new", {}):
            data = BLOBS[key]
            for at in range(0, len(data), _CHUNK):
                if not self._send(("blob", key, data[at : at + _CHUNK])):
                    return
            self._send(("done", key))

    def spawn(self, fds: list[int], runner: tuple[str, str] | None) -> bool:
        """Have the template fork a step's process with `fds` (see `child.child_main`, which writes
        its pid first); False when the template is gone."""
        return self._send(("spawn", runner), fds)

    def wake(self) -> None:
        """After a step: undo a SIGSTOP a program may have sent the template."""
        if self.pid > 0:
            try:
                os.kill(self.pid, signal.SIGCONT)
            except ProcessLookupError:
                self.forget()

    def kill(self) -> None:
        """Give up on a template that broke its protocol (the reaper reaps it, `tree.Reaper`)."""
        if self.pid > 0:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
        self.forget()

    def forget(self) -> None:
        """The template is gone (reaped, or killed here): never started again in this sandbox."""
        self.pid = 0
        self.lost = True
        if self.sock is not None:
            self.sock.close()
            self.sock = None


def _serve(
    sock: socket.socket,
    cfg: SupervisorConfig,
    env: dict[str, str],
    child: Callable[[list[int]], NoReturn],
) -> NoReturn:
    """The template's loop (never returns): nothing of a request ever reaches it."""
    devnull = os.open("/dev/null", os.O_RDWR)
    # Not the supervisor's frame stream: a step's process replaces fds 0-2 anyway, but the
    # template must not keep the backend's pipes open after the supervisor is gone.
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)
    TEMPLATE_STATE[:] = [{**cfg, "token": ""}, env]
    adopt_environ(env)
    spare_streams(False)
    spare_streams(True)
    # A forked Python program runs `python_main` two frames under this one (`_fork`, the
    # step's `child`); see forked._own_depth.
    DEPTH[:] = [stack_depth(sys._getframe()) + 3]
    partial: dict[str, bytearray] = {}
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(sock, _MSG_MAX, 8)
        except OSError:
            os._exit(0)
        if not msg:  # the supervisor is gone
            os._exit(0)
        command = marshal.loads(msg)
        kind = command[0]
        if kind == "spawn":
            if command[1] is not None:
                preloaded(command[1])  # the step's process finds it by the same key
            _fork(fds, child)
            for fd in fds:
                os.close(fd)
        elif kind == "blob":
            partial.setdefault(command[1], bytearray()).extend(command[2])
        elif kind == "done":
            BLOBS[command[1]] = bytes(partial.pop(command[1], b""))
        elif kind == "reset":
            BLOBS.clear()
            SHARED_CODE.clear()
            partial.clear()


_SYS_CLONE = {"x86_64": 56, "aarch64": 220}.get(os.uname().machine)
"""clone(2)'s number, where its first arguments are (flags, stack, ...) as on these two."""
_CLONE_PARENT = 0x00008000
_ONE_FORK = [_SYS_CLONE is not None]
"""Whether `_clone_parent` works here (set to False by its first failure)."""
_libc = ctypes.PyDLL(None, use_errno=True)  # calls keep the GIL: nothing else runs here
_syscall = _libc.syscall
_syscall.restype = ctypes.c_long
_syscall.argtypes = [ctypes.c_long] * 6
_before_fork = ctypes.pythonapi.PyOS_BeforeFork
_after_fork_parent = ctypes.pythonapi.PyOS_AfterFork_Parent
_after_fork_child = ctypes.pythonapi.PyOS_AfterFork_Child
for _hook in (_before_fork, _after_fork_parent, _after_fork_child):
    _hook.restype = None
    _hook.argtypes = []


def _clone_parent() -> int:
    """`os.fork()`, except that the child is our parent's (the supervisor's) child, not ours:
    clone(CLONE_PARENT | SIGCHLD), with the interpreter's own before- and after-fork steps
    around it. What glibc's fork adds does not matter in this single-threaded process: no lock
    of another thread to reset, and its cached thread id, which the child keeps, is used by
    nothing a run reaches through the kernel by it (raise() asks the kernel, since glibc 2.34)."""
    assert _SYS_CLONE is not None
    _before_fork()
    pid = _syscall(_SYS_CLONE, _CLONE_PARENT | signal.SIGCHLD, 0, 0, 0, 0)
    if pid == 0:
        _after_fork_child()
        return 0
    err = ctypes.get_errno()
    _after_fork_parent()
    if pid < 0:
        raise OSError(err, os.strerror(err))
    return int(pid)


def _fork(fds: list[int], child: Callable[[list[int]], NoReturn]) -> None:
    """Fork the step's process as the supervisor's child (its reaper counts its CPU time). One
    clone where the machine allows it, else through a short-lived middle process, whose exit
    reparents it to the supervisor (a program that starts at once may then see that process
    exiting: it holds nothing of any run). A failed fork starts nothing: the supervisor reads
    end-of-file where the step's pid should be."""
    # Every object so far is left out of the step's garbage collections, which would otherwise
    # write to (copy) the pages of objects the program never uses.
    gc.freeze()
    if _ONE_FORK[0]:
        try:
            pid = _clone_parent()
        except OSError:
            _ONE_FORK[0] = False  # refused here (an unknown kernel, a filter): fork twice
        else:
            if pid == 0:
                child(fds)
            return
    try:
        middle = os.fork()
    except OSError:
        return
    if middle == 0:
        try:
            if os.fork() == 0:
                child(fds)
        finally:
            os._exit(0)
    os.waitpid(middle, 0)  # once it is reaped, the step's process is the supervisor's child
