"""Functional cases of the code scorer with exact expected scores, on every sandbox backend.

Each case is one response to one item, with the score it must get and, where it matters, the
status of each test or the reason for a zero. The `backend` fixture (tests/sandbox_fixtures.py)
runs the whole table on the local and the docker backend. The comment on a case says what it pins.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from reward_specs.code import CodeConfig, CodeReference, clear_cache, score_code
from reward_specs.scorer import ScoreContext
from sandboxes.api import SandboxBackend


@dataclass(frozen=True)
class Case:
    id: str
    language: str
    tests: dict[str, Any]
    response: str
    score: float
    statuses: tuple[str, ...] | None = None
    reason: str | None = None
    parsed: bool = True
    config: dict[str, Any] = field(default_factory=dict)


def py(code: str) -> str:
    return f"Here is my solution.\n```python\n{code.strip()}\n```\n"


def cpp(code: str) -> str:
    return f"```cpp\n{code.strip()}\n```"


SUM_IO = {
    "stdio": [
        {"input": "1 2\n", "output": "3\n"},
        {"input": "10 -4\n", "output": "6\n"},
        {"input": "0 0\n", "output": "0\n"},
        {"input": "-3 -4\n", "output": "-7\n"},
    ]
}
PY_SUM = "a, b = map(int, input().split())\nprint(a + b)"
CPP_SUM = """
#include <iostream>
int main() { long long a, b; std::cin >> a >> b; std::cout << a + b << "\\n"; return 0; }
"""
ADD_CASES = {
    "fn_name": "add",
    "cases": [
        {"args": [1, 2], "expected": 3},
        {"args": [-1, 1], "expected": 0},
        {"args": [100, 23], "expected": 123},
    ],
}
SQUARE_ASSERTS = {
    "asserts": [
        "assert square(2) == 4",
        "assert square(-3) == 9",
        "assert square(0) == 0",
        "assert square(10) == 100",
    ]
}
ALWAYS_EQUAL = """
class Anything:
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    def __lt__(self, other): return True
    def __gt__(self, other): return True
    def __bool__(self): return True
    def __hash__(self): return 0
"""
PASS_LINES = 'print("PASSED"); print("All tests passed"); print("ok: 4/4")'
BURN = (
    "import time\ndef burn(s):\n    t = time.process_time()\n"
    "    while time.process_time() - t < s: pass"
)

PY_STDIO = [
    Case("py-stdio-correct", "python", SUM_IO, py(PY_SUM), 1.0, ("passed",) * 4),
    # No fence at all: the whole response is the program.
    Case("py-stdio-whole-response", "python", SUM_IO, PY_SUM, 1.0),
    # A bare ``` fence counts when no python-tagged one exists.
    Case("py-stdio-bare-fence", "python", SUM_IO, f"```\n{PY_SUM}\n```", 1.0),
    # The LAST python block is the answer (the first is a wrong draft).
    Case(
        "py-stdio-last-block",
        "python",
        SUM_IO,
        py("print(0)") + "Fixed:\n```py\n" + PY_SUM + "\n```",
        1.0,
    ),
    # Trailing spaces and trailing blank lines are not differences.
    Case(
        "py-stdio-trailing-whitespace",
        "python",
        SUM_IO,
        py("a, b = map(int, input().split())\nprint(a + b, end='   \\n\\n\\n')"),
        1.0,
    ),
    # Windows line endings are normalised.
    Case(
        "py-stdio-crlf",
        "python",
        SUM_IO,
        py("import sys\na, b = map(int, input().split())\nsys.stdout.write(f'{a+b}\\r\\n')"),
        1.0,
    ),
    # Extra spaces between tokens are whitespace too.
    Case(
        "py-stdio-inner-spaces",
        "python",
        {"stdio": [{"input": "", "output": "1 2 3\n"}]},
        py("print('1   2  3')"),
        1.0,
    ),
    # Floats within 1e-6 (relative or absolute) match.
    Case(
        "py-stdio-float-tolerance",
        "python",
        {"stdio": [{"input": "1 3\n", "output": "0.3333333\n"}]},
        py("a, b = map(int, input().split())\nprint(f'{a / b:.12f}')"),
        1.0,
    ),
    # ... and outside it they do not.
    Case(
        "py-stdio-float-off",
        "python",
        {"stdio": [{"input": "1 3\n", "output": "0.3333\n"}]},
        py("a, b = map(int, input().split())\nprint(f'{a / b:.12f}')"),
        0.0,
        ("wrong_answer",),
    ),
    # Integers are exact even where a relative tolerance would accept them.
    Case(
        "py-stdio-integer-exact",
        "python",
        {"stdio": [{"input": "", "output": "1000000000\n"}]},
        py("print(1000000001)"),
        0.0,
        ("wrong_answer",),
    ),
    # Comparison is case-sensitive.
    Case(
        "py-stdio-case-sensitive",
        "python",
        {"stdio": [{"input": "", "output": "YES\n"}, {"input": "", "output": "YES\n"}]},
        py("print('Yes')"),
        0.0,
        ("wrong_answer", "wrong_answer"),
    ),
    # Partial credit: right on the two non-negative sums only.
    Case(
        "py-stdio-partial",
        "python",
        SUM_IO,
        py("a, b = map(int, input().split())\nprint(abs(a + b))"),
        0.75,
        ("passed", "passed", "passed", "wrong_answer"),
    ),
    # An extra output line is a difference.
    Case(
        "py-stdio-extra-line",
        "python",
        SUM_IO,
        py(PY_SUM + "\nprint('done')"),
        0.0,
        ("wrong_answer",) * 4,
    ),
    # A crash on one test costs that test only.
    Case(
        "py-stdio-crash-one",
        "python",
        SUM_IO,
        py("a, b = map(int, input().split())\nassert a != 0\nprint(a + b)"),
        0.75,
        ("passed", "passed", "runtime_error", "passed"),
    ),
    # Right output but a non-zero exit status: a runtime error.
    Case(
        "py-stdio-nonzero-exit",
        "python",
        {"stdio": [{"input": "1 2\n", "output": "3\n"}]},
        py(PY_SUM + "\nimport sys\nsys.exit(3)"),
        0.0,
        ("runtime_error",),
    ),
    # What goes to stderr does not matter.
    Case(
        "py-stdio-stderr-ignored",
        "python",
        SUM_IO,
        py("import sys\nprint('debug', file=sys.stderr)\n" + PY_SUM),
        1.0,
    ),
    # Reading all of stdin at once works; the input can be long.
    Case(
        "py-stdio-read-all",
        "python",
        {"stdio": [{"input": " ".join(map(str, range(20000))), "output": str(sum(range(20000)))}]},
        py("import sys\nprint(sum(map(int, sys.stdin.read().split())))"),
        1.0,
    ),
    # Invalid UTF-8 on stdout is a wrong answer, not a crash of the scorer.
    Case(
        "py-stdio-invalid-utf8",
        "python",
        {"stdio": [{"input": "", "output": "3\n"}]},
        py("import sys\nsys.stdout.buffer.write(b'\\xff\\xfe3\\n')"),
        0.0,
        ("wrong_answer",),
    ),
    # A syntax error scores 0 without running.
    Case(
        "py-stdio-syntax-error",
        "python",
        SUM_IO,
        py("def f(:\n    pass"),
        0.0,
        reason="syntax_error",
    ),
    # An empty response has no code.
    Case("py-stdio-empty", "python", SUM_IO, "", 0.0, parsed=False, reason="no_code"),
    # Code only in another language: no Python code at all.
    Case(
        "py-stdio-other-language",
        "python",
        SUM_IO,
        "```java\nclass A {}\n```",
        0.0,
        parsed=False,
        reason="no_code",
    ),
    # An infinite loop spends the whole budget: 0, whatever passed.
    Case(
        "py-stdio-infinite-loop",
        "python",
        SUM_IO,
        py("a, b = map(int, input().split())\nwhile a == 0: pass\nprint(a + b)"),
        0.0,
        reason="budget_exceeded",
    ),
    # The budget is over ALL tests: each test alone fits in 1 s, the four together do not.
    Case(
        "py-stdio-budget-is-total",
        "python",
        SUM_IO,
        py(BURN + "\nburn(0.4)\n" + PY_SUM),
        0.0,
        reason="budget_exceeded",
        config={"budget_s": 1.0, "wall_cap_s": 10.0},
    ),
    # Output past the limit fails the test as output_limit.
    Case(
        "py-stdio-output-limit",
        "python",
        {"stdio": [{"input": "", "output": "1\n"}]},
        py("while True: print('x' * 1000)"),
        0.0,
        ("output_limit",),
    ),
]

PY_FN = [
    Case("py-fn-correct", "python", ADD_CASES, py("def add(a, b):\n    return a + b"), 1.0),
    # Annotations are evaluated as under python3: a name used in one but never imported fails
    # when the function is defined, before any test runs.
    Case(
        "py-fn-unimported-annotation",
        "python",
        ADD_CASES,
        py("def add(a: Sequence, b: int) -> int:\n    return a + b"),
        0.0,
        ("runtime_error", "runtime_error", "runtime_error"),
    ),
    Case(
        "py-fn-imported-annotation",
        "python",
        ADD_CASES,
        py("from typing import Sequence\ndef add(a: Sequence, b: int) -> int:\n    return a + b"),
        1.0,
    ),
    # A LeetCode-style method of class Solution.
    Case(
        "py-fn-solution-class",
        "python",
        ADD_CASES,
        py("class Solution:\n    def add(self, a, b):\n        return a + b"),
        1.0,
    ),
    # Partial credit: one case of three.
    Case(
        "py-fn-partial",
        "python",
        ADD_CASES,
        py("def add(a, b):\n    return a * b if a < 0 else a - b + 2 * b if a == 1 else 0"),
        1 / 3,
        ("passed", "wrong_answer", "wrong_answer"),
    ),
    # An exception in one case costs that case only.
    Case(
        "py-fn-raises-one",
        "python",
        ADD_CASES,
        py("def add(a, b):\n    if a < 0: raise ValueError('neg')\n    return a + b"),
        2 / 3,
        ("passed", "runtime_error", "passed"),
    ),
    # A tuple matches an expected JSON list.
    Case(
        "py-fn-tuple-as-list",
        "python",
        {"fn_name": "pair", "cases": [{"args": [3], "expected": [3, 4]}]},
        py("def pair(x):\n    return (x, x + 1)"),
        1.0,
    ),
    # Floats within tolerance, nested in a list.
    Case(
        "py-fn-float-tolerance",
        "python",
        {"fn_name": "thirds", "cases": [{"args": [2], "expected": [0.3333333, 0.6666667]}]},
        py("def thirds(n):\n    return [i / 3 for i in range(1, n + 1)]"),
        1.0,
    ),
    # True is not 1 in JSON.
    Case(
        "py-fn-bool-is-not-int",
        "python",
        {"fn_name": "f", "cases": [{"args": [], "expected": 1}]},
        py("def f():\n    return True"),
        0.0,
        ("wrong_answer",),
    ),
    # Integers are exact: no tolerance between two ints.
    Case(
        "py-fn-int-exact",
        "python",
        {"fn_name": "f", "cases": [{"args": [], "expected": 10**12}]},
        py("def f():\n    return 10**12 + 1"),
        0.0,
        ("wrong_answer",),
    ),
    # dict keys compare as JSON strings.
    Case(
        "py-fn-dict-int-keys",
        "python",
        {"fn_name": "f", "cases": [{"args": [], "expected": {"1": "a", "2": None}}]},
        py("def f():\n    return {1: 'a', 2: None}"),
        1.0,
    ),
    # A set is not a JSON list.
    Case(
        "py-fn-set-not-list",
        "python",
        {"fn_name": "f", "cases": [{"args": [], "expected": [1, 2]}]},
        py("def f():\n    return {1, 2}"),
        0.0,
        ("wrong_answer",),
    ),
    # An object whose __eq__ always says True earns nothing: it is not plain data.
    Case(
        "py-fn-always-equal",
        "python",
        ADD_CASES,
        py(ALWAYS_EQUAL + "\ndef add(a, b):\n    return Anything()"),
        0.0,
        ("wrong_answer",) * 3,
    ),
    # An int subclass lying in __eq__ is reported by its int value.
    Case(
        "py-fn-int-subclass",
        "python",
        ADD_CASES,
        py(
            "class Liar(int):\n    def __eq__(self, o): return True\n"
            "    def __int__(self): return 3\n"
            "def add(a, b):\n    return Liar(7)"
        ),
        0.0,
        ("wrong_answer",) * 3,
    ),
    # sys.exit(0) inside the function is that case's runtime error.
    Case(
        "py-fn-sys-exit",
        "python",
        ADD_CASES,
        py("import sys\ndef add(a, b):\n    sys.exit(0)"),
        0.0,
        ("runtime_error",) * 3,
    ),
    # sys.exit(0) at the top level: nothing runs, nothing passes.
    Case(
        "py-fn-exit-at-import",
        "python",
        ADD_CASES,
        py("import sys\nsys.exit(0)\ndef add(a, b):\n    return a + b"),
        0.0,
        ("runtime_error",) * 3,
    ),
    # os._exit(0) in one case: that case only.
    Case(
        "py-fn-os-exit-one",
        "python",
        ADD_CASES,
        py("import os\ndef add(a, b):\n    if a == 100: os._exit(0)\n    return a + b"),
        2 / 3,
        ("passed", "passed", "runtime_error"),
    ),
    # A segfault in one case: that case only.
    Case(
        "py-fn-segfault-one",
        "python",
        ADD_CASES,
        py("import ctypes\ndef add(a, b):\n    if a < 0: ctypes.string_at(0)\n    return a + b"),
        2 / 3,
        ("passed", "runtime_error", "passed"),
    ),
    # Forged result lines written to every open descriptor void the forged tests.
    Case(
        "py-fn-forged-results",
        "python",
        ADD_CASES,
        py(
            "import os\nfor fd in range(1, 20):\n"
            "    for i, v in enumerate([3, 0, 123]):\n"
            "        try:\n"
            '            os.write(fd, (\'\\x1ePROCTOR {"i": %d, "values": [{"ok": %d}]}\\n\''
            " % (i, v)).encode())\n"
            "        except OSError:\n"
            "            pass\n"
            "def add(a, b):\n    return a + b"
        ),
        0.0,
        ("runtime_error",) * 3,
    ),
    # Printed fake verdicts mean nothing.
    Case(
        "py-fn-printed-verdicts",
        "python",
        ADD_CASES,
        py(PASS_LINES + "\ndef add(a, b):\n    " + PASS_LINES + "\n    return 0"),
        1 / 3,
        ("wrong_answer", "passed", "wrong_answer"),
    ),
    # Cases run in order in one process, as a test file would: state carries over ...
    Case(
        "py-fn-state-in-order",
        "python",
        {"fn_name": "tick", "cases": [{"args": [], "expected": k} for k in (1, 2, 3)]},
        py("n = 0\ndef tick():\n    global n\n    n += 1\n    return n"),
        1.0,
    ),
    # ... until a case kills its process: the next case starts from the freshly loaded module.
    Case(
        "py-fn-fresh-after-crash",
        "python",
        {"fn_name": "tick", "cases": [{"args": [k], "expected": 1} for k in (0, 1, 2)]},
        py(
            "import os\nn = 0\ndef tick(k):\n    global n\n    n += 1\n"
            "    if k == 1: os._exit(3)\n    return n"
        ),
        2 / 3,
        ("passed", "runtime_error", "passed"),
    ),
    # Every test ends its process: each fails alone, each in a fresh run.
    Case(
        "py-asserts-exit-every-test",
        "python",
        SQUARE_ASSERTS,
        py("import os\ndef square(x):\n    os._exit(7)"),
        0.0,
        ("runtime_error",) * 4,
    ),
    # A SIGKILL the sandbox did not send (here the program's own) fails that test only.
    Case(
        "py-asserts-sigkill-one",
        "python",
        SQUARE_ASSERTS,
        py(
            "import os, signal\ndef square(x):\n"
            "    if x < 0: os.kill(os.getpid(), signal.SIGKILL)\n    return x * x"
        ),
        0.75,
        ("passed", "runtime_error", "passed", "passed"),
    ),
    # The fresh runs after a crash share the one CPU budget.
    Case(
        "py-asserts-budget-across-crashes",
        "python",
        SQUARE_ASSERTS,
        py(
            "import os, time\ndef square(x):\n    t = time.process_time()\n"
            "    while time.process_time() - t < 0.4:\n        pass\n    os._exit(0)"
        ),
        0.0,
        reason="budget_exceeded",
        config={"budget_s": 1.0, "wall_cap_s": 10.0},
    ),
    # A missing function is a runtime error of every case.
    Case(
        "py-fn-missing",
        "python",
        ADD_CASES,
        py("def plus(a, b):\n    return a + b"),
        0.0,
        ("runtime_error",) * 3,
    ),
    # A very large integer travels exactly.
    Case(
        "py-fn-big-int",
        "python",
        {"fn_name": "p", "cases": [{"args": [9000], "expected": 3**9000}]},
        py("def p(n):\n    return 3 ** n"),
        1.0,
    ),
    # A return value beyond max_value_bytes fails as output_limit.
    Case(
        "py-fn-value-too-large",
        "python",
        {"fn_name": "f", "cases": [{"args": [], "expected": []}]},
        py("def f():\n    return list(range(10**6))"),
        0.0,
        ("output_limit",),
    ),
    # An infinite loop in one case spends the budget: 0.
    Case(
        "py-fn-infinite-loop",
        "python",
        ADD_CASES,
        py("def add(a, b):\n    while a == 100: pass\n    return a + b"),
        0.0,
        reason="budget_exceeded",
    ),
    # Nested data with None.
    Case(
        "py-fn-nested",
        "python",
        {
            "fn_name": "group",
            "cases": [
                {"args": [[1, 2, 3, 4]], "expected": {"odd": [1, 3], "even": [2, 4], "x": None}}
            ],
        },
        py(
            "def group(xs):\n    return {'odd': [x for x in xs if x % 2],"
            " 'even': [x for x in xs if not x % 2], 'x': None}"
        ),
        1.0,
    ),
]

PY_ASSERTS = [
    Case(
        "py-asserts-correct", "python", SQUARE_ASSERTS, py("def square(x):\n    return x * x"), 1.0
    ),
    # Partial credit: one verdict per assert.
    Case(
        "py-asserts-partial",
        "python",
        SQUARE_ASSERTS,
        py("def square(x):\n    return x * abs(x)"),
        0.75,
        ("passed", "wrong_answer", "passed", "passed"),
    ),
    # One crashing assert does not take the others.
    Case(
        "py-asserts-crash-one",
        "python",
        SQUARE_ASSERTS,
        py("def square(x):\n    return x * x // (x + 3)  * 0 + x * x"),
        0.75,
        ("passed", "runtime_error", "passed", "passed"),
    ),
    # An always-equal object earns nothing.
    Case(
        "py-asserts-always-equal",
        "python",
        SQUARE_ASSERTS,
        py(ALWAYS_EQUAL + "\ndef square(x):\n    return Anything()"),
        0.0,
        ("wrong_answer",) * 4,
    ),
    # An early sys.exit(0) earns nothing.
    Case(
        "py-asserts-early-exit",
        "python",
        SQUARE_ASSERTS,
        py("import sys\nsys.exit(0)"),
        0.0,
        ("runtime_error",) * 4,
    ),
    # Printed fake verdicts earn nothing.
    Case(
        "py-asserts-printed-verdicts",
        "python",
        SQUARE_ASSERTS,
        py(PASS_LINES + "\ndef square(x):\n    " + PASS_LINES + "\n    return -1"),
        0.0,
        ("wrong_answer",) * 4,
    ),
    # Patching the test helper (math.isclose) earns nothing: isclose is applied outside.
    Case(
        "py-asserts-patched-isclose",
        "python",
        {
            "asserts": ["assert math.isclose(half(1), 0.5)", "assert isclose(half(3), 1.5)"],
            "setup": "import math\nfrom math import isclose",
        },
        py("import math\nmath.isclose = lambda *a, **k: True\ndef half(x):\n    return 7"),
        0.0,
        ("wrong_answer", "wrong_answer"),
    ),
    # ... and the honest solution passes it.
    Case(
        "py-asserts-isclose",
        "python",
        {
            "asserts": [
                "assert math.isclose(half(1), 0.5)",
                "assert isclose(half(3), 1.5, rel_tol=1e-3)",
            ],
            "setup": "import math\nfrom math import isclose",
        },
        py("def half(x):\n    return x / 2"),
        1.0,
    ),
    # An assert's right side that is not a literal is evaluated too and compared outside.
    Case(
        "py-asserts-computed-rhs",
        "python",
        {"asserts": ["assert srt([3, 1, 2]) == sorted([2, 3, 1])", "assert srt([]) == list()"]},
        py("def srt(xs):\n    return sorted(xs)"),
        1.0,
    ),
    # Bare truthiness and `not`.
    Case(
        "py-asserts-truthiness",
        "python",
        {"asserts": ["assert is_even(4)", "assert not is_even(3)", "assert is_even(0) == True"]},
        py("def is_even(n):\n    return n % 2 == 0"),
        1.0,
    ),
    # Arithmetic around the call is evaluated inside, the comparison outside.
    Case(
        "py-asserts-abs-tolerance",
        "python",
        {
            "asserts": [
                "assert abs(area(1) - 3.14159) < 1e-4",
                "assert abs(area(2) - 12.56637) < 1e-4",
            ]
        },
        py("import math\ndef area(r):\n    return math.pi * r * r"),
        1.0,
    ),
    # Chained comparisons.
    Case(
        "py-asserts-chained",
        "python",
        {"asserts": ["assert 0 < rnd(5) <= 5", "assert 0 < rnd(1) <= 1"]},
        py("def rnd(n):\n    return n"),
        1.0,
    ),
    # `is None` is identity with None.
    Case(
        "py-asserts-is-none",
        "python",
        {"asserts": ["assert find([1, 2], 3) is None", "assert find([1, 2], 2) is not None"]},
        py("def find(xs, x):\n    return 0 if x not in xs else xs.index(x)"),
        0.5,
        ("wrong_answer", "passed"),
    ),
    # Python's own semantics: a tuple is not a list ...
    Case(
        "py-asserts-tuple-vs-list",
        "python",
        {"asserts": ["assert pair(1) == (1, 2)", "assert pair(1) == [1, 2]"]},
        py("def pair(x):\n    return [x, x + 1]"),
        0.5,
        ("wrong_answer", "passed"),
    ),
    # ... sets compare as sets, and True == 1.
    Case(
        "py-asserts-set-and-bool",
        "python",
        {"asserts": ["assert uniq([1, 1, 2]) == {1, 2}", "assert one() == 1"]},
        py("def uniq(xs):\n    return set(xs)\ndef one():\n    return True"),
        1.0,
    ),
    # Membership, and the assert's message is ignored.
    Case(
        "py-asserts-in-and-message",
        "python",
        {"asserts": ["assert pick() in [1, 2, 3], 'bad pick'", "assert 'b' in letters()"]},
        py("def pick():\n    return 2\ndef letters():\n    return 'abc'"),
        1.0,
    ),
    # `and` / `or` short-circuit as in Python: the raising call is never needed.
    Case(
        "py-asserts-short-circuit",
        "python",
        {"asserts": ["assert ok() or boom()", "assert not ok() and boom()"]},
        py("def ok():\n    return True\ndef boom():\n    raise RuntimeError('x')"),
        0.5,
        ("passed", "wrong_answer"),
    ),
    # The setup code defines helpers the asserts use.
    Case(
        "py-asserts-setup",
        "python",
        {
            "asserts": ["assert double(21) == reference(21)"],
            "setup": "def reference(x):\n    return 2 * x",
        },
        py("def double(x):\n    return x + x"),
        1.0,
    ),
    # A segfault in one assert costs that assert only.
    Case(
        "py-asserts-segfault-one",
        "python",
        SQUARE_ASSERTS,
        py("import ctypes\ndef square(x):\n    if x == 0: ctypes.string_at(0)\n    return x * x"),
        0.75,
        ("passed", "passed", "runtime_error", "passed"),
    ),
    # A syntax error scores 0 with the line in the details.
    Case(
        "py-asserts-syntax-error",
        "python",
        SQUARE_ASSERTS,
        py("def square(x)\n    return x * x"),
        0.0,
        reason="syntax_error",
    ),
    # An infinite loop: the budget is spent, 0.
    Case(
        "py-asserts-infinite-loop",
        "python",
        SQUARE_ASSERTS,
        py("def square(x):\n    while x == 10: pass\n    return x * x"),
        0.0,
        reason="budget_exceeded",
    ),
    # A program with a main guard: the guard does not run under the harness.
    Case(
        "py-asserts-main-guard",
        "python",
        SQUARE_ASSERTS,
        py(
            "def square(x):\n    return x * x\n"
            "if __name__ == '__main__':\n    print(square(int(input())))"
        ),
        1.0,
    ),
    # A memory bomb in one assert fails that assert as memory.
    Case(
        "py-asserts-memory-one",
        "python",
        SQUARE_ASSERTS,
        py(
            "def square(x):\n    if x == 10: return len(bytearray(4 * 1024 ** 3))\n    return x * x"
        ),
        0.75,
        ("passed", "passed", "passed", "memory"),
    ),
]

CPP_STDIO = [
    Case("cpp-stdio-correct", "cpp", SUM_IO, cpp(CPP_SUM), 1.0, ("passed",) * 4),
    # The c++ tag, and bits/stdc++.h compiles under the memory limit.
    Case(
        "cpp-stdio-bits-header",
        "cpp",
        SUM_IO,
        "```c++\n#include <bits/stdc++.h>\nusing namespace std;\n"
        "int main(){long long a,b;cin>>a>>b;cout<<a+b<<endl;}\n```",
        1.0,
    ),
    # A compile error scores 0.
    Case(
        "cpp-stdio-compile-error",
        "cpp",
        SUM_IO,
        cpp("int main() { return undefined_name; }"),
        0.0,
        reason="compile_error",
    ),
    # Wrong answers.
    Case(
        "cpp-stdio-wrong",
        "cpp",
        SUM_IO,
        cpp(
            "#include <cstdio>\n"
            'int main(){long long a,b;scanf("%lld %lld",&a,&b);printf("%lld\\n",a-b);}'
        ),
        0.25,
        ("wrong_answer", "wrong_answer", "passed", "wrong_answer"),
    ),
    # A crash (abort) on one test costs that test.
    Case(
        "cpp-stdio-abort-one",
        "cpp",
        SUM_IO,
        cpp(
            "#include <cstdio>\n#include <cstdlib>\nint main(){long long a,b;"
            'scanf("%lld %lld",&a,&b);if(a==0)abort();printf("%lld\\n",a+b);}'
        ),
        0.75,
        ("passed", "passed", "runtime_error", "passed"),
    ),
    # A non-zero return from main is a runtime error.
    Case(
        "cpp-stdio-nonzero-exit",
        "cpp",
        {"stdio": [{"input": "1 2", "output": "3"}]},
        cpp('#include <cstdio>\nint main(){puts("3");return 1;}'),
        0.0,
        ("runtime_error",),
    ),
    # Float output within tolerance.
    Case(
        "cpp-stdio-float",
        "cpp",
        {"stdio": [{"input": "2\n", "output": "1.4142136\n"}]},
        cpp(
            "#include <cstdio>\n#include <cmath>\n"
            'int main(){double x;scanf("%lf",&x);printf("%.10f\\n",sqrt(x));}'
        ),
        1.0,
    ),
    # An infinite loop: 0.
    Case(
        "cpp-stdio-infinite-loop",
        "cpp",
        SUM_IO,
        cpp("int main(){volatile int x=1;while(x){}}"),
        0.0,
        reason="budget_exceeded",
    ),
    # Output without the final newline, and many lines.
    Case(
        "cpp-stdio-lines",
        "cpp",
        {"stdio": [{"input": "5\n", "output": "1\n2\n3\n4\n5\n"}]},
        cpp(
            "#include <cstdio>\n"
            'int main(){int n;scanf("%d",&n);for(int i=1;i<=n;i++)printf(i<n?"%d\\n":"%d",i);}'
        ),
        1.0,
    ),
    # Only a Python block: no C++ code.
    Case("cpp-stdio-python-only", "cpp", SUM_IO, py(PY_SUM), 0.0, parsed=False, reason="no_code"),
    # A memory bomb fails its test (bad_alloc under the limit).
    Case(
        "cpp-stdio-memory",
        "cpp",
        {"stdio": [{"input": "", "output": "1\n"}]},
        cpp(
            "#include <vector>\n#include <cstdio>\n"
            'int main(){std::vector<char> v(4000000000ULL,1);printf("%d\\n",(int)v[12345]);}'
        ),
        0.0,
        ("memory",),
    ),
    # Output past the limit.
    Case(
        "cpp-stdio-output-limit",
        "cpp",
        {"stdio": [{"input": "", "output": "1\n"}]},
        cpp('#include <cstdio>\nint main(){for(;;)puts("yyyyyyyyyyyyyyyyyyyyyyyyyyyyy");}'),
        0.0,
        ("output_limit",),
    ),
    # A sleeping program is stopped by the wall-clock backstop: 0.
    Case(
        "cpp-stdio-sleep",
        "cpp",
        {"stdio": [{"input": "", "output": "1\n"}]},
        cpp("#include <unistd.h>\nint main(){sleep(100);}"),
        0.0,
        reason="budget_exceeded",
        config={"budget_s": 1.0, "wall_cap_s": 2.0},
    ),
]

TWO_SUM = {
    "fn_name": "twoSum",
    "cases": [
        {"args": [[2, 7, 11, 15], 9], "expected": [0, 1]},
        {"args": [[3, 2, 4], 6], "expected": [1, 2]},
        {"args": [[3, 3], 6], "expected": [0, 1]},
    ],
}
CPP_TWO_SUM = """
#include <vector>
using namespace std;
class Solution {
public:
    vector<int> twoSum(vector<int>& nums, int target) {
        for (int i = 0; i < (int)nums.size(); i++)
            for (int j = i + 1; j < (int)nums.size(); j++)
                if (nums[i] + nums[j] == target) return {i, j};
        return {};
    }
};
"""

CPP_FN = [
    # A LeetCode-style method taking a vector by reference.
    Case("cpp-fn-solution-class", "cpp", TWO_SUM, cpp(CPP_TWO_SUM), 1.0, ("passed",) * 3),
    # A free function, under `#define int long long`.
    Case(
        "cpp-fn-free-function",
        "cpp",
        {
            "fn_name": "half",
            "cases": [{"args": [3], "expected": 1.5}, {"args": [4], "expected": 2}],
        },
        cpp(
            "#include <bits/stdc++.h>\n#define int long long\nusing namespace std;\n"
            "double half(int x) { return x / 2.0; }"
        ),
        1.0,
    ),
    # Strings and chars, with quotes.
    Case(
        "cpp-fn-strings",
        "cpp",
        {
            "fn_name": "greet",
            "cases": [
                {"args": ["bob", "!"], "expected": "hi bob!"},
                {"args": ['a"b', "?"], "expected": 'hi a"b?'},
            ],
        },
        cpp(
            "#include <string>\n"
            'std::string greet(const std::string& s, char c) { return "hi " + s + c; }'
        ),
        1.0,
    ),
    # A map return; an exception and a segfault each cost their own case.
    Case(
        "cpp-fn-map-exception-segfault",
        "cpp",
        {
            "fn_name": "f",
            "cases": [
                {"args": [1], "expected": {"a": 1, "b": 2}},
                {"args": [-1], "expected": {}},
                {"args": [0], "expected": {}},
            ],
        },
        cpp(
            "#include <map>\n#include <string>\n#include <stdexcept>\n"
            "std::map<std::string, int> f(int n) {\n"
            '    if (n < 0) throw std::runtime_error("neg");\n'
            '    if (n == 0) { volatile int* p = nullptr; return {{"x", *p}}; }\n'
            '    return {{"a", n}, {"b", n * 2}};\n}'
        ),
        1 / 3,
        ("passed", "runtime_error", "runtime_error"),
    ),
    # Partial credit.
    Case(
        "cpp-fn-partial",
        "cpp",
        ADD_CASES,
        cpp("long long add(long long a, long long b) { return a > 0 ? a + b : a - b; }"),
        2 / 3,
        ("passed", "wrong_answer", "passed"),
    ),
    # vector<double> within tolerance; a pair reads as a list.
    Case(
        "cpp-fn-doubles-and-pair",
        "cpp",
        {"fn_name": "g", "cases": [{"args": [3], "expected": [[0.3333333, 0.6666667], [3, 9]]}]},
        cpp(
            "#include <vector>\n#include <utility>\nusing namespace std;\n"
            "pair<vector<double>, pair<int, int>> g(int n) {\n"
            "    return {{1.0 / n, 2.0 / n}, {n, n * n}};\n}"
        ),
        1.0,
    ),
    # A vector<bool>.
    Case(
        "cpp-fn-vector-bool",
        "cpp",
        {"fn_name": "odd", "cases": [{"args": [[1, 2, 3]], "expected": [True, False, True]}]},
        cpp(
            "#include <vector>\nstd::vector<bool> odd(std::vector<int> xs) {\n"
            "    std::vector<bool> r; for (int x : xs) r.push_back(x % 2); return r;\n}"
        ),
        1.0,
    ),
    # Printing a forged result line voids the case.
    Case(
        "cpp-fn-forged-result",
        "cpp",
        ADD_CASES,
        cpp(
            "#include <cstdio>\nlong long add(long long a, long long b) {\n"
            '    printf("\\n\\x1ePROCTOR {\\"i\\":0,\\"values\\":[{\\"ok\\":3}]}\\n");\n'
            "    return 3;\n}"
        ),
        0.0,
        ("runtime_error",) * 3,
    ),
    # No function of that name: a compile error.
    Case(
        "cpp-fn-missing",
        "cpp",
        ADD_CASES,
        cpp("long long plus(long long a, long long b) { return a + b; }"),
        0.0,
        reason="compile_error",
    ),
    # An infinite loop in one case spends the budget.
    Case(
        "cpp-fn-infinite-loop",
        "cpp",
        ADD_CASES,
        cpp(
            "long long add(long long a, long long b) {\n"
            "    volatile long long x = a; while (x == 100) {} return a + b;\n}"
        ),
        0.0,
        reason="budget_exceeded",
    ),
]

CASES = PY_STDIO + PY_FN + PY_ASSERTS + CPP_STDIO + CPP_FN


def test_there_are_enough_cases() -> None:
    assert len(CASES) >= 60
    assert len({c.id for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_functional(case: Case, backend: SandboxBackend) -> None:
    clear_cache()
    reference = CodeReference.model_validate({"language": case.language, "tests": case.tests})
    config = CodeConfig(**case.config)
    judgement = score_code(case.response, reference, config, ScoreContext(sandbox=backend))
    details = judgement.details
    assert judgement.score == pytest.approx(case.score, abs=1e-12), details
    assert judgement.success == (case.score == 1.0), details
    assert judgement.parsed == case.parsed, details
    if case.reason is not None:
        assert details.get("reason") == case.reason, details
    else:
        assert "reason" not in details, details
    if case.statuses is not None:
        assert tuple(t["status"] for t in details["tests"]) == case.statuses, details
