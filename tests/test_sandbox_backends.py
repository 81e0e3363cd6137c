"""Behaviour of the sandbox backends other than hostile programs (those are in
test_sandbox_adversarial.py): request/result contract, builds, budgets, concurrency, and the
forked-Python fast path giving what a fresh `python3` gives."""

from __future__ import annotations

import os
import textwrap
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from sandboxes import (
    Execution,
    ExecutionResult,
    Limits,
    RunRequest,
    SandboxBackend,
    SandboxError,
    SandboxSettings,
    SandboxUnavailable,
    open_backend,
)
from tests.helpers import poll
from tests.sandbox_fixtures import open_or_skip, sandbox_settings

FAST = Limits(cpu_budget_s=2.0, wall_cap_s=10.0)


def run_py(backend: SandboxBackend, code: str, *argv: str, stdin: bytes = b"") -> ExecutionResult:
    req = RunRequest(
        files={"main.py": textwrap.dedent(code).encode()},
        executions=[Execution(("python3", *argv, "main.py"), stdin)],
        limits=FAST,
    )
    return backend.run(req).executions[0]


def test_public_surface() -> None:
    import sandboxes

    assert sorted(sandboxes.__all__) == sorted(
        name for name in dir(sandboxes) if not name.startswith("_") and name in sandboxes.__all__
    )
    for name in sandboxes.__all__:
        assert hasattr(sandboxes, name), name


def test_stdin_stdout_and_exit_codes(backend: SandboxBackend) -> None:
    res = run_py(backend, "import sys\nprint(sys.stdin.read()[::-1])\nsys.exit(3)", stdin=b"abc")
    assert (res.status, res.exit_code, res.stdout) == ("runtime_error", 3, b"cba\n")
    assert res.cpu_s > 0 and res.wall_s > 0


def test_each_execution_gets_exactly_its_own_output(backend: SandboxBackend) -> None:
    # Regression: frames buffered by the supervisor leaked into a later forked program's stdout.
    req = RunRequest(
        files={"main.py": b"import sys\nprint(sys.stdin.read().strip() * 2)"},
        executions=[Execution(("python3", "-I", "main.py"), str(i).encode()) for i in range(5)],
    )
    result = backend.run(req)
    assert [e.stdout for e in result.executions] == [f"{i}{i}\n".encode() for i in range(5)]
    assert all(e.stderr == b"" for e in result.executions)


def test_files_in_subdirectories(backend: SandboxBackend) -> None:
    req = RunRequest(
        files={"main.py": b"print(open('data/in.txt').read())", "data/in.txt": b"payload"},
        executions=[Execution(("python3", "main.py"))],
    )
    assert backend.run(req).executions[0].stdout == b"payload\n"


@pytest.mark.parametrize("name", ["/etc/passwd", "../escape", "a/../../b", ""])
def test_file_names_escaping_the_work_directory_are_refused(
    backend: SandboxBackend, name: str
) -> None:
    req = RunRequest(files={name: b"x"}, executions=[Execution(("true",))])
    with pytest.raises((ValueError, SandboxError)):
        backend.run(req)


def test_cpp_build_then_run(backend: SandboxBackend) -> None:
    source = b'#include <cstdio>\nint main(){int a,b;scanf("%d %d",&a,&b);printf("%d\\n",a+b);}'
    req = RunRequest(
        files={"main.cpp": source},
        build=Execution(("g++", "-O2", "-o", "main", "main.cpp")),
        executions=[Execution(("./main",), b"2 3"), Execution(("./main",), b"10 -4")],
    )
    result = backend.run(req)
    assert result.build is not None and result.build.status == "ok"
    assert [e.stdout for e in result.executions] == [b"5\n", b"6\n"]


def test_failed_build_skips_every_execution(backend: SandboxBackend) -> None:
    req = RunRequest(
        files={"main.cpp": b"int main( {"},
        build=Execution(("g++", "-o", "main", "main.cpp")),
        executions=[Execution(("./main",))] * 3,
    )
    result = backend.run(req)
    assert result.build is not None and result.build.status == "runtime_error"
    assert b"error" in result.build.stderr
    assert [e.status for e in result.executions] == ["skipped"] * 3


def test_no_executions(backend: SandboxBackend) -> None:
    assert backend.run(RunRequest(files={}, executions=[])).executions == ()


def test_concurrent_runs_are_independent(backend: SandboxBackend) -> None:
    def one(i: int) -> bytes:
        res = run_py(backend, f"import time\ntime.sleep(0.01)\nprint({i} * {i})")
        assert res.status == "ok", res
        return res.stdout

    with ThreadPoolExecutor(32) as pool:
        outputs = list(pool.map(one, range(200)))
    assert outputs == [f"{i * i}\n".encode() for i in range(200)]


def test_numpy_is_available(backend: SandboxBackend) -> None:
    res = run_py(backend, "import numpy as np\nprint(int(np.arange(10).sum()))", "-I")
    assert (res.status, res.stdout) == ("ok", b"45\n"), res.stderr[-500:]


# ---------------------------------------------------------------------------------------------
# The forked-Python fast path behaves like a fresh interpreter


PARITY_PROGRAMS = {
    "argv_path_name": "import sys\nprint(sys.argv, sys.path[0], __name__, __file__)",
    "exception": "def f():\n    raise ValueError('bad')\nf()",
    "syntax_error": "def f(:\n    pass",
    "exit_message": "import sys\nsys.exit('giving up')",
    "exit_none": "import sys\nprint('x', end='')\nsys.exit()",
    "hash_order": "print(list({'apple', 'banana', 'cherry', 'date', 'elderberry'}))",
    "input_lines": "n = int(input())\nprint(sum(int(input()) for _ in range(n)))",
    "atexit_and_thread": (
        "import atexit, threading, time\n"
        "atexit.register(lambda: print('atexit'))\n"
        "threading.Thread(target=lambda: (time.sleep(0.05), print('thread'))).start()\n"
        "print('main')"
    ),
    "unicode": "print('héllo ✓ 世界')",
    "os_exit_loses_buffer": "import os\nprint('lost')\nos._exit(5)",
    "recursion_error": "import sys\ndef f(n):\n    return f(n + 1)\nf(0)",
    "environ": "import os\nprint(sorted(os.environ))",
    "stderr_text": "import sys\nprint('to stderr', file=sys.stderr)\nprint('to stdout')",
    "surrogate_output": "print('\\udc80')",
    # Annotations are evaluated, as without `from __future__ import annotations`: the forked
    # program must not inherit the supervisor's future flags.
    "unimported_annotation": "def f(x: Sequence[int]) -> int:\n    return 1\nprint(f([]))",
    "annotations_dict": "x: int = 3\nprint(__annotations__)",
    # Uncaught exceptions go through sys.excepthook, with the interpreter's "Did you mean" hints.
    "name_error_hint": "values = [3, 1]\nprint(lenn(values))",
    "attribute_error_hint": "import math\nprint(math.sqr(4))",
    "own_excepthook": (
        "import sys\n"
        "sys.excepthook = lambda t, e, tb: print('hooked', t.__name__, e)\n"
        "raise KeyError('k')"
    ),
    "failing_excepthook": (
        "import sys\n"
        "def hook(t, e, tb):\n    raise RuntimeError('hook broke')\n"
        "sys.excepthook = hook\n"
        "1 / 0"
    ),
}


def test_forked_python_missing_script_matches_a_fresh_interpreter(
    local_backend: SandboxBackend, exec_backend: SandboxBackend
) -> None:
    req = RunRequest(files={}, executions=[Execution(("python3", "-I", "absent.py"))])
    forked = local_backend.run(req).executions[0]
    fresh = exec_backend.run(req).executions[0]
    assert (
        (forked.exit_code, forked.stderr)
        == (fresh.exit_code, fresh.stderr)
        == (
            2,
            b"python3: can't open file '/sandbox/work/absent.py': "
            b"[Errno 2] No such file or directory\n",
        )
    )


@pytest.fixture(scope="module")
def exec_backend() -> Iterator[SandboxBackend]:
    backend = open_or_skip(sandbox_settings("local", pool_size=1, fork_python=False))
    yield backend
    backend.close()


@pytest.mark.parametrize(
    ("name", "flags"),
    [(name, ()) for name in sorted(PARITY_PROGRAMS)]
    # `python3 -I` ignores PYTHONHASHSEED, so a fresh one orders sets at random: only the forked
    # path is deterministic there.
    + [(name, ("-I",)) for name in sorted(PARITY_PROGRAMS) if name != "hash_order"],
)
def test_forked_python_matches_a_fresh_interpreter(
    local_backend: SandboxBackend, exec_backend: SandboxBackend, name: str, flags: tuple[str, ...]
) -> None:
    code = PARITY_PROGRAMS[name]
    stdin = b"3\n1\n2\n3\n"
    forked = run_py(local_backend, code, *flags, stdin=stdin)
    fresh = run_py(exec_backend, code, *flags, stdin=stdin)
    assert (forked.status, forked.exit_code, forked.stdout, forked.stderr) == (
        fresh.status,
        fresh.exit_code,
        fresh.stdout,
        fresh.stderr,
    )


# ---------------------------------------------------------------------------------------------
# Opening backends


def test_local_backend_without_bubblewrap_is_unavailable() -> None:
    with pytest.raises(SandboxUnavailable, match="bubblewrap"):
        open_backend(SandboxSettings(backend="local", pool_size=1, bwrap="/no/such/bwrap"))


def test_unsafe_backend_must_be_chosen_and_warns(caplog: pytest.LogCaptureFixture) -> None:
    assert SandboxSettings().backend == "local"
    backend = open_backend(SandboxSettings(backend="unsafe", pool_size=1))
    try:
        assert "WITHOUT namespaces" in caplog.text
        res = run_py(backend, "print(6 * 7)")
        assert (res.status, res.stdout) == ("ok", b"42\n")
        assert run_py(backend, "while True: pass").status == "timeout"
    finally:
        backend.close()
    assert not backend.ready()


def test_closed_backend_refuses_runs() -> None:
    backend = open_or_skip(sandbox_settings("local", pool_size=1))
    backend.close()
    assert not backend.ready()
    with pytest.raises(SandboxUnavailable):
        run_py(backend, "print(1)")


def test_recycling_replaces_supervisors() -> None:
    backend = open_or_skip(sandbox_settings("local", pool_size=1, recycle_after=2))
    try:
        assert backend.stats().size == 1
        pids = [run_py(backend, "import os\nprint(os.getppid())").stdout for _ in range(6)]
        assert all(run_py(backend, "print(1)").status == "ok" for _ in range(3))
        # nine runs, two a supervisor: four retired (/metrics: sandbox_replacements), and the
        # pool is whole again (its replacements start in the background)
        poll(lambda: backend.stats().live == 1, timeout=60)
        stats = backend.stats()
        assert stats.retired == 4 and stats.started == 5, stats
    finally:
        backend.close()
    assert len(pids) == 6  # each run answered although its supervisor was replaced every 2 runs


def _pids_with(marker: bytes) -> set[int]:
    found = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if marker in f.read():
                    found.add(int(pid))
        except OSError:
            continue
    return found


@pytest.mark.parametrize("kind", ["local", "unsafe"])
def test_close_leaves_no_supervisor_or_program_behind(kind: str) -> None:
    marker = b"proctor-close-test-marker"
    before = _pids_with(marker)
    backend = open_or_skip(sandbox_settings(kind, pool_size=2))
    # A run still going when the backend closes: its program must not survive the close.
    req = RunRequest(
        files={},
        executions=[Execution(("sh", "-c", "sleep 60; true", marker.decode()))],
        limits=Limits(wall_cap_s=60),
    )
    with ThreadPoolExecutor(1) as pool:
        future = pool.submit(backend.run, req)
        deadline = time.monotonic() + 30
        while not _pids_with(marker) - before and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _pids_with(marker) - before, "the run did not start"
        backend.close()
        with pytest.raises(SandboxError):
            future.result()
    # The host's init reaps what it inherited: wait for that, with a deadline.
    poll(lambda: _pids_with(marker) - before == set(), 30)


SHARED_RUNNER = b"import sys\nprint('runner', open(sys.argv[1]).read())\n"


def test_shared_files_are_written_every_run_and_a_change_does_not_persist(
    backend: SandboxBackend,
) -> None:
    # After the first request a sandbox is sent only the runner's key.
    for n in range(6):
        req = RunRequest(
            files={"data.txt": str(n).encode()},
            shared_files={"runner.py": SHARED_RUNNER},
            executions=[Execution(("python3", "-I", "runner.py", "data.txt"))],
            limits=FAST,
        )
        res = backend.run(req).executions[0]
        assert (res.status, res.stdout) == ("ok", f"runner {n}\n".encode())
        # A program that overwrites the shared file changes nothing for the next request.
        clobber = RunRequest(
            files={"main.py": b"open('runner.py', 'w').write('print(0)')"},
            shared_files={"runner.py": SHARED_RUNNER},
            executions=[Execution(("python3", "-I", "main.py"))],
            limits=FAST,
        )
        assert backend.run(clobber).executions[0].status == "ok"


def test_shared_files_past_the_cap_are_sent_again(
    backend: SandboxBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sandboxes import frames

    monkeypatch.setattr(frames, "_BLOB_CAP", 2 * len(SHARED_RUNNER))
    blobs = [SHARED_RUNNER + f"# {k}\n".encode() for k in range(5)]
    for k in range(12):
        req = RunRequest(
            files={"data.txt": str(k).encode()},
            shared_files={"runner.py": blobs[k % 5]},
            executions=[Execution(("python3", "-I", "runner.py", "data.txt"))],
            limits=FAST,
        )
        res = backend.run(req).executions[0]
        assert (res.status, res.stdout) == ("ok", f"runner {k}\n".encode())


def test_a_file_both_plain_and_shared_is_refused(backend: SandboxBackend) -> None:
    req = RunRequest(
        files={"runner.py": b""},
        shared_files={"runner.py": SHARED_RUNNER},
        executions=[Execution(("true",))],
    )
    with pytest.raises(ValueError, match="both plain and shared"):
        backend.run(req)
    res = run_py(backend, "print(1)")  # the sandbox it would have used is still fine
    assert (res.status, res.stdout) == ("ok", b"1\n")
