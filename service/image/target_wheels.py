"""Complete a directory of wheels resolved on this host for the image's own interpreter.

`pip wheel` evaluates environment markers for the Python running it; the image's Debian Python
may be an older patch release, for which a dependency asks for more (redis-py wants
async-timeout below 3.11.3). This adds, with `pip download --no-deps`, every requirement whose
marker holds for the target version and that no wheel in the directory provides, until none is
missing.

Usage: python3 target_wheels.py WHEEL_DIR TARGET_PYTHON_VERSION   (e.g. 3.11.2)
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename


def _requirements(wheel: Path) -> list[Requirement]:
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = Parser().parsestr(archive.read(name).decode())
    return [Requirement(line) for line in metadata.get_all("Requires-Dist") or []]


def missing(wheel_dir: Path, version: str) -> set[str]:
    """Requirements the target needs that no wheel in `wheel_dir` provides."""
    environment = {
        **default_environment(),
        "python_full_version": version,
        "python_version": ".".join(version.split(".")[:2]),
        "extra": "",
    }
    wheels = list(wheel_dir.glob("*.whl"))
    have = {canonicalize_name(parse_wheel_filename(w.name)[0]) for w in wheels}
    wanted = set()
    for wheel in wheels:
        for requirement in _requirements(wheel):
            marker = requirement.marker
            if marker is not None and not marker.evaluate(environment):  # type: ignore[arg-type]
                continue
            if canonicalize_name(requirement.name) not in have:
                wanted.add(f"{requirement.name}{requirement.specifier}")
    return wanted


def main(wheel_dir: str, version: str) -> int:
    directory = Path(wheel_dir)
    for _ in range(10):
        wanted = missing(directory, version)
        if not wanted:
            return 0
        print(f"target_wheels: adding {sorted(wanted)} for Python {version}", file=sys.stderr)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--disable-pip-version-check",
                "--no-deps",
                "--only-binary=:all:",
                "-d",
                str(directory),
                *sorted(wanted),
            ],
            check=True,
        )
    print("target_wheels: still missing after 10 rounds", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
