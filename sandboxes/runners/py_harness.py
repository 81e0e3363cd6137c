"""Runs INSIDE the sandbox: load a Python solution once, then evaluate each test in a forked child.

Usage: python3 -I py_harness.py job.json   (job.json is written by the code scorer)

    {"solution": "solution.py", "setup": "<code run after the solution>", "mode": "call"|"eval",
     "fn_name": "solve", "tests": [...], "max_value_bytes": 65536}

- mode "call": tests[i] is a list of positional arguments; the child calls `fn_name(*args)` (a
  top-level function, else a method of a top-level class `Solution`, instantiated per test).
- mode "eval": tests[i] is a list of expressions; the child evaluates each one.

Each test runs in its own forked child, so a crash, `os._exit` or segfault loses that test only;
the solution's top level and the setup run once, in this process, with `__name__ == "solution"`.

Only VALUES leave the sandbox: each result is serialised to a tagged JSON form (tuples, sets,
dicts with any keys, bytes, non-finite floats kept apart) and the verdict is computed outside by
the scorer, which alone holds the expected values. This code runs in the same process as the
program under test, so nothing it writes is trusted beyond "these are values the program
produced": faking a line only claims values the program could have returned honestly, and a
duplicated test index voids that test. The solution's own prints go to stderr; results go to
the original stdout, one line each:

    \x1ePROCTOR {"i": 3, "values": [{"ok": <tagged>} | {"err": "TypeError: ..."}, ...]}
    \x1ePROCTOR {"i": 3, "exit": 0, "signal": null, "cpu_s": 0.001}       (written by the parent)
    \x1ePROCTOR {"fatal": "ValueError: ...", "stage": "solution"|"setup"|"function"}
"""

import json
import math
import os
import sys
from collections.abc import Callable
from typing import Any

_MARK = "\x1ePROCTOR "
_MAX_DEPTH = 200
_BIG_INT = 10**4000  # larger ints travel as hex: decimal conversion is capped and quadratic


class Unserialisable(Exception):
    pass


def encode(value: Any, depth: int = 0) -> Any:
    """A JSON-able, tagged image of plain data; anything else raises `Unserialisable`.

    Subclasses of builtins are read through the builtin's own methods, so an overridden
    `__eq__`, `__iter__` or `__str__` cannot change what is reported.
    """
    if depth > _MAX_DEPTH:
        raise Unserialisable("nested too deeply")
    d = depth + 1
    if value is None or value is True or value is False:
        return value
    if isinstance(value, int):
        i = int.__int__(value)
        return i if -_BIG_INT < i < _BIG_INT else {"int": hex(i)}
    if isinstance(value, float):
        f = float.__float__(value)
        return f if math.isfinite(f) else {"float": repr(f)}
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, list):
        return [encode(v, d) for v in list.__iter__(value)]
    if isinstance(value, tuple):
        return {"tuple": [encode(v, d) for v in tuple.__iter__(value)]}
    if isinstance(value, dict):
        return {"dict": [[encode(k, d), encode(v, d)] for k, v in dict.items(value)]}
    if isinstance(value, frozenset):
        return {"frozenset": [encode(v, d) for v in frozenset.__iter__(value)]}
    if isinstance(value, set):
        return {"set": [encode(v, d) for v in set.__iter__(value)]}
    if isinstance(value, (bytes, bytearray)):
        return {"bytes": bytes(value).hex()}
    if isinstance(value, complex):
        c = complex.__complex__(value)
        return {"complex": [encode(c.real, d), encode(c.imag, d)]}
    if isinstance(value, range):
        return {"range": [value.start, value.stop, value.step]}
    # numpy scalars and arrays, and other array-likes: their plain-data image.
    tolist = getattr(type(value), "tolist", None)
    if callable(tolist):
        return encode(tolist(value), d)
    raise Unserialisable(f"a {type(value).__name__} is not plain data")


def _emit(fd: int, payload: dict[str, Any]) -> None:
    data = (_MARK + json.dumps(payload, ensure_ascii=True) + "\n").encode()
    while data:
        data = data[os.write(fd, data) :]


def _error(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text[:300]


def _run_test(
    out: int, i: int, mode: str, test: Any, fn: Any, namespace: dict[str, Any], limit: int
) -> None:
    values: list[dict[str, Any]] = []
    probes: list[Callable[[], Any]]
    if mode == "call":
        probes = [lambda: fn()(*test)]
    else:
        probes = [
            (lambda code: lambda: eval(code, namespace))(compile(src, f"<test {i}>", "eval"))
            for src in test
        ]
    for probe in probes:
        try:
            values.append({"ok": encode(probe())})
        except Unserialisable as exc:
            values.append({"unserialisable": str(exc)[:200]})
        except RecursionError as exc:
            values.append({"err": _error(exc)})
        except MemoryError:
            values.append({"err": "MemoryError", "memory": True})
        except BaseException as exc:  # noqa: BLE001 - recorded: it is this test's verdict
            values.append({"err": _error(exc)})
    payload = {"i": i, "values": values}
    try:
        line = json.dumps(payload, ensure_ascii=True)
    except (ValueError, RecursionError) as exc:
        payload = {"i": i, "values": [{"unserialisable": _error(exc)}]}
        line = ""
    if len(line) > limit:
        payload = {"i": i, "too_large": len(line)}
    _emit(out, payload)


def main() -> None:
    out = os.dup(1)
    os.dup2(2, 1)  # the program's own prints go to stderr
    with open(sys.argv[1], encoding="utf-8") as f:
        job = json.load(f)
    mode, tests, limit = job["mode"], job["tests"], int(job["max_value_bytes"])
    fork, wait4, exit_ = os.fork, os.wait4, os._exit
    namespace: dict[str, Any] = {"__name__": "solution", "__builtins__": __builtins__}
    stage = "solution"
    try:
        with open(job["solution"], encoding="utf-8", errors="surrogateescape") as f:
            source = f.read()
        exec(compile(source, "solution.py", "exec"), namespace)
        stage = "setup"
        if job.get("setup"):
            exec(compile(job["setup"], "setup.py", "exec"), namespace)
    except BaseException as exc:  # noqa: BLE001 - recorded as every test's fatal error
        _emit(out, {"fatal": _error(exc), "stage": stage})
        sys.stdout.flush()
        exit_(0)

    def function() -> Any:
        name = job["fn_name"]
        if name in namespace:
            return namespace[name]
        owner = namespace.get("Solution")
        if isinstance(owner, type):
            return getattr(owner(), name)
        raise NameError(f"no function or Solution method named {name!r}")

    for i, test in enumerate(tests):
        sys.stdout.flush()
        sys.stderr.flush()
        pid = fork()
        if pid == 0:
            code = 0
            try:
                _run_test(out, i, mode, test, function, namespace, limit)
            except BaseException:  # noqa: BLE001 - reported as exit code 70, no values
                code = 70
            finally:
                exit_(code)
        _, status, usage = wait4(pid, 0)
        _emit(
            out,
            {
                "i": i,
                "exit": os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else None,
                "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
                "cpu_s": round(usage.ru_utime + usage.ru_stime, 6),
            },
        )
    exit_(0)


if __name__ == "__main__":
    main()
