"""The trusted programs the compatibility routes run in a run's sandbox after (or instead of) the
caller's code, and the readers of their output.

Both run as `python3 -I -S -c PROGRAM`: isolated mode, so nothing the caller's program left in
the work directory (a `json.py`, a `sitecustomize.py`) or the environment is imported. Their
output is the caller's own business (a program could forge what it fetches of itself), so it is
read strictly but trusted no further than the caller's own output would be.

- `FETCH`: opens each of `fetch_files` beneath the work directory, one component at a time with
  `O_NOFOLLOW` (no symlink followed, a `..` never reached: the paths are checked before), keeps
  regular files only, and writes for each a JSON header line and then its bytes, at most
  `budget` bytes in all. A path that is missing, a symlink or not a regular file is left out,
  as SandboxFusion leaves out a path that is not a file.
- `JUPYTER`: runs `cells` (JSON on stdin) in order in its own interpreter, each cell's output
  captured, its last expression's value displayed as `{"text/plain": repr(value)}` (unless
  None), an exception recorded as `{ename, evalue, traceback}` and the next cell run anyway;
  the results go to the original stdout as one JSON line after `MARKER`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

__all__ = [
    "FETCH",
    "JUPYTER",
    "MARKER",
    "FetchedFiles",
    "fetch_argv",
    "jupyter_argv",
    "read_cells",
    "read_fetched",
]

FETCH = r"""
import json, os, stat, sys
budget = int(sys.argv[1])
out = sys.stdout.buffer
for path in sys.argv[2:]:
    parts = path.split("/")
    fd = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
    data = None
    try:
        for part in parts[:-1]:
            nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = nxt
        nxt = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fd)
        os.close(fd)
        fd = nxt
        if stat.S_ISREG(os.fstat(fd).st_mode):
            chunks, size = [], 0
            while size <= budget:
                chunk = os.read(fd, min(1 << 20, budget + 1 - size))
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
            data = b"".join(chunks)
    except OSError:
        data = None
    finally:
        os.close(fd)
    if data is None:
        continue
    if len(data) > budget:
        out.write(json.dumps({"path": path, "over": True}).encode() + b"\n")
        break
    budget -= len(data)
    out.write(json.dumps({"path": path, "size": len(data)}).encode() + b"\n" + data)
out.flush()
"""

MARKER = "\x00proctor-jupyter-cells\x00"

JUPYTER = r"""
import ast, io, json, os, sys, traceback
from contextlib import redirect_stderr, redirect_stdout
cells = json.loads(sys.stdin.read())
results_fd = os.dup(1)
null = os.open(os.devnull, os.O_WRONLY)
os.dup2(null, 1)  # what a cell writes to fd 1 itself goes where a kernel's does: nowhere shown
scope = {"__name__": "__main__", "__builtins__": __builtins__}
results = []
for source in cells:
    out, err = io.StringIO(), io.StringIO()
    cell = {"stdout": "", "stderr": "", "display": [], "error": []}
    try:
        with redirect_stdout(out), redirect_stderr(err):
            try:
                tree = ast.parse(source, "<cell>", "exec")
                last = None
                if tree.body and isinstance(tree.body[-1], ast.Expr):
                    last = ast.Expression(tree.body.pop().value)
                exec(compile(tree, "<cell>", "exec"), scope)
                if last is not None:
                    value = eval(compile(last, "<cell>", "eval"), scope)
                    if value is not None:
                        cell["display"].append({"text/plain": repr(value)})
            except BaseException as exc:  # SystemExit too, as a kernel does
                # from the cell's own frame on (a syntax error has none)
                tb = None if isinstance(exc, SyntaxError) else exc.__traceback__.tb_next
                cell["error"].append({
                    "ename": type(exc).__name__,
                    "evalue": str(exc),
                    "traceback": traceback.format_exception(type(exc), exc, tb),
                })
    finally:
        cell["stdout"], cell["stderr"] = out.getvalue(), err.getvalue()
    results.append(cell)
line = MARKER + json.dumps(results) + "\n"
os.write(results_fd, line.encode())
""".replace("MARKER", repr(MARKER), 1)


def fetch_argv(budget: int, paths: list[str]) -> tuple[str, ...]:
    return ("python3", "-I", "-S", "-c", FETCH, str(budget), *paths)


def jupyter_argv() -> tuple[str, ...]:
    return ("python3", "-I", "-S", "-c", JUPYTER)


@dataclass(frozen=True, slots=True)
class FetchedFiles:
    files: dict[str, bytes]
    over_budget: bool
    """A file did not fit in what was left of the output limit: it and the rest are missing."""


def read_fetched(stdout: bytes) -> FetchedFiles | None:
    """`FETCH`'s output, or None where it is not what `FETCH` writes (the program interfered)."""
    files: dict[str, bytes] = {}
    at = 0
    while at < len(stdout):
        end = stdout.find(b"\n", at)
        if end < 0:
            return None
        try:
            header = json.loads(stdout[at:end])
        except ValueError:
            return None
        if not isinstance(header, dict) or not isinstance(header.get("path"), str):
            return None
        if header.get("over") is True:
            return FetchedFiles(files, over_budget=True)
        size = header.get("size")
        if not isinstance(size, int) or size < 0 or end + 1 + size > len(stdout):
            return None
        files[header["path"]] = stdout[end + 1 : end + 1 + size]
        at = end + 1 + size
    return FetchedFiles(files, over_budget=False)


def read_cells(stdout: bytes) -> list[dict[str, Any]] | None:
    """`JUPYTER`'s cell results, or None where the driver wrote none (it was killed, or a cell
    ended the process)."""
    marker = MARKER.encode()
    at = stdout.rfind(marker)
    if at < 0:
        return None
    try:
        cells = json.loads(stdout[at + len(marker) :].decode("utf-8", "replace"))
    except ValueError:
        return None
    if not isinstance(cells, list) or not all(isinstance(c, dict) for c in cells):
        return None
    return [
        {
            "stdout": str(c.get("stdout", "")),
            "stderr": str(c.get("stderr", "")),
            "display": [d for d in c.get("display", []) if isinstance(d, dict)],
            "error": [e for e in c.get("error", []) if isinstance(e, dict)],
        }
        for c in cells
    ]
