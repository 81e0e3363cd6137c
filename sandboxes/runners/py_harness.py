"""Runs INSIDE the sandbox: load a Python solution, then run its tests in order in this process.

Usage: python3 -I py_harness.py job.marshal   (written by the code scorer with `marshal.dumps`)
       python3 -I py_harness.py --serve CALLS REPLIES MAX_VALUE_BYTES   (see `serve`: started by
       `py_program.py`, the runner of `program` tests, which calls the solution from another
       process)

    {"solution": "solution.py", "setup": "<code run after the solution>", "mode": "call"|"eval",
     "prelude": "<code run before the solution, in its namespace (fn_name's `prelude`)>",
     "fn_name": "solve", "tests": [...], "first": 0, "max_value_bytes": 65536}

- mode "call": tests[i] is a list of positional arguments; the harness calls `fn_name(*args)` (a
  top-level function, else a method of a top-level class `Solution`, instantiated per test).
- mode "eval": tests[i] is a list of expressions; the harness evaluates each one.

The solution's top level and the setup run with `__name__ == "solution"`, then tests `first`..
run in order in this same process, as they would in a test file (state carries over from one
test to the next). Each result line is written as soon as its test ends. When a test kills the
process (a crash, `os._exit`, a signal), the results before it are already out; the scorer
counts that test as failed and starts a fresh run of the harness at the next test (`first`), so
the next test starts from the freshly loaded solution. No second process: a fork per response
would cost more CPU than the ten tests of a typical response.

Only VALUES leave the sandbox: each result is serialised to a tagged JSON form (tuples, sets,
dicts with any keys, bytes, non-finite floats and huge ints kept apart) and the verdict is
computed outside by the scorer, which alone holds the expected values. This code runs in the
same process as the program under test, so nothing it writes is trusted beyond "these are values
the program produced": faking a line only claims values the program could have returned
honestly, and a test index reported twice voids that test. The solution's own prints go to
stderr; results go to the original stdout, one line each:

    \x1ePROCTOR {"i": 3, "values": [{"ok": <tagged>} | {"err": "TypeError: ..."}, ...],
                 "cpu_s": 0.001}
    \x1ePROCTOR {"fatal": "ValueError: ...", "stage": "prelude"|"solution"|"setup"}

No `typing` here: importing it would cost more CPU than the tests themselves, and every
response's budget pays for the harness. `json` is already loaded where the harness usually runs
(forked from the sandbox's supervisor, `fork_python`); an interpreter started afresh pays for it.
"""

from __future__ import annotations

import io
import json
import marshal
import math
import os
import struct
import sys
import time

TYPE_CHECKING = False  # mypy reads this as True; `typing` costs more to import than we spend
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

_process_time = time.process_time
"""Bound once, as are the other calls each test makes: the harness usually runs in a fork of the
sandbox's supervisor, where each `module.name` its cold code evaluates writes to (copies the page
of) the `name` string; a global does not."""
_isfinite = math.isfinite
_FileIO, _loads = io.FileIO, marshal.loads
_MARK = "\x1ePROCTOR "
_MAX_DEPTH = 200
_BIG_INT: list[int] = []  # 10**4000, made when first needed (it costs more than a test)
"""Ints from 10**4000 up travel as hex: decimal conversion is capped and quadratic."""


_UTF8 = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
_ASCII = json.JSONEncoder(separators=(",", ":"), allow_nan=False)
"""`json.dumps` with these options, made once: `dumps` would build an encoder for every line."""
_UTF8_ARGS = (_UTF8.default, json.encoder.encode_basestring, None, ":", ",", False, False, False)
"""What `_UTF8.encode` passes to the C encoder it makes (after a fresh `markers` dict)."""


def _c_encoder() -> Any:
    """`json`'s C encoder maker, if it takes `_UTF8_ARGS` as `_UTF8.encode` would pass them
    (checked once, on a sample line), else None (then `dumps` calls `_UTF8.encode` itself)."""
    make = getattr(json.encoder, "c_make_encoder", None)
    sample = {"i": 0, "values": [{"ok": [1, 2.5, "\u00e9", None, True]}], "cpu_s": 0.0}
    try:
        if make is not None and "".join(make({}, *_UTF8_ARGS)(sample, 0)) == _UTF8.encode(sample):
            return make
    except Exception:  # noqa: BLE001 - a `json` whose C encoder is made otherwise
        return None
    return None


_C_ENCODER = _c_encoder()


def _utf8_json(value: Any) -> str:
    """`_UTF8.encode(value)` for the dicts the harness writes: the C encoder it would make, made
    here. `encode`'s own Python code, run once in each forked child, costs it more pages of the
    supervisor's memory (written, so copied) than the encoding itself."""
    if _C_ENCODER is None:
        return _UTF8.encode(value)
    return "".join(_C_ENCODER({}, *_UTF8_ARGS)(value, 0))


def dumps(value: Any) -> str:
    """JSON text of what `encode` returns (and of the harness's own messages): non-ASCII text as
    UTF-8, or as ASCII escapes when it holds lone surrogates, which UTF-8 cannot carry."""
    text = _utf8_json(value) if type(value) is dict else _UTF8.encode(value)
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            text = _ASCII.encode(value)
    return text


def _read(path: str) -> bytes:
    """The file's bytes, read by one raw file object (no buffered or text-mode machinery)."""
    with _FileIO(path) as f:
        return f.readall()


def _source(path: str) -> str:
    """The file's text as `open(path, encoding="utf-8", errors="surrogateescape").read()` gives
    it, universal newlines included."""
    text = _read(path).decode("utf-8", "surrogateescape")
    return text.replace("\r\n", "\n").replace("\r", "\n")


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
        if i.bit_length() < 13287:  # 2**13287 < 10**4000
            return i
        if not _BIG_INT:
            _BIG_INT.append(10**4000)
        return i if -_BIG_INT[0] < i < _BIG_INT[0] else {"int": hex(i)}
    if isinstance(value, float):
        f = float.__float__(value)
        return f if _isfinite(f) else {"float": repr(f)}
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
    data = (_MARK + dumps(payload) + "\n").encode()
    while data:
        data = data[os.write(fd, data) :]


def _error(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text[:300]


def _outcome(probe: Callable[[], Any], typed: bool = False) -> dict[str, Any]:
    """What calling `probe` gave: {"ok": tagged value} or why not (`typed`: with the type of
    the exception, which the `program` runner raises in the test program)."""
    try:
        return {"ok": encode(probe())}
    except Unserialisable as exc:
        return {"unserialisable": str(exc)[:200]}
    except RecursionError as exc:
        return {"err": _error(exc), **({"type": "RecursionError"} if typed else {})}
    except MemoryError:
        return {"err": "MemoryError", "memory": True}
    except BaseException as exc:  # noqa: BLE001 - recorded: it is this test's verdict
        return {"err": _error(exc), **({"type": type(exc).__name__} if typed else {})}


def _run_test(i: int, mode: str, test: Any, fn: Any, namespace: dict[str, Any], limit: int) -> str:
    """Test i's result line (JSON), evaluated in this process."""
    started = _process_time()
    values: list[dict[str, Any]] = []
    probes: list[Callable[[], Any]]
    if mode == "call":
        probes = [lambda: fn()(*test)]
    else:
        probes = [
            (lambda code: lambda: eval(code, namespace))(
                compile(src, f"<test {i}>", "eval", dont_inherit=True)
            )
            for src in test
        ]
    for probe in probes:
        values.append(_outcome(probe))
    cpu_s = round(_process_time() - started, 6)
    try:
        line = dumps({"i": i, "values": values, "cpu_s": cpu_s})
    except (TypeError, RecursionError) as exc:
        line = dumps({"i": i, "values": [{"unserialisable": _error(exc)}], "cpu_s": cpu_s})
    if len(line) > limit:
        line = dumps({"i": i, "too_large": len(line), "cpu_s": cpu_s})
    return line


def _read_exact(fd: int, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = os.read(fd, n - len(data))
        if not chunk:
            os._exit(0)  # the test program's runner is done with us
        data += chunk
    return data


def _solution_call(
    namespace: dict[str, Any], name: str, args: Any, kwargs: Any
) -> Callable[[], Any]:
    def call() -> Any:
        if name not in namespace:
            raise NameError(f"name {name!r} is not defined")
        return namespace[name](*args, **kwargs)

    return call


def serve(calls: int, replies: int, limit: int) -> None:
    """`--serve CALLS REPLIES MAX_VALUE_BYTES`: load the solution, then answer calls for the
    `program` test runner (`py_program.py`), which runs the test program in another process.

    Each call comes on fd CALLS as a 4-byte length and `marshal` data `(name, args, kwargs)`;
    each result goes to fd REPLIES as one JSON line, the same outcome as a `call` test's value."""
    namespace: dict[str, Any] = {"__name__": "solution", "__builtins__": __builtins__}

    def reply(payload: dict[str, Any]) -> None:
        line = dumps(payload)
        if len(line) > limit:
            line = dumps({"too_large": len(line)})
        data = (line + "\n").encode()
        while data:
            data = data[os.write(replies, data) :]

    try:
        source = _source("solution.py")
        exec(compile(source, "solution.py", "exec", dont_inherit=True), namespace)
    except BaseException as exc:  # noqa: BLE001 - every call's error
        reply({"fatal": _error(exc)})
        os._exit(0)
    reply({"ready": True})
    while True:
        (n,) = struct.unpack(">I", _read_exact(calls, 4))
        name, args, kwargs = marshal.loads(_read_exact(calls, n))
        started = time.process_time()
        outcome = _outcome(_solution_call(namespace, name, args, kwargs), typed=True)
        outcome["cpu_s"] = round(time.process_time() - started, 6)
        reply(outcome)


def main() -> None:
    if sys.argv[1] == "--serve":
        serve(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
        return
    out = os.dup(1)
    os.dup2(2, 1)  # the program's own prints go to stderr
    job = _loads(_read(sys.argv[1]))
    mode, tests, limit = job["mode"], job["tests"], int(job["max_value_bytes"])
    namespace: dict[str, Any] = {"__name__": "solution", "__builtins__": __builtins__}
    stage = "prelude"
    try:
        if job.get("prelude"):
            exec(compile(job["prelude"], "prelude.py", "exec", dont_inherit=True), namespace)
        stage = "solution"
        source = _source(job["solution"])
        exec(compile(source, "solution.py", "exec", dont_inherit=True), namespace)
        stage = "setup"
        if job.get("setup"):
            exec(compile(job["setup"], "setup.py", "exec", dont_inherit=True), namespace)
    except BaseException as exc:  # noqa: BLE001 - recorded as every test's fatal error
        _emit(out, {"fatal": _error(exc), "stage": stage})
        os._exit(0)

    def function() -> Any:
        name = job["fn_name"]
        if name in namespace:
            return namespace[name]
        owner = namespace.get("Solution")
        if isinstance(owner, type):
            return getattr(owner(), name)
        raise NameError(f"no function or Solution method named {name!r}")

    # In order, in this process, as in a test file. Each result is written as soon as the test
    # ends, so that when a later test kills the process (os._exit, a signal, a crash) the scorer
    # has every result before it and starts a fresh run at the test after the one that died.
    write = os.write
    for i in range(int(job.get("first", 0)), len(tests)):
        line = (_MARK + _run_test(i, mode, tests[i], function, namespace, limit) + "\n").encode()
        while line:
            line = line[write(out, line) :]
    os._exit(0)


if __name__ == "__main__":
    main()
