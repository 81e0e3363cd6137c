"""The supervisor's seccomp filter, on every backend (`backend` fixture: local and docker).

Each refused system call is probed by a program scored by the code domain: the program prints
the errno its call got, the item expects the errno the filter answers, so one test shows both
that the call fails and that the run is still judged as usual (score 1). Where the probe's
arguments allow it, they are ones the kernel itself answers differently (`PROBES` notes the
answer measured without the filter, as uid 65534 and in the local jail, on Linux 6.18), so the
test fails if the filter lets the call through. For the rest the kernel refuses an
unprivileged caller anyway and the test guards the filter's answer. Then programs that need
threads, fork, subprocesses, mmap, multiprocessing and g++ show the filter takes none of that.
"""

from __future__ import annotations

import os
import re
import textwrap
from pathlib import Path

import pytest

from reward_specs.code import CodeConfig, CodeReference, clear_cache, score_code
from reward_specs.scorer import ScoreContext
from sandboxes.api import SandboxBackend
from sandboxes.supervisor import (
    ARG_CHECKED,
    LAST_REVIEWED_SYSCALL,
    NOT_IMPLEMENTED,
    REFUSED,
    SECCOMP_ARCHES,
    SYSCALL_NUMBERS,
    seccomp_program,
    syscall_numbers,
)
from tests.sandbox_fixtures import unavailable

MACHINE = os.uname().machine
M = 0xFFFFFFFF  # flags no call accepts
CLONE_NEWUSER, CLONE_NEWNS, SIGCHLD = 0x10000000, 0x20000, 17

# name: arguments (a str is Python source the probe evaluates), and what the kernel answers
# them without the filter
PROBES: dict[str, tuple[tuple[int | str, ...], str]] = {
    "unshare": ((CLONE_NEWUSER | CLONE_NEWNS,), "ok: then mounts a tmpfs (see UNSHARE_AND_MOUNT)"),
    "clone": ((CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0), "ok: a child in a new user namespace"),
    "clone3": ((0, 0), "EINVAL"),
    "setns": ((-1, 0), "EBADF"),
    "io_uring_setup": ((1, 0), "EFAULT"),
    "io_uring_enter": ((-1, 0, 0, 0, 0, 0), "EBADF"),
    "io_uring_register": ((-1, 0, 0, 0), "EINVAL"),
    "mount": ((1, 1, 1, 0, 1), "EFAULT"),
    "umount2": ((1, M), "EINVAL"),
    "mount_setattr": ((-1, 1, M, 0, 0), "EINVAL"),
    "open_tree": ((-1, 1, M), "EINVAL"),
    "open_tree_attr": ((-1, 1, M, 0, 0), "EINVAL"),
    "move_mount": ((-1, 1, -1, 1, M), "EPERM"),
    "fsopen": ((1, M), "EPERM"),
    "fsconfig": ((-1, 0, 0, 0, 0), "EINVAL"),
    "fsmount": ((-1, M, 0), "EPERM"),
    "fspick": ((-1, 1, M), "EPERM"),
    "pivot_root": ((1, 1), "EPERM"),
    "chroot": ((1,), "EFAULT"),
    "swapon": ((1, 0), "EPERM"),
    "swapoff": ((1,), "EPERM"),
    "quotactl": ((M, 1, 0, 0), "EINVAL"),
    "quotactl_fd": ((-1, 0, 0, 0), "EBADF"),
    "open_by_handle_at": ((-1, 1, 0), "EFAULT"),
    "fanotify_init": ((0x200, 0), "ok: FAN_REPORT_FID needs no privilege"),
    "lookup_dcookie": ((0, 0, 0), "ENOSYS: gone since Linux 6.10"),
    "ustat": ((0, 1), "EINVAL"),
    "sysfs": ((99, 0, 0), "EINVAL"),
    "uselib": ((1,), "ENOSYS: not built"),
    "_sysctl": ((1,), "ENOSYS: gone since Linux 5.5"),
    "bpf": ((9999, 0, 0), "EINVAL"),
    "perf_event_open": ((0, 0, -1, -1, 0), "EFAULT"),
    "userfaultfd": ((M,), "EINVAL"),
    "kcmp": (("os.getpid()", "os.getpid()", 99, 0, 0), "EINVAL"),
    "pidfd_getfd": ((-1, 0, 0), "EBADF"),
    "process_madvise": ((-1, 0, 0, 0, 0), "EBADF"),
    "syslog": ((9999, 0, 0), "EPERM (dmesg_restrict)"),
    "add_key": ((1, 1, 0, 0, 0), "EFAULT"),
    "request_key": ((1, 1, 0, 0), "EFAULT"),
    "keyctl": ((M, 0, 0, 0, 0), "ENOTSUP"),
    "reboot": ((0, 0, 0, 0), "EPERM"),
    "kexec_load": ((0, 0, 0, M), "ENOSYS: not built"),
    "kexec_file_load": ((-1, -1, 0, 1, M), "ENOSYS: not built"),
    "init_module": ((1, 0, 1), "ENOSYS: not built"),
    "finit_module": ((-1, 1, M), "ENOSYS: not built"),
    "delete_module": ((1, M), "ENOSYS: not built"),
    "acct": ((1,), "EPERM"),
    "settimeofday": ((1, 1), "EFAULT"),
    "clock_settime": ((12345, 1), "EINVAL"),
    "sethostname": ((1, 100000), "EPERM"),
    "setdomainname": ((1, 100000), "EPERM"),
    "vhangup": ((), "EPERM"),
    "iopl": ((4,), "ENOSYS: not built"),
    "ioperm": ((0, 0xFFFFFFF, 1), "ENOSYS: not built"),
    "mbind": ((1, 4096, 0, 0, 0, 0), "EINVAL"),
    "set_mempolicy": ((99, 0, 0), "EINVAL"),
    "get_mempolicy": ((0, 0, 0, 0, M), "EINVAL"),
    "migrate_pages": ((0x7FFFFFF0, 0, 0, 0), "ESRCH"),
    "move_pages": ((0x7FFFFFF0, 1, 1, 0, 1, M), "EINVAL"),
    "set_mempolicy_home_node": ((1, 4096, 0, 0), "EINVAL"),
    "socket": ((40, 1, 0), "ok: AF_VSOCK, which no network namespace confines"),
    "personality": ((0x0040000,), "ok: ADDR_NO_RANDOMIZE, no more ASLR"),
}

PROBE = """
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
r = libc.syscall(ctypes.c_long({nr}), *(ctypes.c_long(a) for a in ({args})))
if r == 0 and {forks}:
    os._exit(0)  # the child of a clone that should not have happened
print("ok" if r != -1 else errno.errorcode[ctypes.get_errno()])
"""

UNSHARE_AND_MOUNT = """
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
if libc.syscall({nr}, {flags}) != 0:
    print(errno.errorcode[ctypes.get_errno()])
elif libc.mount(b"none", b"/tmp", b"tmpfs", 0, None) != 0:
    print("unshared, mount", errno.errorcode[ctypes.get_errno()])
else:
    print("unshared and mounted a tmpfs")
"""


def number(name: str) -> int:
    return syscall_numbers(MACHINE)[name]


def judged(backend: SandboxBackend, code: str, expected: str, language: str = "python") -> None:
    """Score `code` as a response whose one stdio test expects `expected`: it must earn 1."""
    clear_cache()  # each backend runs it
    reference = CodeReference.model_validate(
        {"language": language, "tests": {"stdio": [{"input": "", "output": expected}]}}
    )
    response = f"```{language}\n{textwrap.dedent(code).strip()}\n```"
    judgement = score_code(response, reference, CodeConfig(), ScoreContext(sandbox=backend))
    assert judgement.score == 1.0, judgement.details
    assert [t["status"] for t in judgement.details["tests"]] == ["passed"], judgement.details


def expected_errno(name: str) -> str:
    return "ENOSYS" if name in NOT_IMPLEMENTED else "EPERM"


needs_known_machine = pytest.mark.skipif(
    MACHINE not in SECCOMP_ARCHES, reason=f"no seccomp filter for {MACHINE}"
)


def test_every_refused_call_has_a_probe() -> None:
    assert set(PROBES) == set(REFUSED) | set(ARG_CHECKED) | set(NOT_IMPLEMENTED)


@needs_known_machine
@pytest.mark.parametrize("name", sorted(PROBES))
def test_refused_call_fails_and_the_run_is_judged(backend: SandboxBackend, name: str) -> None:
    if name not in syscall_numbers(MACHINE):
        pytest.skip(f"{MACHINE} has no {name}")
    args, _ = PROBES[name]
    if name == "unshare":
        code = UNSHARE_AND_MOUNT.format(nr=number(name), flags=args[0])
    else:
        source = "".join(f"{a}, " for a in args)  # the str arguments unquoted
        code = PROBE.format(nr=number(name), args=source, forks=name == "clone")
    judged(backend, code, expected_errno(name) + "\n")


@needs_known_machine
def test_system_calls_past_the_reviewed_ones_fail_as_unknown(backend: SandboxBackend) -> None:
    # As on an older kernel: a C library falls back; Docker's own profile would say EPERM.
    # Nothing is numbered there on Linux 6.18 yet: this guards the answer on newer kernels.
    for nr in (LAST_REVIEWED_SYSCALL + 1, 1000):
        judged(backend, PROBE.format(nr=nr, args="0, 0, 0", forks=False), "ENOSYS\n")


# getpid through the i386 ABI (int 0x80) and the x32 one (syscall with bit 30 set), as machine
# code: the raw answer is the pid or -errno. Docker's own profile allows both ABIs.
OTHER_ABIS = """
import ctypes, errno, mmap
code = {"i386": "b814000000cd804898c3", "x32": "48c7c0270000400f05c3"}
page = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
for abi in ("i386", "x32"):
    page.seek(0)
    page.write(bytes.fromhex(code[abi]))
    r = ctypes.CFUNCTYPE(ctypes.c_long)(ctypes.addressof(ctypes.c_char.from_buffer(page)))()
    print(abi, "ok" if r > 0 else errno.errorcode[-r])
"""


@pytest.mark.skipif(MACHINE != "x86_64", reason="x86_64 machine code")
def test_system_calls_of_other_abis_are_refused(backend: SandboxBackend) -> None:
    # Without the filter: the pid through i386 (a second system-call table), ENOSYS for x32
    # where the kernel has no x32 support.
    judged(backend, OTHER_ABIS, "i386 EPERM\nx32 EPERM\n")


@needs_known_machine
def test_allowed_arguments_of_checked_calls_pass(backend: SandboxBackend) -> None:
    code = f"""
    import ctypes, os, socket
    libc = ctypes.CDLL(None, use_errno=True)
    print(libc.personality(ctypes.c_ulong(0xFFFFFFFF)), libc.personality(0))  # query, PER_LINUX
    a, b = socket.socketpair()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
    pid = libc.syscall({number("clone")}, {SIGCHLD}, 0, 0, 0, 0)  # a plain fork
    if pid == 0:
        os._exit(7)
    print(os.WEXITSTATUS(os.waitpid(pid, 0)[1]))
    """
    judged(backend, code, "0 0\n7\n")


LEGITIMATE_PY = """
import mmap, multiprocessing, os, subprocess, sys, threading
from concurrent.futures import ThreadPoolExecutor
import numpy


def square(x):
    return x * x


if __name__ == "__main__":
    with ThreadPoolExecutor(4) as pool:
        print(sum(pool.map(square, range(100))))
    done = []
    t = threading.Thread(target=done.append, args=("thread",))
    t.start()
    t.join()
    print(done[0])
    pid = os.fork()
    if pid == 0:
        os._exit(3)
    print("fork", os.WEXITSTATUS(os.waitpid(pid, 0)[1]))
    out = subprocess.run([sys.executable, "-c", "print(6 * 7)"], capture_output=True, text=True)
    print("subprocess", out.stdout.strip())
    with mmap.mmap(-1, 1 << 20) as m:
        m[:5] = b"hello"
        print(m[:5].decode())
    with open("data", "wb") as f:
        f.write(b"x" * 4096)
    with open("data", "r+b") as f, mmap.mmap(f.fileno(), 0) as m:
        print(len(m))
    for method in ("fork", "spawn", "forkserver"):
        with multiprocessing.get_context(method).Pool(2) as pool:
            print(method, sum(pool.map(square, range(10))))
    print(int(numpy.arange(10).sum()))
"""

LEGITIMATE_CPP = """
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cstdio>
#include <thread>

int main() {
    // One thread besides main: each gets RLIMIT_STACK (256 MiB) of address space by default,
    // so a second would not fit in the 512 MiB RLIMIT_AS (a limit of its own, not seccomp's).
    long sums[2] = {0, 0};
    std::thread worker([&sums] { for (long i = 0; i < 1000; ++i) sums[1] += i; });
    for (long i = 0; i < 1000; ++i) sums[0] += i;
    worker.join();
    std::printf("%ld\\n", sums[0] + sums[1]);
    void* p = mmap(nullptr, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    std::printf("%d\\n", p != MAP_FAILED);
    pid_t pid = fork();
    if (pid == 0) _exit(5);
    int status = 0;
    waitpid(pid, &status, 0);
    std::printf("%d\\n", WEXITSTATUS(status));
    return 0;
}
"""


def test_programs_needing_threads_fork_subprocesses_mmap_and_multiprocessing_run(
    backend: SandboxBackend,
) -> None:
    expected = "328350\nthread\nfork 3\nsubprocess 42\nhello\n4096\n"
    expected += "fork 285\nspawn 285\nforkserver 285\n45\n"
    judged(backend, LEGITIMATE_PY, expected)


def test_cpp_with_threads_mmap_and_fork_compiles_and_runs(backend: SandboxBackend) -> None:
    # g++ (and the compiler's own processes) run inside the sandbox; std::thread starts with
    # clone3, refused with ENOSYS, and the C library falls back to clone.
    judged(backend, LEGITIMATE_CPP, "999000\n1\n5\n", language="cpp")


def header_numbers(path: Path) -> dict[str, int]:
    pattern = re.compile(r"#define __NR(?:3264)?_(\w+)\s+(\d+)\b")
    return {m[1]: int(m[2]) for m in pattern.finditer(path.read_text())}


@pytest.mark.parametrize(
    ("machine", "header"),
    [
        ("x86_64", "/usr/include/x86_64-linux-gnu/asm/unistd_64.h"),
        ("aarch64", "/usr/include/asm-generic/unistd.h"),  # arm64 uses the generic table
    ],
)
def test_filter_numbers_match_the_kernel_headers(machine: str, header: str) -> None:
    path = Path(header)
    if not path.exists():
        unavailable(f"{header} not installed (Debian: linux-libc-dev, which g++ pulls in)")
    known = header_numbers(path)
    for name, nr in syscall_numbers(machine).items():
        if name in known:
            assert nr == known[name], name
        else:
            # Newer than the headers: from the table all architectures share since 424.
            assert max(known.values()) < nr <= LAST_REVIEWED_SYSCALL, name
    absent = set(SYSCALL_NUMBERS) - set(syscall_numbers(machine))
    assert absent.isdisjoint(known)  # None in the table: the architecture has no such call
    assert seccomp_program(machine) is not None  # every jump within reach
