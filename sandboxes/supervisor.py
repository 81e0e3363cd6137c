"""The trusted supervisor that runs inside every sandbox (standard library only, Python >= 3.9).

It is long-lived: a backend starts it once per sandbox (a bubblewrap jail, a container, or a plain
process for the `unsafe` backend) and sends it one request at a time as length-prefixed JSON frames
on stdin; results come back the same way on stdout. The backend does not run this file from disk: it
starts the interpreter with `BOOTSTRAP` (below), which reads this module's source from stdin and
executes it, so the same code runs in every backend and the service's files need not be visible.

Per request: a fresh private work directory with the request's files, then for the build step and
each execution a forked child which, before `exec`: starts its own session, sets rlimits (CPU, AS,
NPROC, FSIZE, NOFILE, CORE), becomes the run user (when the supervisor is root), sets
no-new-privileges and gets a clean environment. The supervisor is a child subreaper, so every
process of the run, orphaned or not, is eventually reaped here; the CPU time of all of them (from
`wait4`, and `/proc/<pid>/stat` while they are alive) is charged to the request's budget. After each
execution everything the run left behind is killed and reaped; after each request the work
directory and the private /tmp, /var/tmp and /dev/shm are emptied.

Frames travel on stdin/stdout, or, when the config names a Unix socket (`connect`, the docker
backend's `socket` transport), on that socket: the supervisor connects once at start, sends
{"kind": "token", "token": ...} and uses the connection for every frame after.

Frames: 4-byte big-endian length + UTF-8 JSON. Backend -> supervisor: a request object (see
`_run_request`). Supervisor -> backend: {"kind": "ready"} once, then per request one
{"kind": "result", "index": i, "result": {...}} per step (index -1 is the build) and
{"kind": "done", "recycle": bool, ...}, all flushed together at the end; or
{"kind": "error", "message": str} when the supervisor itself failed (the backend then discards
this sandbox).
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # signal.signal()'s enum conversions cost a child
import atexit
import base64
import builtins
import contextlib
import ctypes
import errno
import fcntl
import gc
import io
import json
import math
import os
import resource
import select
import shutil
import signal
import struct
import sys
import time
import traceback  # imported here, once, for the forked Python programs (see _python_main)
import types
from typing import Any, BinaryIO, NoReturn, TypedDict

PROTOCOL_VERSION = 1

# The interpreter's command line: read a 4-byte length and that much source from stdin, execute it.
BOOTSTRAP = (
    "import sys;sys.path[:]=[p for p in sys.path if p not in ('','.')];import struct;"
    "r=sys.stdin.buffer;n=struct.unpack('>I',r.read(4))[0];"
    "g={'__name__':'__proctor_supervisor__'};exec(compile(r.read(n),'supervisor','exec'),g);"
    "g['main'](sys.argv[1])"
)
"""Run as `python3 -S -c BOOTSTRAP CONFIG_JSON` with PYTHONHASHSEED=0 in the environment (so that
forked Python programs hash like `python3` started with PYTHONHASHSEED=0)."""

_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_DUMPABLE = 4
_PR_SET_CHILD_SUBREAPER = 36
_CLK_TCK = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")
_READ_CHUNK = 65536
_POLL_S = 0.02
_MEMORY_MARKERS: tuple[bytes, ...] = (b"MemoryError", b"std::bad_alloc", b"Cannot allocate memory")
# The JVM, Node, Go and Rust say so in these words.
_MEMORY_MARKERS += (b"java.lang.OutOfMemoryError", b"heap out of memory", b"runtime: out of memory")
_MEMORY_MARKERS += (b"memory allocation of",)

_libc = ctypes.CDLL(None, use_errno=True)


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
    """`python3` steps run in a fork of the supervisor (see `_python_invocation`)."""
    tmpdir: str | None
    """TMPDIR of the programs (None: /tmp)."""
    connect: str | None
    """The backend's Unix socket, used for frames instead of stdin/stdout."""
    token: str
    """Sent first on that socket, so the backend knows it is us."""


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
}


def supervisor_config(given: dict[str, Any]) -> SupervisorConfig:
    """`given` over the defaults; a key the supervisor does not know is a backend's mistake."""
    unknown = set(given) - set(SupervisorConfig.__annotations__)
    if unknown or "work_root" not in given:
        raise ValueError(f"bad supervisor configuration: unknown {sorted(unknown)} or no work_root")
    config: SupervisorConfig = {**CONFIG_DEFAULTS, **given}  # type: ignore[typeddict-item]
    return config


def _prctl(option: int, value: int) -> None:
    if _libc.prctl(option, value, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl({option}) failed: {os.strerror(err)}")


SECCOMP_ARCHES = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
"""The architectures the seccomp filter knows (uname machine: AUDIT_ARCH_*); on any other
nothing is installed."""

SYSCALL_NUMBERS: dict[str, tuple[int | None, int | None]] = {
    # name: (x86_64, aarch64), in SECCOMP_ARCHES' order; None where the architecture has none.
    # Checked by argument: namespace flags, AF_VSOCK, personality values other than Docker's.
    "clone": (56, 220),
    "socket": (41, 198),
    "personality": (135, 92),
    # ENOSYS, so that the C library falls back to clone (whose flags a filter can read)
    "clone3": (435, 435),
    # EPERM from here on. New namespaces.
    "unshare": (272, 97),
    "setns": (308, 268),
    # io_uring
    "io_uring_setup": (425, 425),
    "io_uring_enter": (426, 426),
    "io_uring_register": (427, 427),
    # mounts and file systems
    "mount": (165, 40),
    "umount2": (166, 39),
    "mount_setattr": (442, 442),
    "open_tree": (428, 428),
    "open_tree_attr": (467, 467),
    "move_mount": (429, 429),
    "fsopen": (430, 430),
    "fsconfig": (431, 431),
    "fsmount": (432, 432),
    "fspick": (433, 433),
    "pivot_root": (155, 41),
    "chroot": (161, 51),
    "swapon": (167, 224),
    "swapoff": (168, 225),
    "quotactl": (179, 60),
    "quotactl_fd": (443, 443),
    "open_by_handle_at": (304, 265),
    "fanotify_init": (300, 262),
    "lookup_dcookie": (212, 18),
    "ustat": (136, None),
    "sysfs": (139, None),
    "uselib": (134, None),
    "_sysctl": (156, None),
    # kernel objects and introspection that exploits build on
    "bpf": (321, 280),
    "perf_event_open": (298, 241),
    "userfaultfd": (323, 282),
    "kcmp": (312, 272),
    "pidfd_getfd": (438, 438),
    "process_madvise": (440, 440),
    "syslog": (103, 116),
    # kernel keyrings: a key outlives its process, in a keyring per uid
    "add_key": (248, 217),
    "request_key": (249, 218),
    "keyctl": (250, 219),
    # the machine's administration
    "reboot": (169, 142),
    "kexec_load": (246, 104),
    "kexec_file_load": (320, 294),
    "init_module": (175, 105),
    "finit_module": (313, 273),
    "delete_module": (176, 106),
    "acct": (163, 89),
    "settimeofday": (164, 170),
    "clock_settime": (227, 112),
    "sethostname": (170, 161),
    "setdomainname": (171, 162),
    "vhangup": (153, 58),
    "iopl": (172, None),
    "ioperm": (173, None),
    # NUMA memory policy
    "mbind": (237, 235),
    "set_mempolicy": (238, 237),
    "get_mempolicy": (239, 236),
    "migrate_pages": (256, 238),
    "move_pages": (279, 239),
    "set_mempolicy_home_node": (450, 450),
}
"""Every system call the filter looks at; the README's "System calls" section says why each."""

ARG_CHECKED = ("clone", "socket", "personality")
NOT_IMPLEMENTED = ("clone3",)
REFUSED = tuple(name for name in SYSCALL_NUMBERS if name not in ARG_CHECKED + NOT_IMPLEMENTED)
LAST_REVIEWED_SYSCALL = 469
"""The highest system call number reviewed (file_setattr, Linux 6.17; the numbering has been
shared by both architectures since 424). Later ones fail with ENOSYS, as on an older kernel."""

_CLONE_NAMESPACE_FLAGS = 0x7E020000  # CLONE_NEWNS, NEWCGROUP, NEWUTS, IPC, USER, PID, NET
_AF_VSOCK = 40
_PERSONALITIES = (0x0, 0x8, 0x20000, 0x20008, 0xFFFFFFFF)  # Docker's: PER_LINUX(32), UNAME26, query
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_LD_W_ABS, _JEQ, _JGE, _JGT, _JSET, _RET = 0x20, 0x15, 0x35, 0x25, 0x45, 0x06
_ALLOW, _ERRNO = 0x7FFF0000, 0x00050000  # SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO (| errno)
_NR, _ARCH, _ARG0 = 0, 4, 16  # offsets in struct seccomp_data (arg 0: its low 32 bits)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]


_Insn = tuple[int, int | str, int | str, int]
"""(opcode, jump if true, jump if false, k): a jump is an offset or the name of a label."""


def _assemble(items: list[_Insn | str]) -> bytes:
    """Classic BPF from instructions whose jump offsets may name a label (a str item)."""
    labels: dict[str, int] = {}
    insns: list[_Insn] = []
    for item in items:
        if isinstance(item, str):
            labels[item] = len(insns)
        else:
            insns.append(item)
    code = b""
    for i, (op, jt, jf, k) in enumerate(insns):
        jumps = [labels[j] - i - 1 if isinstance(j, str) else j for j in (jt, jf)]
        if not all(0 <= j < 256 for j in jumps):
            raise ValueError(f"seccomp jump out of range at instruction {i}")
        code += struct.pack("HBBI", op, jumps[0], jumps[1], k)
    return code


def syscall_numbers(machine: str) -> dict[str, int]:
    """The numbers of `SYSCALL_NUMBERS` on `machine` (one of `SECCOMP_ARCHES`), by name."""
    column = list(SECCOMP_ARCHES).index(machine)
    found: dict[str, int] = {}
    for name, numbers in SYSCALL_NUMBERS.items():
        number = numbers[column]
        if number is not None:
            found[name] = number
    return found


def seccomp_program(machine: str) -> bytes | None:
    """The filter for `machine` (see `_refuse_system_calls`), None for an unknown one.

    Only `clone`, `socket` and `personality` read an argument, so the kernel can decide every
    other call from its number alone, once, when the filter is installed (its seccomp cache)."""
    arch = SECCOMP_ARCHES.get(machine)
    if arch is None:
        return None
    nr = syscall_numbers(machine)
    eperm, enosys = _ERRNO | errno.EPERM, _ERRNO | errno.ENOSYS
    items: list[_Insn | str] = [
        (_LD_W_ABS, 0, 0, _ARCH),
        (_JEQ, 0, "eperm", arch),  # another ABI (i386, arm32)
        (_LD_W_ABS, 0, 0, _NR),
        (_JGE, "eperm", 0, 0x40000000),  # x32
        (_JGT, "enosys", 0, LAST_REVIEWED_SYSCALL),
        *((_JEQ, name, 0, nr[name]) for name in ARG_CHECKED),  # to the label of that name
        *((_JEQ, "enosys", 0, nr[name]) for name in NOT_IMPLEMENTED),
        *((_JEQ, "eperm", 0, nr[name]) for name in REFUSED if name in nr),
        (_RET, 0, 0, _ALLOW),
        "clone",
        (_LD_W_ABS, 0, 0, _ARG0),
        (_JSET, "eperm", 0, _CLONE_NAMESPACE_FLAGS),
        (_RET, 0, 0, _ALLOW),
        "socket",
        (_LD_W_ABS, 0, 0, _ARG0),
        (_JEQ, "eperm", 0, _AF_VSOCK),
        (_RET, 0, 0, _ALLOW),
        "personality",
        (_LD_W_ABS, 0, 0, _ARG0),
        *((_JEQ, "allowed", 0, value) for value in _PERSONALITIES),
        (_RET, 0, 0, eperm),
        "allowed",
        (_RET, 0, 0, _ALLOW),
        "eperm",
        (_RET, 0, 0, eperm),
        "enosys",
        (_RET, 0, 0, enosys),
    ]
    return _assemble(items)


def _refuse_system_calls() -> None:
    """Install a seccomp filter on this supervisor, inherited by every run, refusing the kernel
    surface Docker's default profile refuses a process without capabilities and no solution
    needs: new namespaces, io_uring, mounts, keyrings, bpf, perf, userfaultfd, the machine's
    administration, AF_VSOCK and other ABIs (sandboxes/README.md lists them all and why). The
    same on every backend: on docker it stacks on the engine's own profile, whatever its
    version, and where both refuse a call the errno a program sees is this filter's."""
    code = seccomp_program(os.uname().machine)
    if code is None:
        return
    fprog = _SockFprog(len(code) // 8, code)
    if _libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"seccomp filter refused: {os.strerror(err)}")


# ----------------------------------------------------------------------------- framing


def _read_exact(stream: BinaryIO, n: int) -> bytes | None:
    data = stream.read(n)
    if data is None or len(data) < n:
        return None
    return data


def _read_frame(stream: BinaryIO) -> Any:
    head = _read_exact(stream, 4)
    if head is None:
        return None
    (n,) = struct.unpack(">I", head)
    body = _read_exact(stream, n)
    if body is None:
        return None
    return json.loads(body.decode("utf-8"))


class _Outbox:
    """Frames for the backend, written to fd 1 with os.write when flushed.

    Not a buffered file object on purpose: a forked child inherits whatever is buffered, and a
    buffered writer could flush it into the program's stdout (which is fd 1 in the child)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buf = bytearray()

    def write(self, data: bytes) -> None:
        self.buf += data

    def flush(self) -> None:
        data = bytes(self.buf)
        self.buf.clear()
        while data:
            data = data[os.write(self.fd, data) :]


_KEEP: list[Any] = []
"""The interpreter's own stdout object, kept alive so that it is never finalized (and flushed)."""


def _write_frame(out: _Outbox, obj: Any, flush: bool = True) -> None:
    body = json.dumps(obj, separators=(",", ":")).encode("utf-8")
    out.write(struct.pack(">I", len(body)) + body)
    if flush:
        out.flush()


# ----------------------------------------------------------------------------- process tree


def _children(pid: int) -> list[int]:
    """Direct children of `pid` (all its threads), from /proc/<pid>/task/*/children."""
    found: list[int] = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                found.extend(int(p) for p in f.read().split())
        except OSError:
            continue
    return found


def _descendants(root: int) -> list[int]:
    seen = []
    stack = _children(root)
    while stack:
        pid = stack.pop()
        seen.append(pid)
        stack.extend(_children(pid))
    return seen


def _live_usage(pids: list[int]) -> tuple[float, int]:
    """CPU seconds (utime + stime, plus that of their reaped children) and resident bytes, summed
    over live processes."""
    ticks = 0
    pages = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        # fields[0] is field 3 (state): utime=14, stime=15, cutime=16, cstime=17, rss=24
        ticks += int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])
        pages += int(fields[21])
    return ticks / _CLK_TCK, pages * _PAGE


def _rusage_cpu(ru: resource.struct_rusage) -> float:
    return ru.ru_utime + ru.ru_stime


class _Reaper:
    """Kills and reaps every descendant of the supervisor, summing their CPU time."""

    def __init__(self, use_kill_all: bool) -> None:
        self.use_kill_all = use_kill_all
        self.me = os.getpid()

    def run_processes(self) -> list[int]:
        """The run's live (or not yet reaped) processes. As our PID namespace's init, every
        process in it but us, from one listing of /proc: a walk of the process tree costs two
        reads per process, which adds up when a fork bomb leaves us a sliver of the CPU."""
        if self.use_kill_all:
            return [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != self.me]
        return _descendants(self.me)

    def reap_ready(self, statuses: dict[int, int]) -> float:
        """Reap whatever has exited; returns the CPU seconds of the reaped processes."""
        cpu = 0.0
        while True:
            try:
                pid, status, ru = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                return cpu
            if pid == 0:
                return cpu
            cpu += _rusage_cpu(ru)
            statuses[pid] = status

    def kill_all(self, statuses: dict[int, int]) -> tuple[float, set[int]]:
        """SIGKILL every descendant until none is left; returns (CPU seconds, pids killed)."""
        cpu = 0.0
        killed = set()
        deadline = time.monotonic() + 30.0
        while time.monotonic() < deadline:
            if self.use_kill_all:
                # Alone in our PID namespace (with its init): all other processes are the run's.
                with contextlib.suppress(ProcessLookupError):
                    os.kill(-1, signal.SIGKILL)
            direct = _children(self.me)
            for pid in direct + [p for c in direct for p in _descendants(c)]:
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed.add(pid)
                except ProcessLookupError:
                    continue
            if direct:
                # Every direct child was just sent SIGKILL, so this returns soon.
                try:
                    pid, status, ru = os.wait4(-1, 0)
                except ChildProcessError:
                    return cpu, killed
                cpu += _rusage_cpu(ru)
                statuses[pid] = status
            cpu += self.reap_ready(statuses)
            if not direct:
                try:
                    if os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
                        time.sleep(0.001)  # a child being reparented to us right now
                except ChildProcessError:
                    return cpu, killed
        raise RuntimeError("could not kill the run's processes within 30 s")


# ----------------------------------------------------------------------------- forked Python

_Invocation = tuple[frozenset[str], str | None, str | None, list[str], types.CodeType | None]
"""How a forked Python step runs: (flags, script, -c code, args, the script's code when the
supervisor compiled it already: a shared file, see `_shared_code`)."""

_EXECUTABLE: list[str] = []
"""This interpreter's real path, resolved once."""
_PY_FLAGS = frozenset("IESBus")
"""`python3` flags a forked interpreter honours; any other makes the step a real exec."""
_STDLIB_PATH: list[str] = []
_SITE_PATH: list[str] = []


def _python_invocation(argv: list[str], env: dict[str, str], workdir: str) -> _Invocation | None:
    """(flags, script, code, args, None) when `argv`, run in `workdir`, runs this very
    interpreter on a script or `-c`.

    Such a step is run by the forked supervisor itself, with Python already initialised (a
    fraction of a fresh interpreter's start-up). Anything else is exec'd."""
    exe = argv[0]
    if "/" in exe:
        found: str | None = os.path.join(workdir, exe)  # an absolute exe stays as it is
    else:
        found = shutil.which(exe, path=env.get("PATH"))
    if not _EXECUTABLE:
        _EXECUTABLE.append(os.path.realpath(sys.executable))
    if found is None or os.path.realpath(found) != _EXECUTABLE[0]:
        return None
    flags: set[str] = set()
    i = 1
    while i < len(argv) and argv[i].startswith("-") and argv[i] != "-":
        opt = argv[i][1:]
        if opt == "c" and i + 1 < len(argv):
            return frozenset(flags), None, argv[i + 1], argv[i + 2 :], None
        if not opt or not set(opt) <= _PY_FLAGS:
            return None
        flags |= set(opt)
        i += 1
    if i >= len(argv) or argv[i] == "-":
        return None
    return frozenset(flags), argv[i], None, argv[i + 1 :], None


def _compile(source: bytes | str, filename: str) -> types.CodeType:
    """A shared script's code, compiled as `_python_main` compiles a program: with no future
    flags of this module (`dont_inherit`), as `python3` would compile it."""
    return compile(source, filename, "exec", dont_inherit=True)


_SHARED_CODE: dict[tuple[str, str], types.CodeType] = {}
"""Shared files compiled as scripts, by (blob key, file name); emptied with the blobs."""


def _shared_code(invocation: _Invocation, workdir: str, shared_keys: dict[str, str]) -> _Invocation:
    """The invocation with its script's code when the script is a shared file of this request
    (trusted, and unchanged: no program has run yet in this request); compiled here once per
    supervisor, not in every run's child, where compiling costs page faults on the compiler."""
    flags, script, code, args, _ = invocation
    if script is None:
        return invocation
    filename = os.path.abspath(os.path.join(workdir, script))
    key = shared_keys.get(os.path.relpath(filename, workdir))
    if key is None:
        return invocation
    compiled = _SHARED_CODE.get((key, filename))
    if compiled is None:
        compiled = _SHARED_CODE[key, filename] = _compile(_BLOBS[key], filename)
    return flags, script, code, args, compiled


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


_SPARE_STREAMS: dict[bool, tuple[Any, Any, Any]] = {}
"""Stdio objects a forked Python child installs, made once per sandbox (by `-u` or not) and never
used by the supervisor, so each child starts from a pristine copy: allocating them in the child
wrote to (copy-on-write faulted) a hundred pages of the supervisor's heap in every run."""


def _spare_streams(unbuffered: bool) -> None:
    """In the supervisor, before forking a Python step: make the spare streams if not yet made.
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
    _SPARE_STREAMS[unbuffered] = streams


def _python_streams(unbuffered: bool) -> None:
    """Install the spare stdio objects (`_spare_streams`) as sys.stdin/stdout/stderr."""
    streams = _SPARE_STREAMS.get(unbuffered) or _make_streams(unbuffered)
    for name, stream in zip(("stdin", "stdout", "stderr"), streams, strict=True):
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)


_ADOPTED_ENV: list[dict[str, str] | None] = [None]
"""The environment last made the supervisor's own (`_adopt_environ`)."""


def _adopt_environ(env: dict[str, str]) -> None:
    """Make the supervisor's own environment the runs' `env` (the same in every request of a
    sandbox, so it changes once): a forked Python child then need not rebuild `os.environ`,
    which cost it a hundred copy-on-write faults. Exec'd programs get `env` explicitly."""
    if _ADOPTED_ENV[0] != env:
        os.environ.clear()
        os.environ.update(env)
    _ADOPTED_ENV[0] = env


def _become_python(
    flags: frozenset[str], script: str | None, args: list[str], env: dict[str, str]
) -> types.ModuleType:
    """Give this forked child the process and interpreter state of a fresh `python3` about to
    run `script` (None: `-c`); returns its `__main__` module."""
    _prctl(_PR_SET_DUMPABLE, 1)  # it is the program's process now
    atexit._clear()
    if _ADOPTED_ENV[0] is not env:
        os.environ.clear()
        os.environ.update(env)
    _signal.signal(_signal.SIGINT, _signal.default_int_handler)
    _signal.signal(_signal.SIGPIPE, _signal.SIG_IGN)
    _signal.signal(_signal.SIGXFSZ, _signal.SIG_IGN)
    path = list(_STDLIB_PATH if "S" in flags else _SITE_PATH)
    if "I" not in flags:
        path.insert(0, os.path.dirname(os.path.abspath(script)) if script else "")
    sys.path[:] = path
    sys.argv = [script if script is not None else "-c", *args]
    sys.dont_write_bytecode = True
    _python_streams("u" in flags)
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


def _python_main(
    program: str,
    invocation: _Invocation,
    env: dict[str, str],
) -> NoReturn:
    """Become `python3 [flags] script args` (or `-c code`) in this forked child, then exit."""
    flags, script, code, args, compiled = invocation
    main = _become_python(flags, script, args, env)
    # The program starts this many frames deep: give them back to its recursion limit.
    depth = 0
    frame = sys._getframe()
    while frame is not None:
        depth += 1
        frame = frame.f_back  # type: ignore[assignment]
    sys.setrecursionlimit(sys.getrecursionlimit() + depth + 1)  # + the exec() call itself
    filename = os.path.abspath(script) if script is not None else "<string>"
    # A shared file the supervisor compiled already (`compiled`) is unchanged since.
    source = "" if compiled is not None else _program_source(program, script, code)
    os.close(3)  # the exec-error pipe: from here on, failures are the program's
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


# ----------------------------------------------------------------------------- one step


_OOM_ADJ_WRITABLE = True
"""Whether a run's processes can raise their own OOM score (not where, as the docker backend's
non-root supervisor, our /proc entries are root-owned): decided once, at start."""


def _set_rlimit(which: int, value: int) -> None:
    try:
        resource.setrlimit(which, (value, value))
    except (ValueError, OSError):
        _, hard = resource.getrlimit(which)
        capped = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(which, (capped, hard))


def _child(
    argv: list[str],
    workdir: str,
    env: dict[str, str],
    limits: dict[str, Any],
    cpu_s: float,
    fds: tuple[int, int, int, int],
    cfg: SupervisorConfig,
    invocation: _Invocation | None,
) -> NoReturn:
    """In the forked child: confine ourselves, then exec (or become the forked Python program
    `invocation`, decided by the parent). Never returns.

    Every page this child writes to is a copy-on-write fault, so it runs as little Python as it
    can: no text-mode `open` (codec and locale machinery), no path resolution."""
    stdin_r, stdout_w, stderr_w, err_w = fds
    try:
        os.setsid()
        if _OOM_ADJ_WRITABLE:
            try:
                adj = os.open("/proc/self/oom_score_adj", os.O_WRONLY | os.O_CLOEXEC)
                try:
                    os.write(adj, b"1000")
                finally:
                    os.close(adj)
            except OSError:
                pass
        os.dup2(stdin_r, 0)
        os.dup2(stdout_w, 1)
        os.dup2(stderr_w, 2)
        os.dup2(err_w, 3)
        os.closerange(4, 65536)
        os.set_inheritable(3, False)
        _signal.signal(_signal.SIGPIPE, _signal.SIG_DFL)
        _signal.signal(_signal.SIGXFSZ, _signal.SIG_DFL)
        # A backstop a second or more past the budget: the supervisor's polling acts first.
        cpu_limit = int(cpu_s) + 2
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_limit, cpu_limit + 1))
        address_space = limits.get("address_space_bytes") or limits["memory_bytes"]
        _set_rlimit(resource.RLIMIT_AS, int(address_space))
        _set_rlimit(resource.RLIMIT_FSIZE, int(limits["file_size_bytes"]))
        _set_rlimit(resource.RLIMIT_NOFILE, cfg["nofile"])
        _set_rlimit(resource.RLIMIT_CORE, 0)
        # No POSIX message queue can be made: one would outlive the run, readable by the next.
        _set_rlimit(resource.RLIMIT_MSGQUEUE, 0)
        stack = min(int(limits["memory_bytes"]), 256 * 1024 * 1024)
        _set_rlimit(resource.RLIMIT_STACK, int(limits.get("stack_bytes") or stack))
        if cfg["set_nproc"]:
            _set_rlimit(resource.RLIMIT_NPROC, int(limits["max_processes"]))
        uid, gid = cfg["run_uid"], cfg["run_gid"]
        if uid is not None and os.geteuid() == 0:
            os.setgroups([])
            os.setgid(uid if gid is None else gid)
            os.setuid(uid)
        # no-new-privileges: set on the supervisor itself, inherited by every child
        os.chdir(workdir)
        if invocation is not None:
            _python_main(argv[0], invocation, env)
        os.execvpe(argv[0], argv, env)
    except BaseException as exc:  # noqa: BLE001 - reported to the supervisor, then exit 127
        try:
            os.write(3, f"{type(exc).__name__}: {exc}".encode("utf-8", "replace"))
        finally:
            os._exit(127)
    os._exit(127)


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


def _drain(fd: int, buf: bytearray, total: int, cap: int) -> int:
    """Read what is in the (non-blocking) pipe into `buf`, keeping at most `cap` bytes over all
    outputs; returns the new total, which exceeds `cap` when the output limit was passed."""
    while total <= cap:
        try:
            data = os.read(fd, _READ_CHUNK)
        except (BlockingIOError, OSError):
            break
        if not data:
            break
        buf += data[: max(cap - total, 0)]
        total += len(data)
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
        "start",
        "statuses",
        "stdin_w",
        "total_out",
    )

    def __init__(
        self, start: float, pid: int, fds: tuple[int, int, int, int], out_cap: int
    ) -> None:
        self.start = start
        self.pid = pid
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

    def take(self, fd: int, data: bytes) -> None:
        """Keep what fits of `data` under the output limit; past it, the step is stopped."""
        self.outputs[fd] += data[: max(self.out_cap - self.total_out, 0)]
        self.total_out += len(data)
        if self.total_out > self.out_cap:
            self.killed_for = "output_limit"

    def drain(self) -> None:
        """Take what is already in both (non-blocking) output pipes."""
        for fd in (self.out_r, self.err_r):
            self.total_out = _drain(fd, self.outputs[fd], self.total_out, self.out_cap)
        if self.total_out > self.out_cap:
            self.killed_for = "output_limit"

    def close_stdin(self) -> None:
        if self.stdin_w >= 0:
            with contextlib.suppress(OSError):
                os.close(self.stdin_w)
            self.stdin_w = -1

    def close(self) -> None:
        self.close_stdin()
        for fd in (self.out_r, self.err_r, self.pidfd):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)

    def exec_error(self) -> bytes:
        """What the child wrote to the exec-error pipe (nothing once the program started)."""
        data = b""
        while chunk := os.read(self.exc_r, 4096):
            data += chunk
        os.close(self.exc_r)
        return data


def _spawn(
    argv: list[str],
    workdir: str,
    env: dict[str, str],
    limits: dict[str, Any],
    cpu_s: float,
    cfg: SupervisorConfig,
    invocation: _Invocation | None,
) -> _Step:
    """Fork the step's process, which confines itself and becomes the program (`_child`)."""
    stdin_r, stdin_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    exc_r, exc_w = os.pipe2(os.O_CLOEXEC)
    start = time.monotonic()
    # Every object so far is left out of the child's garbage collections, which would otherwise
    # write to (copy) the pages of objects the program never uses.
    gc.freeze()
    pid = os.fork()
    if pid == 0:
        _child(argv, workdir, env, limits, cpu_s, (stdin_r, out_w, err_w, exc_w), cfg, invocation)
    gc.unfreeze()
    for fd in (stdin_r, out_w, err_w, exc_w):
        os.close(fd)
    return _Step(start, pid, (stdin_w, out_r, err_r, exc_r), int(limits["output_bytes"]))


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


def _over_limits(
    step: _Step, reaper: _Reaper, cpu_s: float, mem_cap: int, cfg: SupervisorConfig
) -> str | None:
    """At each poll: the limit the step's processes passed together, if any."""
    step.cpu += reaper.reap_ready(step.statuses)
    live_cpu, resident = _live_usage(reaper.run_processes())
    if step.cpu + live_cpu >= cpu_s:
        return "timeout"
    if resident > mem_cap:
        # RLIMIT_AS bounds each process; this bounds them together (no cgroup needed).
        return "memory"
    max_files = cfg["max_files"]  # 0: not polled (docker: nr_inodes bounds it)
    if max_files and _files_over([cfg["work_root"], *cfg["wipe"]], max_files):
        step.note = f"sandbox: more than {max_files} files in one file system\n"
        return "runtime_error"
    return None


def _watch(
    step: _Step,
    stdin: bytes,
    cpu_s: float,
    wall_s: float,
    reaper: _Reaper,
    limits: dict[str, Any],
    cfg: SupervisorConfig,
) -> None:
    """Feed stdin and gather output until the main process exits or a limit is passed (then
    `step.killed_for` names it)."""
    mem_cap = int(limits["memory_bytes"])
    # poll(), not an epoll selector: no descriptor to create and close in every step.
    sel = select.poll()
    # Pipes as large as the output limit need not be read while the program runs: it cannot
    # block on them before it has written more than it may. They are read at each poll and
    # at the end, so that a program's every write is not also a wake-up of the supervisor.
    lazy = _enlarge_pipe(step.out_r, step.out_cap) and _enlarge_pipe(step.err_r, step.out_cap)
    for fd in (step.out_r, step.err_r):
        os.set_blocking(fd, False)
        if not lazy:
            sel.register(fd, select.POLLIN)
    step.pidfd = os.pidfd_open(step.pid)
    sel.register(step.pidfd, select.POLLIN)
    view = memoryview(stdin)
    if view:
        os.set_blocking(step.stdin_w, False)
        sel.register(step.stdin_w, select.POLLOUT)
    else:
        step.close_stdin()
    deadline = step.start + wall_s
    next_check = step.start + _POLL_S
    while not step.main_done and step.killed_for is None:
        timeout = max(0.0, min(deadline, next_check) - time.monotonic())
        for fd, _ in sel.poll(math.ceil(timeout * 1000)):
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
        now = time.monotonic()
        if step.killed_for is None and now >= next_check:
            next_check = now + _POLL_S
            if lazy:
                step.drain()
            if step.killed_for is None:
                step.killed_for = _over_limits(step, reaper, cpu_s, mem_cap, cfg)
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
    killed_for: str | None, exit_code: int | None, sig: int | None, stderr: bytes
) -> tuple[str, bool]:
    """A step's status from how it ended, and whether the kernel's OOM killer ended it."""
    if killed_for is not None:
        return killed_for, False
    if sig == signal.SIGXCPU:
        return "timeout", False
    if exit_code == 0:
        return "ok", False
    if sig == signal.SIGKILL:
        # Not killed by us: the kernel's OOM killer (container memory cap) is the usual cause.
        return "memory", True
    if any(marker in stderr for marker in _MEMORY_MARKERS):
        return "memory", False
    return "runtime_error", False


def _run_step(
    argv: list[str],
    stdin: bytes,
    workdir: str,
    env: dict[str, str],
    limits: dict[str, Any],
    cpu_s: float,
    wall_s: float,
    reaper: _Reaper,
    cfg: SupervisorConfig,
    shared_keys: dict[str, str] | None = None,
) -> tuple[dict[str, Any], float, int]:
    """Run one program; returns (result dict, CPU seconds used, leftover processes killed).
    `shared_keys`: the request's shared files, given for its first step only."""
    # Decided here, not in the child: resolving paths in Python there costs copy-on-write faults.
    invocation = _python_invocation(argv, env, workdir) if cfg["fork_python"] else None
    if invocation is not None:
        if shared_keys:
            invocation = _shared_code(invocation, workdir, shared_keys)
        _spare_streams("u" in invocation[0])
        _adopt_environ(env)
    step = _spawn(argv, workdir, env, limits, cpu_s, cfg, invocation)
    try:
        _watch(step, stdin, cpu_s, wall_s, reaper, limits, cfg)
        wall = time.monotonic() - step.start
        main_status, killed = _reap(step, reaper)
    finally:
        step.close()
    exec_error = step.exec_error()
    out_cap = step.out_cap
    stdout = bytes(step.outputs[step.out_r])
    stderr = bytes(step.outputs[step.err_r])
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
    if step.cpu >= cpu_s:
        step.killed_for = "timeout"
    status, oom_killed = _classify(step.killed_for, exit_code, sig, stderr)
    result = {
        "status": status,
        "exit_code": exit_code,
        "signal": sig,
        "stdout": base64.b64encode(stdout).decode("ascii"),
        "stderr": base64.b64encode(stderr).decode("ascii"),
        "cpu_s": round(step.cpu, 6),
        "wall_s": round(wall, 6),
        "oom_killed": oom_killed,
        "stopped": step.killed_for is not None or sig == signal.SIGXCPU,
    }
    return result, step.cpu, len(killed)


# ----------------------------------------------------------------------------- one request


def _safe_path(root: str, name: str) -> str:
    path = os.path.normpath(os.path.join(root, name))
    if os.path.isabs(name) or not path.startswith(root + os.sep):
        raise ValueError(f"file name escapes the work directory: {name!r}")
    return path


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


def _ipc_objects_left() -> bool:
    """Whether a System V shared memory segment, semaphore set or message queue exists in this
    sandbox's IPC namespace. They outlive the processes that made them, so a run could leave
    data (and memory) to the next; the supervisor then asks for a new sandbox."""
    for kind in ("shm", "sem", "msg"):
        try:
            with open(f"/proc/sysvipc/{kind}", "rb") as f:
                f.readline()  # the header
                if f.readline().strip():
                    return True
        except OSError:
            continue
    return False


def _empty_dir(path: str) -> None:
    try:
        names = os.listdir(path)
    except FileNotFoundError:
        return
    for name in names:
        full = os.path.join(path, name)
        if os.path.isdir(full) and not os.path.islink(full):
            shutil.rmtree(full, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(full)


_BLOBS: dict[str, bytes] = {}
"""Shared files (trusted runners) sent once by the backend, by key; see `_shared_files`."""


def _shared_files(shared: dict[str, Any] | None) -> dict[str, str]:
    """The request's shared files, name -> key: `reset` drops every kept one, `new` adds blobs
    by key, and `names` maps file names to kept keys (the backend mirrors what is kept here)."""
    if not shared:
        return {}
    if shared.get("reset"):
        _BLOBS.clear()
        _SHARED_CODE.clear()
    for key, b64 in shared.get("new", {}).items():
        _BLOBS[key] = base64.b64decode(b64)
    names: dict[str, str] = shared.get("names", {})
    return names


def _prepare_workdir(cfg: SupervisorConfig, files: dict[str, bytes]) -> str:
    workdir = os.path.join(cfg["work_root"], "work")
    if os.path.lexists(workdir):
        shutil.rmtree(workdir)
    os.mkdir(workdir, 0o700)
    uid, gid = cfg["run_uid"], cfg["run_gid"]
    owner = None
    if uid is not None and os.geteuid() == 0:
        owner = (uid, uid if gid is None else gid)
    nested = False
    for name, data in files.items():
        path = _safe_path(workdir, name)
        if "/" in name:
            nested = True
            os.makedirs(os.path.dirname(path), 0o700, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o700)
        try:
            os.fchmod(fd, 0o700)
            if owner is not None:
                os.fchown(fd, *owner)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
    if owner is not None:
        os.chown(workdir, *owner)
        if nested:  # the subdirectories (their files are owned already)
            for dirpath, dirnames, _ in os.walk(workdir):
                for d in dirnames:
                    os.chown(os.path.join(dirpath, d), *owner)
    return workdir


def _build_limits(limits: dict[str, Any]) -> dict[str, Any]:
    """The build step's limits: the run's, with `build_memory_bytes` when the request sets it
    (a problem's own memory limit bounds the program, not its compiler)."""
    build_memory = limits.get("build_memory_bytes")
    return limits if build_memory is None else {**limits, "memory_bytes": build_memory}


def _run_request(req: dict[str, Any], cfg: SupervisorConfig, reaper: _Reaper, out: _Outbox) -> None:
    limits = req["limits"]
    files = {name: base64.b64decode(b64) for name, b64 in req["files"].items()}
    shared_keys = _shared_files(req.get("shared"))
    files.update((name, _BLOBS[key]) for name, key in shared_keys.items())
    workdir = _prepare_workdir(cfg, files)
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": workdir,
        "TMPDIR": cfg["tmpdir"] or "/tmp",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }
    leftover = 0
    oom = False
    try:
        build = req.get("build")
        build_ok = True
        if build is not None:
            cpu = float(limits["build_cpu_s"])
            result, _, left = _run_step(
                build["argv"],
                base64.b64decode(build["stdin"]),
                workdir,
                env,
                _build_limits(limits),
                cpu,
                cpu * 2 + 1,
                reaper,
                cfg,
            )
            leftover += left
            oom = oom or bool(result.get("oom_killed"))
            build_ok = result["status"] == "ok"
            _write_frame(out, {"kind": "result", "index": -1, "result": result}, flush=False)
        cpu_left = float(limits["cpu_budget_s"])
        wall_end = time.monotonic() + float(limits["wall_cap_s"])
        for i, ex in enumerate(req["executions"]):
            wall_left = wall_end - time.monotonic()
            if not build_ok or cpu_left <= 0 or wall_left <= 0:
                result = {"status": "skipped", "cpu_s": 0.0, "wall_s": 0.0}
            else:
                result, used, left = _run_step(
                    ex["argv"],
                    base64.b64decode(ex["stdin"]),
                    workdir,
                    env,
                    limits,
                    cpu_left,
                    wall_left,
                    reaper,
                    cfg,
                    # before any program of this request ran, its shared files are as sent
                    shared_keys if build is None and i == 0 else None,
                )
                leftover += left
                oom = oom or bool(result.get("oom_killed"))
                cpu_left -= used
            _write_frame(out, {"kind": "result", "index": i, "result": result}, flush=False)
        # A process outlived its step, the kernel killed one, or System V IPC objects remain: the
        # next run starts in a new sandbox (`ipc_namespace`: ours alone, so all are a run's).
        ipc_left = cfg["ipc_namespace"] and _ipc_objects_left()
        done = {"kind": "done", "leftover_processes": leftover}
        _write_frame(out, {**done, "recycle": leftover > 0 or oom or ipc_left})
    finally:
        # After the results are out (the service reads them while we clean), before the next
        # request is read: no run ever sees what an earlier one left.
        shutil.rmtree(workdir, ignore_errors=True)
        for path in [cfg["work_root"], *cfg["wipe"]]:
            _empty_dir(path)


def main(config_json: str) -> None:
    cfg = supervisor_config(json.loads(config_json))
    _prctl(_PR_SET_DUMPABLE, 0)  # our /proc entries become root-owned: no peeking at our pipes
    # Inherited by every process of every run, and irrevocable: no exec gains privileges.
    _prctl(_PR_SET_NO_NEW_PRIVS, 1)
    _refuse_system_calls()  # needs no-new-privileges (or CAP_SYS_ADMIN)
    try:  # children inherit our non-dumpable /proc entries: can they still write this one?
        os.close(os.open("/proc/self/oom_score_adj", os.O_WRONLY | os.O_CLOEXEC))
    except OSError:
        global _OOM_ADJ_WRITABLE
        _OOM_ADJ_WRITABLE = False
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)  # orphans of a run come back to us to be killed and reaped
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    os.makedirs(cfg["work_root"], exist_ok=True)
    stdin = sys.stdin.buffer
    sys.stdout.flush()
    _KEEP.append(sys.stdout)
    out = _Outbox(1)
    sys.stdout = sys.stderr  # nothing but frames may reach the backend's stream
    _STDLIB_PATH[:] = sys.path
    import site

    site.ENABLE_USER_SITE = False
    site.main()  # what `python3 -I` adds: the system's site-packages (numpy etc.)
    _SITE_PATH[:] = sys.path
    reaper = _Reaper(cfg["pid_namespace"])
    stream: BinaryIO = stdin
    if cfg["connect"]:
        # The backend's Unix socket (docker `socket` transport): frames travel there from now
        # on; stdin/stdout stay open but unused. The token tells the backend it is us.
        import socket

        try:
            conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # close-on-exec
            conn.settimeout(30.0)
            conn.connect(cfg["connect"])
            conn.settimeout(None)
        except OSError as exc:
            _write_frame(out, {"kind": "error", "message": f"connect: {exc}", "socket": False})
            return
        _KEEP.append(conn)
        out = _Outbox(conn.fileno())
        stream = conn.makefile("rb")
        _write_frame(out, {"kind": "token", "token": cfg["token"]}, flush=False)
    _write_frame(out, {"kind": "ready", "pid": os.getpid(), "version": PROTOCOL_VERSION})
    while True:
        req = _read_frame(stream)
        if req is None:
            return
        try:
            _run_request(req, cfg, reaper, out)
        except OSError as exc:
            if exc.errno == errno.EPIPE:
                return
            _write_frame(out, {"kind": "error", "message": f"{type(exc).__name__}: {exc}"})
        except Exception as exc:  # noqa: BLE001 - reported; the backend discards this sandbox
            _write_frame(out, {"kind": "error", "message": f"{type(exc).__name__}: {exc}"})


if __name__ == "__main__":
    main(sys.argv[1])
