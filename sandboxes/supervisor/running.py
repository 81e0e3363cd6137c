"""A step's process while it runs, as the supervisor sees it: its pipes (stdin fed, stdout and
stderr gathered under the output limit, the exec-error pipe) and what watching it has seen."""

from __future__ import annotations

import fcntl
import os
import select
from select import POLLIN, POLLOUT, poll

READ_CHUNK = 65536


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


READ_BUFFER = bytearray(READ_CHUNK)
"""What the supervisor reads a pipe or a /proc file into, the same buffer every time: os.read
would allocate (and write to) a buffer of the whole size at a new place of the heap each call."""
_CHUNK_VIEW = memoryview(READ_BUFFER)
_CHUNKS = (READ_BUFFER,)


def read_some(fd: int) -> int:
    """One read of `fd` into `READ_BUFFER`; returns how many bytes it holds now (0: end of file)."""
    return os.readv(fd, _CHUNKS)


def _drain(fd: int, buf: bytearray, total: int, cap: int) -> int:
    """Read what is in the (non-blocking) pipe into `buf`, keeping at most `cap` bytes over all
    outputs; returns the new total, which exceeds `cap` when the output limit was passed."""
    while total <= cap:
        try:
            n = read_some(fd)
        except OSError:  # BlockingIOError too: nothing more to read now
            break
        if not n:
            break
        buf += _CHUNK_VIEW[: min(n, max(cap - total, 0))]
        total += n
    return total


class RunningStep:
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
        # The step's parameters come first (`child._Params`): written now, so that its process finds
        # them as soon as it starts, without waiting for us to hear its pid.
        os.set_blocking(self.stdin_w, False)
        try:  # noqa: SIM105 - not contextlib.suppress: more objects each step touches
            self.view = self.view[os.write(self.stdin_w, self.view[:READ_CHUNK]) :]
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
        while n := read_some(self.exc_r):
            data += READ_BUFFER[:n]
        os.close(self.exc_r)
        return data
