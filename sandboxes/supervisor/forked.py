"""Forked Python: a `python3` step run by a fork of the template (`template`), a copy of the
supervisor's interpreter taken before it read any request, already initialised, made to look like
a fresh `python3` to the program."""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # signal.signal()'s enum conversions slow a child
import atexit
import builtins
import io
import os
import sys
import traceback  # imported here, once, for the forked Python programs (see python_main)
import types
from typing import Any, NoReturn

from .kernel import PR_SET_DUMPABLE, prctl

# Called by the forked child by global name: there, in code run cold, each `module.name` writes to
# (copies the page of) the `name` string.
_atexit_clear = atexit._clear
_getsignal = _signal.getsignal
_getrecursionlimit, _setrecursionlimit, _getframe = (
    sys.getrecursionlimit,
    sys.setrecursionlimit,
    sys._getframe,
)
_os_close = os.close

Invocation = tuple[
    frozenset[str],
    str | None,
    str | None,
    list[str],
    types.CodeType | None,
    types.ModuleType | None,
]
"""How a forked Python step runs: (flags, script, -c code, args, the script's code when the
template compiled it already: a shared file, see `shared.preloaded`; and the `__main__` module
that code runs in, when the template made it, see `shared._preload`)."""

_EXECUTABLE: list[str] = []
"""This interpreter's real path, resolved once."""
_PY_FLAGS = frozenset("IESBus")
"""`python3` flags a forked interpreter honours; any other makes the step a real exec."""
STDLIB_PATH: list[str] = []
SITE_PATH: list[str] = []


_PY_SIGNALS = (
    (_signal.SIGINT, _signal.default_int_handler),
    (_signal.SIGPIPE, _signal.SIG_IGN),
    (_signal.SIGXFSZ, _signal.SIG_IGN),
)
"""The signal handlers `python3` starts with (that it sets itself)."""


def _which(name: str, path: str | None) -> str | None:
    """`shutil.which(name, path=path)` for a `name` without a "/", on POSIX, written out: the
    supervisor does not import `shutil` (with `bz2`, `lzma` and `zlib`, whose libraries every
    fork would then copy the mappings of)."""
    if path is None:
        path = os.environ.get("PATH")
        if path is None:
            try:
                path = os.confstr("CS_PATH")
            except (AttributeError, ValueError):
                path = os.defpath
    if not path:
        return None
    seen: set[str] = set()
    for folder in path.split(os.pathsep):
        if folder in seen:
            continue
        seen.add(folder)
        candidate = os.path.join(folder, name)
        if (
            os.path.exists(candidate)
            and os.access(candidate, os.F_OK | os.X_OK)
            and not os.path.isdir(candidate)
        ):
            return candidate
    return None


def python_invocation(argv: list[str], env: dict[str, str], workdir: str) -> Invocation | None:
    """(flags, script, code, args, None) when `argv`, run in `workdir`, runs this very
    interpreter on a script or `-c`.

    Such a step is run by the forked template itself, with Python already initialised (a
    fraction of a fresh interpreter's start-up). Anything else is exec'd."""
    exe = argv[0]
    if "/" in exe:
        found: str | None = os.path.join(workdir, exe)  # an absolute exe stays as it is
    else:
        found = _which(exe, env.get("PATH"))
    if not _EXECUTABLE:
        _EXECUTABLE.append(os.path.realpath(sys.executable))
    if found is None or os.path.realpath(found) != _EXECUTABLE[0]:
        return None
    flags: set[str] = set()
    i = 1
    while i < len(argv) and argv[i].startswith("-") and argv[i] != "-":
        opt = argv[i][1:]
        if opt == "c" and i + 1 < len(argv):
            return frozenset(flags), None, argv[i + 1], argv[i + 2 :], None, None
        if not opt or not set(opt) <= _PY_FLAGS:
            return None
        flags |= set(opt)
        i += 1
    if i >= len(argv) or argv[i] == "-":
        return None
    return frozenset(flags), argv[i], None, argv[i + 1 :], None, None


def _exit_status(exc: SystemExit) -> int:
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def _report_uncaught(exc: BaseException, tb: types.TracebackType | None) -> None:
    """Print an uncaught exception as the interpreter does: through `sys.excepthook` (the
    program's own, if it set one; the default adds the "Did you mean" hints)."""
    exc.__traceback__ = tb  # the default hook prints the exception's own traceback
    try:
        sys.excepthook(type(exc), exc, tb)
    except BaseException as hook_exc:  # noqa: BLE001 - reported like the interpreter does
        sys.stderr.write("Error in sys.excepthook:\n")
        hook_exc.__context__ = None  # the interpreter calls the hook outside any handler
        hook_tb = hook_exc.__traceback__
        hook_exc.__traceback__ = hook_tb.tb_next if hook_tb else None  # not our frame
        sys.__excepthook__(type(hook_exc), hook_exc, hook_exc.__traceback__)
        sys.stderr.write("\nOriginal exception was:\n")
        sys.__excepthook__(type(exc), exc, tb)


def _make_streams(unbuffered: bool) -> tuple[Any, Any, Any]:
    """sys.stdin/stdout/stderr over fds 0-2, as `python3` (with -u: `unbuffered`) opens them."""
    streams = []
    for fd in (0, 1, 2):
        raw = io.FileIO(fd, "rb" if fd == 0 else "wb", closefd=False)
        binary: Any = raw
        if fd == 0:
            binary = io.BufferedReader(raw)
        elif not unbuffered:
            binary = io.BufferedWriter(raw)
        streams.append(
            io.TextIOWrapper(
                binary,
                encoding="utf-8",
                # As `python3` under LC_ALL=C.UTF-8 (the programs' locale).
                errors="backslashreplace" if fd == 2 else "surrogateescape",
                line_buffering=fd == 2,
                write_through=unbuffered and fd != 0,
            )
        )
    return streams[0], streams[1], streams[2]


_SPARE_STREAMS: dict[bool, tuple[tuple[str, Any], ...]] = {}
"""Stdio objects a forked Python child installs, by `sys` attribute, made once per sandbox (by
`-u` or not) and never used by the template, so each child starts from a pristine copy:
allocating them in the child wrote to (copy-on-write faulted) pages of the template's heap in
every run."""
_SPARE_PATHS: dict[bool, list[str]] = {}
"""The `sys.path` a forked `python3 -I` child installs (by `-S` or not), made as the streams are:
the child rebinds `sys.path` to its copy instead of rewriting the template's list in place."""
DEPTH: list[int] = []
"""How deep `python_main` runs in a step's process, set by the template (`template._serve`)."""
_REPLACED: list[Any] = []
"""The template's own stdio objects, `sys.path`, `sys.argv` and `__main__`, which a child
replaces: referenced here too, so that a child replacing them does not also free (and finalise)
them."""
_STDIO_NAMES = ("stdin", "__stdin__", "stdout", "__stdout__", "stderr", "__stderr__")


def spare_streams(unbuffered: bool) -> None:
    """In the template, before it forks any step: make the spare streams if not yet made.
    They are made over a pipe dup'd onto fds 0-2, as every child's stdio are pipes, so what they
    learn of their file at creation (not seekable) is what a child's `python3` would learn."""
    if unbuffered in _SPARE_STREAMS:
        return
    r, w = os.pipe()
    saved = [os.dup(fd) for fd in (0, 1, 2)]
    try:
        for fd in (0, 1, 2):
            os.dup2(r if fd == 0 else w, fd)
        streams = _make_streams(unbuffered)
        for s in streams:
            s.seekable()  # asked (and cached by the raw file) while fds 0-2 are pipes
    finally:
        for fd, old in zip((0, 1, 2), saved, strict=True):
            os.dup2(old, fd)
            os.close(old)
        os.close(r)
        os.close(w)
    _SPARE_STREAMS[unbuffered] = _stdio_attributes(streams)
    if not _SPARE_PATHS:
        _SPARE_PATHS.update({True: list(STDLIB_PATH), False: list(SITE_PATH)})
        _REPLACED.extend((sys.path, sys.argv, sys.modules["__main__"]))
        _REPLACED.extend(getattr(sys, name) for name in _STDIO_NAMES)


def _stdio_attributes(streams: tuple[Any, Any, Any]) -> tuple[tuple[str, Any], ...]:
    """(name, stream) for each `sys` attribute (stdin, stdout, stderr) are bound to."""
    return tuple(zip(_STDIO_NAMES, (s for s in streams for _ in (0, 1)), strict=True))


def _python_streams(unbuffered: bool) -> None:
    """Install the spare stdio objects (`spare_streams`) as sys.stdin/stdout/stderr."""
    attributes = _SPARE_STREAMS.get(unbuffered) or _stdio_attributes(_make_streams(unbuffered))
    for name, stream in attributes:
        setattr(sys, name, stream)


_ADOPTED_ENV: list[dict[str, str] | None] = [None]
"""The environment last made the template's own (`adopt_environ`)."""


def adopt_environ(env: dict[str, str]) -> None:
    """Make the template's own environment the runs' `env` (the same in every request of a
    sandbox, so it changes once): a forked Python child then need not rebuild `os.environ`,
    which costs it copy-on-write faults. Exec'd programs get `env` explicitly."""
    if _ADOPTED_ENV[0] is not env and _ADOPTED_ENV[0] != env:  # not compared to itself
        os.environ.clear()
        os.environ.update(env)
    _ADOPTED_ENV[0] = env


def _become_python(
    flags: frozenset[str],
    script: str | None,
    args: list[str],
    env: dict[str, str],
    main: types.ModuleType | None,
) -> types.ModuleType:
    """Give this forked child the process and interpreter state of a fresh `python3` about to
    run `script` (None: `-c`); returns its `__main__` module (`main` if the supervisor made it)."""
    prctl(PR_SET_DUMPABLE, 1)  # it is the program's process now
    _atexit_clear()
    if _ADOPTED_ENV[0] is not env:
        os.environ.clear()
        os.environ.update(env)
    for sig, handler in _PY_SIGNALS:
        if _getsignal(sig) != handler:  # usually the supervisor's own already
            _signal.signal(sig, handler)
    path = _SPARE_PATHS.get("S" in flags) or list(STDLIB_PATH if "S" in flags else SITE_PATH)
    if "I" not in flags:
        path = [os.path.dirname(os.path.abspath(script)) if script else "", *path]
    sys.path = path
    sys.argv = [script if script is not None else "-c", *args]
    sys.dont_write_bytecode = True
    _python_streams("u" in flags)
    if main is None:
        main = types.ModuleType("__main__")
        main.__dict__.update(__builtins__=builtins, __cached__=None, __loader__=None, __spec__=None)
        if script is not None:
            main.__file__ = os.path.abspath(script)
    sys.modules["__main__"] = main
    return main


def _program_source(program: str, script: str | None, code: str | None) -> bytes | str:
    """The script's bytes (or the `-c` code); a script that cannot be read ends the process as
    `python3` does, with status 2."""
    if script is None:
        return code or ""
    try:
        with open(script, "rb") as f:
            return f.read()
    except OSError as exc:
        message = (
            f"{program}: can't open file {os.path.abspath(script)!r}: [Errno {exc.errno}] "
            f"{exc.strerror}\n"
        )
        os.write(2, message.encode())
        os._exit(2)


def _exit_python(status: int) -> NoReturn:
    """End as the interpreter does: join threads, run atexit handlers, flush, exit."""
    try:
        threading = sys.modules.get("threading")
        if threading is not None:
            threading._shutdown()
        atexit._run_exitfuncs()
    except SystemExit as exc:
        status = _exit_status(exc)
    except BaseException as exc:  # noqa: BLE001 - as the interpreter at exit
        traceback.print_exception(type(exc), exc, exc.__traceback__)
    for std in (sys.stdout, sys.stderr):
        try:
            std.flush()
        except BaseException:  # noqa: BLE001 - CPython exits 120 when the final flush fails
            status = 120
    os._exit(status)


def stack_depth(frame: types.FrameType | None) -> int:
    """How many frames deep `frame` runs (itself included)."""
    depth = 0
    while frame is not None:
        depth += 1
        frame = frame.f_back
    return depth


def _own_depth() -> int:
    """How many frames deep the caller runs: the depth `DEPTH` says, if one look at the stack
    confirms it (the outermost frame is that far down), else counted frame by frame (each frame
    object made on the way is memory the child writes)."""
    expected = DEPTH[0] if DEPTH else 0
    try:
        if expected and _getframe(expected).f_back is None:
            return expected
    except ValueError:  # not that deep
        pass
    return stack_depth(sys._getframe(1))


def python_main(
    program: str,
    invocation: Invocation,
    env: dict[str, str],
) -> NoReturn:
    """Become `python3 [flags] script args` (or `-c code`) in this forked child, then exit."""
    flags, script, code, args, compiled, preloaded = invocation
    main = _become_python(flags, script, args, env, preloaded)
    # The program starts this many frames deep: give them back to its recursion limit.
    _setrecursionlimit(_getrecursionlimit() + _own_depth() + 1)  # + the exec() call itself
    # A shared file the template compiled already (`compiled`) is unchanged since.
    filename: str = ""
    source: bytes | str = ""
    if compiled is None:
        filename = os.path.abspath(script) if script is not None else "<string>"
        source = _program_source(program, script, code)
    _os_close(3)  # the exec-error pipe: from here on, failures are the program's
    status = 0
    try:
        # compile() here, not in a helper: a traceback shows no frame of ours (tb_next below)
        # dont_inherit: not this module's `from __future__ import annotations` (python3 evaluates
        # a program's annotations: `def f(x: List[int])` without its import is a NameError).
        exec(compiled or compile(source, filename, "exec", dont_inherit=True), main.__dict__)
    except SystemExit as exc:
        status = _exit_status(exc)
    except BaseException as exc:  # noqa: BLE001 - printed like the interpreter does, exit 1
        _report_uncaught(exc, exc.__traceback__.tb_next if exc.__traceback__ else None)
        status = 1
    _exit_python(status)
