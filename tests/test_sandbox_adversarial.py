"""Adversarial programs, one property each, on every backend (`backend` fixture: local and docker).

Each test runs a hostile program and asserts (1) the verdict the program earns, (2) that it was
contained, and, through the `sandbox` fixture, (3) that the backend is still healthy and the next
run is clean: no leftover files in the work directory, /tmp, /var/tmp or /dev/shm, no process of
an earlier run alive, the interpreter intact.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

import sandboxes
from reward_specs.code.reference import CodeConfig, StdioTests
from reward_specs.code.requests import stdio_request
from sandboxes import (
    Execution,
    ExecutionResult,
    Limits,
    RunRequest,
    SandboxBackend,
    SandboxSettings,
)
from tests.lang_programs import COMPILED, PROGRAMS
from tests.sandbox_fixtures import TEST_POOL_SIZE, open_or_skip, sandbox_settings

SHORT = os.environ.get("PROCTOR_SHORT", "") == "1"
SECRET = "proctor-adversarial-secret-7f3a9c"
os.environ["PROCTOR_TEST_SECRET"] = SECRET  # set before any backend starts: it must not leak

FAST = Limits(cpu_budget_s=1.0, wall_cap_s=3.0)

# Prints what a fresh run can see of earlier runs; see `assert_clean`.
CANARY = textwrap.dedent(
    """
    import json, os
    pids = [p for p in os.listdir("/proc") if p.isdigit()]
    names = {}
    for p in pids:
        try:
            names[p] = open(f"/proc/{p}/cmdline", "rb").read().split(b"\\0")[0].decode()
        except OSError:
            names[p] = "?"
    print(json.dumps({
        "work": sorted(os.listdir(".")),
        "work_root": sorted(os.listdir("..")),
        "tmp": {d: sorted(os.listdir(d)) for d in ("/tmp", "/var/tmp", "/dev/shm")},
        "procs": names,
        "me": os.getpid(),
    }))
    """
)


def py(code: str, *, stdin: bytes = b"", limits: Limits = FAST) -> RunRequest:
    return RunRequest(
        files={"main.py": textwrap.dedent(code).encode()},
        executions=[Execution(("python3", "main.py"), stdin)],
        limits=limits,
    )


def run1(backend: SandboxBackend, code: str, **kw: object) -> ExecutionResult:
    result = backend.run(py(code, **kw))  # type: ignore[arg-type]
    assert len(result.executions) == 1
    return result.executions[0]


def sandbox_zombies() -> list[str]:
    """Zombie processes on this host owned by a sandbox uid (docker's or the local range)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/status") as f:
                status = dict(line.split(":", 1) for line in f if ":" in line)
        except OSError:
            continue
        uid = int(status["Uid"].split()[0])
        if status["State"].strip().startswith("Z") and (uid == 10001 or 61000 <= uid < 63000):
            found.append(pid)
    return found


def assert_clean(backend: SandboxBackend) -> None:
    assert backend.ready()
    res = run1(backend, CANARY)
    assert res.status == "ok", res
    seen = json.loads(res.stdout)
    assert seen["work"] == ["main.py"]
    assert seen["work_root"] == ["work"]
    assert seen["tmp"] == {"/tmp": [], "/var/tmp": [], "/dev/shm": []}
    others = {p: n for p, n in seen["procs"].items() if int(p) != seen["me"]}
    # Only the supervisor (the namespace's init) and its template (sandboxes/supervisor/template.py)
    # may remain; a sandbox whose template a program killed is replaced after that request.
    assert [os.path.basename(n) for n in others.values()] == ["python3", "python3"], others


@pytest.fixture
def sandbox(backend: SandboxBackend) -> Iterator[SandboxBackend]:
    yield backend
    assert_clean(backend)


# ---------------------------------------------------------------------------------------------
# CPU and time


def test_infinite_loop_times_out_on_cpu_budget(sandbox: SandboxBackend) -> None:
    res = run1(sandbox, "while True: pass", limits=Limits(cpu_budget_s=1.0, wall_cap_s=60.0))
    assert res.status == "timeout"
    assert 0.9 <= res.cpu_s <= 2.0  # the budget is 1 s of CPU; polled, so slightly over


def test_sleep_hits_the_wall_clock_backstop(sandbox: SandboxBackend) -> None:
    res = run1(sandbox, "import time; time.sleep(60)")
    assert res.status == "timeout"
    assert res.cpu_s < 0.5


def test_ignored_sigalrm_and_sigxcpu_with_busy_loop(sandbox: SandboxBackend) -> None:
    code = """
    import signal
    for s in (signal.SIGALRM, signal.SIGXCPU, signal.SIGTERM, signal.SIGINT):
        signal.signal(s, signal.SIG_IGN)
    signal.alarm(1)
    while True:
        pass
    """
    assert run1(sandbox, code).status == "timeout"


def test_cpu_of_child_processes_is_charged(sandbox: SandboxBackend) -> None:
    code = """
    import os
    kids = []
    for _ in range(4):
        pid = os.fork()
        if pid == 0:
            x = 0
            for i in range(10**9):
                x += i
            os._exit(0)
        kids.append(pid)
    for pid in kids:
        os.waitpid(pid, 0)
    print("finished")
    """
    res = run1(sandbox, code)
    assert res.status == "timeout"
    assert b"finished" not in res.stdout


def test_budget_is_shared_by_the_executions_of_a_request(sandbox: SandboxBackend) -> None:
    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.7: pass\n"
    req = RunRequest(
        files={"main.py": burn.encode()},
        executions=[Execution(("python3", "main.py"))] * 3,
        limits=Limits(cpu_budget_s=1.0, wall_cap_s=30.0),  # the CPU budget decides, not load
    )
    statuses = [e.status for e in sandbox.run(req).executions]
    assert statuses == ["ok", "timeout", "skipped"]


def test_closed_stdout_then_loop(sandbox: SandboxBackend) -> None:
    assert (
        run1(sandbox, "import os\nos.close(1); os.close(2)\nwhile True: pass").status == "timeout"
    )


# ---------------------------------------------------------------------------------------------
# Processes


def test_fork_bomb_is_contained(sandbox: SandboxBackend) -> None:
    code = """
    import os
    while True:
        try:
            os.fork()
        except OSError:
            pass
    """
    # Cut off by the process limit, the CPU budget, or the memory of all its copies together.
    assert run1(sandbox, code).status in ("timeout", "runtime_error", "memory")


def test_ten_thousand_threads_are_refused(sandbox: SandboxBackend) -> None:
    code = """
    import threading, time
    n = 0
    try:
        for _ in range(10_000):
            threading.Thread(target=time.sleep, args=(30,), daemon=True).start()
            n += 1
    except (RuntimeError, MemoryError):
        pass
    print(n)
    """
    res = run1(sandbox, code)
    assert res.status in ("ok", "memory", "runtime_error")
    if res.status == "ok":
        assert int(res.stdout) < 1000


def test_double_forked_daemon_does_not_outlive_its_run(sandbox: SandboxBackend) -> None:
    # The daemon is seen running (its file) before the run ends, then execs `sleep` with a
    # marker: the next run in the same sandbox must see neither the process nor its file.
    code = """
    import os, time
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            open("/tmp/daemon-was-here", "w").write("x")
            os.execv("/bin/sleep", ["sleep", "600", "proctor-daemon-marker"])
        os._exit(0)
    for _ in range(500):
        if os.path.exists("/tmp/daemon-was-here"):
            break
        time.sleep(0.01)
    print("parent done", os.path.exists("/tmp/daemon-was-here"))
    """
    res = run1(sandbox, code)
    assert res.status == "ok" and res.stdout == b"parent done True\n"
    look = (
        "import os\n"
        "mine = [p for p in os.listdir('/proc') if p.isdigit()\n"
        "        and b'proctor-daemon-marker' in open(f'/proc/{p}/cmdline', 'rb').read()]\n"
        "print(mine, os.listdir('/tmp'))"
    )
    for _ in range(TEST_POOL_SIZE + 1):  # sandboxes are lent in turn: this reaches every one
        assert run1(sandbox, look).stdout == b"[] []\n"


def test_killing_the_parent(sandbox: SandboxBackend) -> None:
    code = "import os, signal, time\nos.kill(os.getppid(), signal.SIGKILL)\ntime.sleep(0.2)"
    res = run1(sandbox, code)
    # The parent is the supervisor, the PID namespace's init: the kernel shields an init from
    # its own namespace's signals (and, under root, it is another uid). It survives.
    assert res.status in ("ok", "runtime_error")
    assert b"killed its supervisor" not in res.stderr


def test_kill_minus_one(sandbox: SandboxBackend) -> None:
    code = """
    import os, signal
    try:
        os.kill(-1, signal.SIGKILL)
    except ProcessLookupError:  # ESRCH: there was nothing it may signal
        pass
    print("survived")
    """
    res = run1(sandbox, code)
    # kill(-1) spares the caller and the namespace's init (the supervisor); nothing else exists.
    assert res.status == "ok" and res.stdout == b"survived\n"


def test_no_privileges(sandbox: SandboxBackend) -> None:
    code = """
    import os
    status = dict(l.split(":", 1) for l in open("/proc/self/status"))
    print(os.getuid(), int(status["CapEff"], 16), status["NoNewPrivs"].strip())
    """
    res = run1(sandbox, code)
    uid, caps, nnp = res.stdout.split()
    assert int(uid) != 0 and caps == b"0" and nnp == b"1"


def test_supervisor_pipes_are_not_reachable(sandbox: SandboxBackend) -> None:
    code = """
    import os
    opened = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        if int(pid) == os.getpid():
            continue
        for fd in ("0", "1"):
            try:
                open(f"/proc/{pid}/fd/{fd}", "wb").close()
                opened.append((pid, fd))
            except OSError:
                pass
    print(opened)
    """
    assert run1(sandbox, code).stdout == b"[]\n"


def test_missing_executable(sandbox: SandboxBackend) -> None:
    req = RunRequest(files={}, executions=[Execution(("/no/such/program",))], limits=FAST)
    res = sandbox.run(req).executions[0]
    assert res.status == "runtime_error" and res.exit_code == 127
    assert b"could not start" in res.stderr


# ---------------------------------------------------------------------------------------------
# Memory, output, files


# The memory tests get a roomy CPU budget: the property is the memory verdict, and touching
# 512 MiB for the first time costs ~0.3 s of CPU here but more than 1 s on a fresh virtual
# machine whose host backs each guest page on first use (CI saw `timeout` under FAST).
ROOMY = Limits(cpu_budget_s=5.0, wall_cap_s=20.0)


def test_memory_bomb(sandbox: SandboxBackend) -> None:
    code = "chunks = []\nwhile True:\n    chunks.append(bytearray(10**7))"
    res = run1(sandbox, code, limits=ROOMY)
    assert res.status == "memory"


def test_memory_spread_over_many_processes(sandbox: SandboxBackend) -> None:
    # Each process stays under RLIMIT_AS; together they hold 3 GB against a 512 MiB limit.
    code = """
    import os, time
    for _ in range(16):
        if os.fork() == 0:
            x = bytearray(200 * 2**20)
            time.sleep(30)
            os._exit(0)
    for _ in range(16):
        os.wait()
    """
    assert run1(sandbox, code, limits=ROOMY).status == "memory"


def test_endless_output_is_cut_off(sandbox: SandboxBackend) -> None:
    res = run1(sandbox, "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)")
    assert res.status == "output_limit"
    assert len(res.stdout) + len(res.stderr) <= Limits().output_bytes


def test_two_gigabyte_file_is_refused(sandbox: SandboxBackend) -> None:
    code = """
    with open("big", "wb") as f:
        for _ in range(2048):
            f.write(bytes(2**20))
    """
    res = run1(sandbox, code)
    assert res.status == "runtime_error"
    assert res.signal == 25 or b"File too large" in res.stderr or b"No space" in res.stderr


@pytest.mark.parametrize("directory", ["/tmp", "/var/tmp", "/dev/shm", ".."])
def test_files_left_behind_are_gone_next_run(sandbox: SandboxBackend, directory: str) -> None:
    res = run1(sandbox, f"open('{directory}/left-behind', 'w').write('x')\nprint('wrote')")
    assert res.status == "ok" or b"PermissionError" in res.stderr  # the work root may be read-only
    again = run1(sandbox, f"import os\nprint(os.path.exists('{directory}/left-behind'))")
    assert again.stdout == b"False\n"


@pytest.mark.parametrize("directory", [".", "/tmp", "/dev/shm"])
def test_a_flood_of_empty_files_is_bounded(sandbox: SandboxBackend, directory: str) -> None:
    # Empty files fill no size limit, but each holds kernel memory (a container's memory cap
    # once killed its supervisor this way) and must be deleted after the run.
    code = f"""
    import os
    os.mkdir("{directory}/flood")
    n = 0
    try:
        while True:
            os.close(os.open(f"{directory}/flood/{{n}}", os.O_CREAT | os.O_WRONLY))
            n += 1
    except OSError as exc:
        print(n, exc.errno)
    """
    res = run1(sandbox, code, limits=ROOMY)
    cap = SandboxSettings().tmpfs_files
    if res.status == "ok":  # docker: the file system is full (ENOSPC)
        made, errno = map(int, res.stdout.split())
        assert made <= cap and errno == 28
    else:  # local: stopped by the supervisor's poll
        assert res.status == "runtime_error" and res.stopped
        assert f"more than {cap} files".encode() in res.stderr


SYSV_IPC_LEFT = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
shm = libc.shmget(0x5A5A, 1 << 16, 0o1666)  # IPC_CREAT | 0666
ctypes.memmove(libc.shmat(shm, None, 0), b"left by run one", 15)
print(shm >= 0, libc.semget(0x5B5B, 1, 0o1666) >= 0, libc.msgget(0x5C5C, 0o1666) >= 0)
"""

SYSV_IPC_FOUND = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
found = [libc.shmget(0x5A5A, 0, 0o666), libc.semget(0x5B5B, 0, 0o666), libc.msgget(0x5C5C, 0o666)]
print(found, [open(f"/proc/sysvipc/{k}").read().count("\\n") for k in ("shm", "sem", "msg")])
"""


@pytest.fixture
def one_sandbox(backend: SandboxBackend) -> Iterator[SandboxBackend]:
    """A private backend of the same kind with a single sandbox: consecutive runs share it, so a
    test of what one run leaves to the next cannot pass because the next landed elsewhere."""
    single = open_or_skip(sandbox_settings(backend.name, pool_size=1))
    yield single
    single.close()


def test_system_v_ipc_objects_do_not_reach_the_next_run(one_sandbox: SandboxBackend) -> None:
    # Shared memory, semaphores and message queues outlive their processes in the sandbox's
    # IPC namespace: a run that leaves any gets the next run a new sandbox.
    assert run1(one_sandbox, SYSV_IPC_LEFT).stdout == b"True True True\n"
    found = run1(one_sandbox, SYSV_IPC_FOUND).stdout
    assert found == b"[-1, -1, -1] [1, 1, 1]\n"  # /proc/sysvipc: the headers only


KEY_ADD = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
add_key = {"x86_64": 248, "aarch64": 217}[os.uname().machine]
key = libc.syscall(add_key, b"user", b"left-key", b"left by run one", 15, -4)  # user keyring
print(key, ctypes.get_errno())
"""

KEY_FIND = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
keyctl = {"x86_64": 250, "aarch64": 219}[os.uname().machine]
print(libc.syscall(keyctl, 10, -4, b"user", b"left-key", 0))  # KEYCTL_SEARCH
"""


def test_kernel_keyrings_are_out_of_reach(one_sandbox: SandboxBackend) -> None:
    # A key outlives its process in the uid's keyring, readable by every later run of that uid.
    assert run1(one_sandbox, KEY_ADD).stdout == b"-1 1\n"  # EPERM (seccomp)
    assert run1(one_sandbox, KEY_FIND).stdout == b"-1\n"


def test_posix_message_queues_cannot_be_made(sandbox: SandboxBackend) -> None:
    code = """
    import ctypes, ctypes.util, os
    rt = ctypes.CDLL(ctypes.util.find_library("rt"), use_errno=True)
    print(rt.mq_open(b"/left", os.O_CREAT | os.O_RDWR, 0o666, None), ctypes.get_errno())
    """
    assert run1(sandbox, code).stdout == b"-1 24\n"  # EMFILE: RLIMIT_MSGQUEUE is 0


def test_invalid_utf8_output_is_returned_verbatim(sandbox: SandboxBackend) -> None:
    res = run1(sandbox, "import sys\nsys.stdout.buffer.write(b'\\xff\\xfe\\x80ok\\xc3')")
    assert res.status == "ok" and res.stdout == b"\xff\xfe\x80ok\xc3"


def test_deep_recursion(sandbox: SandboxBackend) -> None:
    code = "import sys\nsys.setrecursionlimit(10**8)\ndef f(n):\n    return f(n + 1) + 1\nf(0)"
    assert run1(sandbox, code).status in ("runtime_error", "memory", "timeout")


def test_large_unread_stdin_does_not_deadlock(sandbox: SandboxBackend) -> None:
    res = run1(sandbox, "print('ignored my input')", stdin=b"1 2 3\n" * 2_000_000)
    assert res.status == "ok" and res.stdout == b"ignored my input\n"


# ---------------------------------------------------------------------------------------------
# What the program may see and touch


def test_etc_shadow_is_unreadable(sandbox: SandboxBackend) -> None:
    res = run1(sandbox, "print(open('/etc/shadow').read())")
    assert res.status == "runtime_error"
    assert b"root:" not in res.stdout


def test_service_environment_is_invisible(sandbox: SandboxBackend) -> None:
    code = """
    import os
    seen = repr(dict(os.environ))
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            seen += open(f"/proc/{pid}/environ", "rb").read().decode("latin-1")
        except OSError:
            pass
    print(seen)
    """
    res = run1(sandbox, code)
    assert res.status == "ok"
    assert SECRET.encode() not in res.stdout


def test_service_source_is_invisible(sandbox: SandboxBackend) -> None:
    source = os.path.dirname(os.path.abspath(sandboxes.__file__))
    code = f"""
    import os
    for path in ({source!r}, {os.path.dirname(source)!r}, "/root", "/home"):
        try:
            print(path, bool(os.listdir(path)))
        except OSError as e:
            print(path, type(e).__name__)
    """
    res = run1(sandbox, code)
    assert res.status == "ok"
    assert b"True" not in res.stdout


def test_interpreter_cannot_be_overwritten(sandbox: SandboxBackend) -> None:
    code = """
    import os, shutil
    target = os.path.realpath(shutil.which("python3"))
    try:
        open(target, "wb").write(b"#!/bin/sh\\necho pwned\\n")
        print("overwrote")
    except OSError as e:
        print("refused", e.errno)
    """
    res = run1(sandbox, code)
    assert res.stdout.startswith(b"refused")


def test_no_network_interface_but_loopback(sandbox: SandboxBackend) -> None:
    res = run1(sandbox, "import socket\nprint(sorted(n for _, n in socket.if_nameindex()))")
    assert res.stdout == b"['lo']\n"


def test_dns_does_not_resolve(sandbox: SandboxBackend) -> None:
    code = """
    import socket
    try:
        socket.getaddrinfo("pypi.org", 443)
        print("resolved")
    except OSError as e:
        print("failed", type(e).__name__)
    """
    assert run1(sandbox, code).stdout.startswith(b"failed")


def test_service_port_is_unreachable(sandbox: SandboxBackend) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        port = listener.getsockname()[1]
        code = f"""
        import socket
        try:
            socket.create_connection(("127.0.0.1", {port}), timeout=1).close()
            print("connected")
        except OSError as e:
            print("refused", type(e).__name__)
        """
        res = run1(sandbox, code)
        assert res.stdout.startswith(b"refused")
        listener.settimeout(0.1)
        with pytest.raises(TimeoutError):
            listener.accept()


def test_docker_socket_is_unreachable(sandbox: SandboxBackend) -> None:
    code = """
    import socket
    for path in ("/var/run/docker.sock", "/run/docker.sock"):
        s = socket.socket(socket.AF_UNIX)
        try:
            s.connect(path)
            print("connected", path)
        except OSError:
            pass
    print("done")
    """
    assert run1(sandbox, code).stdout == b"done\n"


# ---------------------------------------------------------------------------------------------
# Many runs


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.slow
def test_a_thousand_timeouts_in_a_row(sandbox: SandboxBackend) -> None:
    n = 150 if SHORT else 1000
    tiny = Limits(cpu_budget_s=0.02, wall_cap_s=2.0)
    sandbox.run(py("pass", limits=tiny))  # warm every lazy resource before counting fds
    fds = _open_fds()
    with ThreadPoolExecutor(4) as pool:
        statuses = list(
            pool.map(lambda _: run1(sandbox, "while True: pass", limits=tiny).status, range(n))
        )
    assert statuses == ["timeout"] * n
    assert sandbox_zombies() == []
    assert _open_fds() <= fds + 8  # replacements may be mid-start; no growth with n


STDIN_PROGRAM = """
import sys
n = int(sys.stdin.read())
if n % 3 == 0:
    raise ValueError(n)
if n % 3 == 1:
    sys.exit(3)
print(n * n)
"""


def test_concurrent_failing_stdin_runs_match_serial(sandbox: SandboxBackend) -> None:
    def verdict(n: int) -> tuple[str, int | None, bytes]:
        res = run1(sandbox, STDIN_PROGRAM, stdin=str(n).encode())
        return res.status, res.exit_code, res.stdout

    serial = [verdict(n) for n in range(256)]
    with ThreadPoolExecutor(256) as pool:
        concurrent = list(pool.map(verdict, range(256)))
    assert concurrent == serial
    assert serial[3] == ("runtime_error", 1, b"")
    assert serial[4] == ("runtime_error", 3, b"")
    assert serial[5] == ("ok", 0, b"25\n")


def test_cpu_heavy_solution_scores_the_same_under_full_load(sandbox: SandboxBackend) -> None:
    code = """
    limit = 300_000
    sieve = bytearray([1]) * (limit + 1)
    for i in range(2, int(limit ** 0.5) + 1):
        if sieve[i]:
            sieve[i * i :: i] = bytearray(len(sieve[i * i :: i]))
    total = 0
    for _ in range(60):
        total = sum(i for i in range(2, limit + 1) if sieve[i])
    print(total)
    """
    limits = Limits(cpu_budget_s=5.0, wall_cap_s=60.0)
    burners = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"])
        for _ in range(os.cpu_count() or 2)
    ]
    try:
        with ThreadPoolExecutor(20) as pool:
            results = list(pool.map(lambda _: run1(sandbox, code, limits=limits), range(20)))
    finally:
        for b in burners:
            b.kill()
            b.wait()
    assert {(r.status, r.stdout) for r in results} == {("ok", b"3709507114\n")}


# ---------------------------------------------------------------------------------------------
# The compiled languages (Java, JavaScript, Go, Rust): one case per property per language, built
# and run as the code domain builds and runs them (`reward_specs.code.languages`).

LANG_CONFIG = CodeConfig(budget_s=5.0, wall_cap_s=20.0)


def lang_run(backend: SandboxBackend, language: str, kind: str) -> ExecutionResult:
    tests = StdioTests.model_validate({"stdio": [{"input": "", "output": ""}]})
    code = PROGRAMS[language][kind].encode()
    result = backend.run(stdio_request(code, language, tests, LANG_CONFIG))  # type: ignore[arg-type]
    assert result.build is not None and result.build.status == "ok", result.build
    assert len(result.executions) == 1
    return result.executions[0]


@pytest.mark.parametrize("language", COMPILED)
def test_lang_network_is_unreachable(sandbox: SandboxBackend, language: str) -> None:
    res = lang_run(sandbox, language, "network")
    assert (res.status, res.stdout) == ("ok", b"blocked\n"), res


@pytest.mark.parametrize("language", COMPILED)
def test_lang_fork_bomb_is_contained(sandbox: SandboxBackend, language: str) -> None:
    res = lang_run(sandbox, language, "fork")
    # Refused by the process limit (the program says so), or cut off by a limit.
    assert res.status in ("ok", "timeout", "runtime_error", "memory"), res
    if res.status == "ok":  # the JVM also warns on stdout of the threads it could not start
        assert res.stdout.splitlines()[-1] == b"contained", res


@pytest.mark.parametrize("language", COMPILED)
def test_lang_memory_bomb(sandbox: SandboxBackend, language: str) -> None:
    assert lang_run(sandbox, language, "memory").status == "memory"


@pytest.mark.parametrize("language", COMPILED)
def test_lang_two_gigabyte_file_is_refused(sandbox: SandboxBackend, language: str) -> None:
    res = lang_run(sandbox, language, "file")
    # The file-size limit: SIGXFSZ, or EFBIG where the runtime ignores that signal (JVM, Go here).
    assert (res.status, res.signal) == ("runtime_error", 25) or res.stdout == b"refused\n", res


@pytest.mark.parametrize("language", COMPILED)
def test_lang_etc_shadow_is_unreadable(sandbox: SandboxBackend, language: str) -> None:
    assert lang_run(sandbox, language, "shadow").stdout == b"unreadable\n"


@pytest.mark.parametrize("language", COMPILED)
def test_lang_cannot_signal_the_supervisor(sandbox: SandboxBackend, language: str) -> None:
    res = lang_run(sandbox, language, "signal")
    # SIGKILL to the namespace's init (the supervisor) is dropped by the kernel; kill(-1) spares
    # the caller: the program lives on and the next run (the fixture's canary) is clean.
    assert (res.status, res.stdout) == ("ok", b"alive\n"), res
