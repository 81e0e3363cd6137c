"""The code environment's content digest: what an answer can see, probed inside the sandbox.

`probe_environment(backend)` runs one trusted program in the backend's sandbox that reports the
interpreter's version, every distribution its `importlib.metadata` finds (name and version:
the packages an answer can import, Debian's and pip's alike) and the version line of each
toolchain of `reward_specs.code.languages`. `environment_digest` hashes that report, so two
sandboxes that run the same interpreter, packages and compilers get the same digest (`local`
and `docker` included, whatever the image's id), and any difference, a package more or a
compiler's patch release, gives another. `load_specs(..., environments={"code": digest})` puts
it in the code domain's part of every spec hash (`Spec.domain_hashes`).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from reward_specs.canonical import canonical_text
from reward_specs.code.languages import LANGUAGES, RESERVE_BYTES, THREAD_STACK_BYTES
from sandboxes.api import Execution, Limits, RunRequest, SandboxBackend, SandboxError

__all__ = ["environment_digest", "probe_environment"]

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
print(json.dumps({"python": sys.version, "packages": sorted(packages.items()), "tools": tools}))
"""

_MEMORY = 512 * 1024 * 1024


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
    """A content digest of a probe's report."""
    return "sha256:" + hashlib.sha256(canonical_text(report).encode()).hexdigest()
