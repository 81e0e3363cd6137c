"""The code environment's content digest: what an answer can see, probed inside the sandbox.

`probe_environment(backend)` runs one trusted program in the backend's sandbox that reports the
interpreter's version, every distribution its `importlib.metadata` finds (name and version:
the packages an answer can import, Debian's and pip's alike) and the version line of each
toolchain of `reward_specs.code.languages`. `environment_digest` hashes that report, so two
sandboxes that run the same interpreter, packages and compilers get the same digest (`local`
and `docker` included, whatever the image's id), and any difference, a package more or a
compiler's patch release, gives another. `load_specs(..., environments={"code": digest})` puts
it in the code domain's part of every spec hash (`Spec.domain_hashes`).

The report also lists the interpreter's `sys.path`, which the digest leaves out: `stamp` reads
the modification times of those directories as this host sees them (the `local` sandbox shows
the host's /usr) and of the package database, a cheap sign that the environment may have changed
since a probe (a distribution installed or removed, a package upgraded), so that a service knows
when to probe again.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from typing import Any

from reward_specs.canonical import canonical_text
from reward_specs.code.languages import LANGUAGES, RESERVE_BYTES, THREAD_STACK_BYTES
from sandboxes.api import Execution, Limits, RunRequest, SandboxBackend, SandboxError

__all__ = ["PACKAGE_DATABASES", "environment_digest", "probe_environment", "stamp", "stamp_paths"]

_PROBE = """
import importlib.metadata as md, json, subprocess, sys
packages = {}
for dist in md.distributions():
    name = (dist.metadata["Name"] or "").lower().replace("_", "-")
    if name:
        packages[name] = dist.version
tools = {}
for argv in json.loads(sys.argv[1]):
    try:
        done = subprocess.run(argv, capture_output=True, timeout=30)
        text = (done.stdout + done.stderr).decode("utf-8", "replace").strip().splitlines()
        tools[argv[0]] = text[0] if text else ""
    except OSError:
        tools[argv[0]] = None
print(json.dumps({"python": sys.version, "packages": sorted(packages.items()), "tools": tools,
                  "path": [p for p in sys.path if p]}))
"""

_MEMORY = 512 * 1024 * 1024

_UNHASHED = ("path",)
"""What the report says that is not the environment's content: where it lies."""

PACKAGE_DATABASES = ("/var/lib/dpkg/status",)
"""The system package manager's database (Debian's): written by every install, upgrade and
removal, /usr's included."""


def probe_environment(backend: SandboxBackend) -> dict[str, Any]:
    """The sandbox's interpreter, importable distributions and toolchain versions (None for a
    toolchain that is missing). Raises SandboxError when the probe itself fails."""
    tools = [list(t.version_argv) for t in LANGUAGES.values()]
    request = RunRequest(
        files={"probe.py": _PROBE.encode()},
        executions=[Execution(("python3", "-I", "probe.py", json.dumps(tools)))],
        limits=Limits(
            cpu_budget_s=30.0,
            wall_cap_s=120.0,
            memory_bytes=_MEMORY,
            address_space_bytes=_MEMORY + RESERVE_BYTES,
            stack_bytes=THREAD_STACK_BYTES,
        ),
    )
    (result,) = backend.run(request).executions
    if result.status != "ok":
        raise SandboxError(f"the environment probe failed ({result.status}): {result.stderr!r}")
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def environment_digest(report: dict[str, Any]) -> str:
    """A content digest of a probe's report (its `path` left out)."""
    content = {k: v for k, v in report.items() if k not in _UNHASHED}
    return "sha256:" + hashlib.sha256(canonical_text(content).encode()).hexdigest()


def stamp_paths(report: dict[str, Any]) -> tuple[str, ...]:
    """What `stamp` reads for a probe's report: the interpreter's path directories under /usr
    (the host's, as the `local` sandbox sees them) and the package database."""
    usr = [p for p in report.get("path", ()) if os.path.normpath(p).startswith("/usr/")]
    return (*usr, *PACKAGE_DATABASES)


def stamp(paths: Sequence[str]) -> tuple[int | None, ...]:
    """Each path's modification time in nanoseconds (None where it is missing): a directory's
    changes when an entry is added, removed or renamed in it, as installing, upgrading or
    removing a distribution does to its `*.dist-info`."""
    times: list[int | None] = []
    for path in paths:
        try:
            times.append(os.stat(path).st_mtime_ns)
        except OSError:
            times.append(None)
    return tuple(times)
