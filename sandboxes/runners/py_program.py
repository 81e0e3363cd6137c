"""Runs INSIDE the sandbox: a `program` test (the dataset's own Python test code) in this process,
with the solution in ANOTHER process that it calls through stubs.

Usage: python3 -I py_program.py < job   (stdin: `marshal.dumps` of the job, written by the scorer)

    {"program": "<test code>", "tests": ["test_a", ...] | [], "names": ["f", ...],
     "serve": ["python3", "-I", "py_harness.py", "--serve"], "values": "proctor_values.py",
     "max_value_bytes": 65536}

The test program holds the expected values, so the solution must never reach it. This process:

1. reads its job from stdin (never from a file: nothing of the test program is on disk), loads the
   decoder of plain values (`values`, the scorer's own `reward_specs/code/values.py`, a shared
   file read before any solution runs), makes itself non-dumpable (so a process of the same user
   cannot ptrace it or open its /proc memory and descriptors) and ignores SIGINT (the only signal
   Python turns into an exception by default);
2. defines each name of `names` (the free names of the test program that are not builtins) as a
   stub, and a module `solution` whose attributes are stubs (`from solution import f`);
3. runs the test program; each top-level `def test_*` of `tests` (collected from the syntax tree
   by the scorer) is then called, one test each; with no `tests` the whole program is one test.

The solution runs in `serve` (`py_harness.py --serve`), exec'd afresh (a forked copy of this
process would hold the test program), with /dev/null on stdin, its stdout and stderr on this
process's stderr, and two pipes: calls go down as marshal data (builtin values only), results
come up as tagged JSON that `decode` turns into builtin values and nothing else. So no object of
the solution's exists here; whatever it returns, the test program's own `==` runs on plain data.
When the solution's process ends (os._exit, a crash, a closed pipe), the call fails, and the next
test starts a fresh one. Only this process writes to its stdout, one line per test:

    \\x1ePROCTOR {"i": 0, "status": "passed"|"wrong_answer"|"runtime_error"|"memory"|"output_limit",
                 "error": "...", "cpu_s": 0.01}
    \\x1ePROCTOR {"fatal": "..."}     (this runner could not set itself up: not the program's fault)
"""

from __future__ import annotations

import builtins
import contextlib
import json
import marshal
import os
import signal
import struct
import sys
import time
import types

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, NoReturn

_MARK = "\x1ePROCTOR "
_PR_SET_DUMPABLE = 4
_NOT_RAISED = (StopIteration, StopAsyncIteration)
"""Exception types of the solution raised here as RuntimeError: they would change control flow."""


class SolutionGone(Exception):
    """The solution's process ended or broke the call protocol."""


class TooLarge(Exception):
    """A returned value was larger than `max_value_bytes`."""


def _emit(fd: int, payload: dict[str, Any]) -> None:
    data = (_MARK + json.dumps(payload, separators=(",", ":")) + "\n").encode()
    while data:
        data = data[os.write(fd, data) :]


def _nondumpable() -> None:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")


def _raise_error(reply: dict[str, Any]) -> NoReturn:
    text = str(reply.get("err", "error"))[:300]
    if reply.get("memory"):
        raise MemoryError(text)
    kind = getattr(builtins, str(reply.get("type", "")), None)
    error: Exception = RuntimeError(text)
    if isinstance(kind, type) and issubclass(kind, Exception) and not issubclass(kind, _NOT_RAISED):
        with contextlib.suppress(TypeError):  # a constructor that wants more (UnicodeDecodeError)
            error = kind(text)
    raise error


class Solution:
    """The solution's process, started on the first call and again after it ended."""

    def __init__(self, argv: list[str], limit: int, decode: Callable[[Any], Any]) -> None:
        self.argv = argv
        self.limit = limit
        self.decode = decode
        self.pid = 0
        self.calls = -1
        self.replies: Any = None
        self.fatal: str | None = None
        self.cpu_s = 0.0

    def _start(self) -> None:
        calls_r, calls_w = os.pipe()
        replies_r, replies_w = os.pipe()
        os.set_inheritable(calls_r, True)
        os.set_inheritable(replies_w, True)
        try:
            self.pid = os.posix_spawnp(
                self.argv[0],
                [*self.argv, str(calls_r), str(replies_w), str(self.limit)],
                dict(os.environ),
                file_actions=[
                    (os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0),
                    (os.POSIX_SPAWN_DUP2, 2, 1),
                ],
            )
        finally:
            os.close(calls_r)
            os.close(replies_w)
        self.calls = calls_w
        self.replies = os.fdopen(replies_r, "rb")
        hello = self._reply()
        if "fatal" in hello:
            self.fatal = str(hello["fatal"])[:300]
        elif hello.get("ready") is not True:
            self.stop()
            raise SolutionGone("the solution's process did not start")

    def _reply(self) -> dict[str, Any]:
        line = self.replies.readline(self.limit + 1024)
        if not line.endswith(b"\n"):
            self.stop()
            if len(line) > self.limit:
                raise TooLarge("return value too large")
            raise SolutionGone("the solution's process ended")
        try:
            reply = json.loads(line)
        except (ValueError, RecursionError):
            reply = None
        if not isinstance(reply, dict):
            self.stop()
            raise SolutionGone("the solution's process sent a malformed reply")
        cpu = reply.get("cpu_s")
        if isinstance(cpu, float) and 0 <= cpu < 1e6:
            self.cpu_s += cpu
        return reply

    def stop(self) -> None:
        """Kill and reap the solution's process (the next call starts a fresh one)."""
        if self.calls >= 0:
            os.close(self.calls)
            self.replies.close()
            self.calls = -1
        if self.pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self.pid, 0)
            self.pid = 0
        self.fatal = None

    def call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        try:
            request = marshal.dumps((name, args, kwargs))
        except ValueError:
            raise TypeError("the test passed the solution a value that is not plain data") from None
        if self.calls < 0:
            self._start()
        if self.fatal is not None:
            raise RuntimeError(f"the solution failed to load: {self.fatal}")
        data = struct.pack(">I", len(request)) + request
        try:
            while data:
                data = data[os.write(self.calls, data) :]
        except OSError:
            self.stop()
            raise SolutionGone("the solution's process ended") from None
        reply = self._reply()
        if "ok" in reply:
            try:
                return self.decode(reply["ok"])
            except ValueError:  # values.Malformed
                raise TypeError("the solution returned malformed data") from None
        if "too_large" in reply:
            raise TooLarge("return value too large")
        if "unserialisable" in reply:
            raise TypeError(f"not plain data: {str(reply['unserialisable'])[:200]}")
        _raise_error(reply)

    def stub(self, name: str) -> Callable[..., Any]:
        def call_solution(*args: Any, **kwargs: Any) -> Any:
            return self.call(name, args, kwargs)

        call_solution.__name__ = call_solution.__qualname__ = name
        return call_solution


def _failure(exc: BaseException) -> tuple[str, str]:
    """A failed test's status and error text."""
    if isinstance(exc, SystemExit) and exc.code in (None, 0):
        return "passed", ""
    if isinstance(exc, AssertionError):
        status = "wrong_answer"
    elif isinstance(exc, MemoryError):
        status = "memory"
    elif isinstance(exc, TooLarge):
        status = "output_limit"
    else:
        status = "runtime_error"
    text = f"{type(exc).__name__}: {exc}"
    tb = exc.__traceback__
    line = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "test_program.py":
            line = tb.tb_lineno
        tb = tb.tb_next
    if line is not None:
        text = f"{text} (test program line {line})"
    return status, text[:300]


def _module(solution: Solution) -> types.ModuleType:
    """`solution`, for `from solution import f` and `solution.f(...)`."""
    module = types.ModuleType("solution")

    def attribute(name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return solution.stub(name)

    module.__getattr__ = attribute  # type: ignore[method-assign]
    return module


def _run(out: int, job: dict[str, Any], solution: Solution, namespace: dict[str, Any]) -> None:
    code = compile(job["program"], "test_program.py", "exec", dont_inherit=True)
    tests = list(job["tests"])
    started, solution_cpu = time.process_time(), solution.cpu_s
    top: BaseException | None = None
    try:
        exec(code, namespace)
    except BaseException as exc:  # noqa: BLE001 - the program's own failure is its verdict
        top = exc
    if isinstance(top, SystemExit) and top.code in (None, 0):
        top = None  # unittest.main() and sys.exit(0) end a program that passed
    for i, name in enumerate(tests or [None]):
        if i > 0:
            started, solution_cpu = time.process_time(), solution.cpu_s
        status, error = "passed", ""
        if top is not None:
            status, error = _failure(top)
        elif name is not None:
            try:
                namespace[name]()
            except BaseException as exc:  # noqa: BLE001 - this test's verdict
                status, error = _failure(exc)
        cpu = time.process_time() - started + solution.cpu_s - solution_cpu
        _emit(out, {"i": i, "status": status, "error": error, "cpu_s": round(cpu, 6)})
        if solution.pid and solution.calls < 0:
            solution.stop()
        elif solution.pid and os.waitpid(solution.pid, os.WNOHANG)[0]:
            solution.pid = 0  # it ended on its own: reaped; the next call starts a fresh one
            solution.stop()


def main() -> None:
    raw = sys.stdin.buffer.read()
    out = os.dup(1)
    os.dup2(2, 1)  # the test program's own prints go to stderr
    try:
        job = marshal.loads(raw)
        _nondumpable()
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        values: dict[str, Any] = {"__name__": "proctor_values"}
        with open(job["values"], "rb") as f:
            exec(compile(f.read(), "proctor_values.py", "exec", dont_inherit=True), values)
        solution = Solution(list(job["serve"]), int(job["max_value_bytes"]), values["decode"])
        sys.modules["solution"] = _module(solution)
        main_module = types.ModuleType("__main__")  # what unittest.main() looks in
        sys.modules["__main__"] = main_module
        namespace: dict[str, Any] = main_module.__dict__
        namespace["__builtins__"] = builtins
        namespace.update((name, solution.stub(name)) for name in job["names"])
    except Exception as exc:  # noqa: BLE001 - reported: the scorer makes it an infra_error
        _emit(out, {"fatal": f"{type(exc).__name__}: {exc}"[:300]})
        os._exit(0)
    _run(out, job, solution, namespace)
    solution.stop()
    os._exit(0)


if __name__ == "__main__":
    main()
