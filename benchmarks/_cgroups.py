"""CPU cgroups for the benchmarks: a group per process tree, with an optional CPU quota, its CPU
time read from the kernel's accounting, removed again on exit.

Works with cgroup v1 (a `cpu` hierarchy, with `cpuacct` mounted beside it or with it) and with
cgroup v2 (the unified hierarchy's root with the `cpu` controller); needs root. `CpuGroups.open()`
says which one it found, or raises `Unsupported` with the reason.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CpuGroup", "CpuGroups", "Unsupported", "descendants"]

PERIOD_US = 100_000
PREFIX = "proctor-bench-"
SHARES = 4096
"""cgroup v1 `cpu.shares` (v2 `cpu.weight` 400): four times a plain process's, so that other
work on a shared machine does not keep a group from its quota."""


class Unsupported(RuntimeError):
    """No CPU cgroup this process may create."""


@dataclass(frozen=True)
class _Layout:
    version: int
    cpu: Path
    """Where the groups with a quota are made (v1 `cpu`, v2 the unified root)."""
    acct: Path
    """Where their CPU time is read (v1 `cpuacct`, the same as `cpu` when co-mounted; v2 `cpu`)."""


def _mounts() -> Iterator[tuple[str, str, set[str]]]:
    """(mount point, file system type, super options) of every mount."""
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, right = line.split(" - ", 1)
            fstype, _source, options = right.split()[:3]
            yield left.split()[4], fstype, set(options.split(","))


def _layout() -> _Layout:
    cpu = acct = unified = None
    for point, fstype, options in _mounts():
        if fstype == "cgroup" and "cpu" in options:
            cpu = Path(point)
        if fstype == "cgroup" and "cpuacct" in options:
            acct = Path(point)
        if fstype == "cgroup2":
            unified = Path(point)
    if cpu is not None and acct is not None:
        return _Layout(1, cpu, acct)
    if unified is not None:
        controllers = (unified / "cgroup.controllers").read_text().split()
        if "cpu" in controllers:
            return _Layout(2, unified, unified)
        raise Unsupported(f"the cgroup v2 hierarchy at {unified} has no cpu controller")
    raise Unsupported("no cgroup v1 cpu and cpuacct hierarchies and no cgroup v2 mount")


class CpuGroup:
    """One group (a directory in each hierarchy it needs)."""

    def __init__(self, layout: _Layout, name: str, cores: float | None) -> None:
        self.name = name
        self.cores = cores
        self._layout = layout
        self._dirs = list(dict.fromkeys([layout.cpu / name, layout.acct / name]))
        for directory in self._dirs:
            directory.mkdir()
        self.set_quota(cores)
        if layout.version == 1:
            (layout.cpu / name / "cpu.shares").write_text(str(SHARES))
        else:
            (layout.cpu / name / "cpu.weight").write_text(str(SHARES * 100 // 1024))

    def set_quota(self, cores: float | None) -> None:
        """Limit the group to `cores` of CPU per period (`None`: no limit)."""
        self.cores = cores
        quota = None if cores is None else max(1000, round(cores * PERIOD_US))
        cpu = self._layout.cpu / self.name
        if self._layout.version == 1:
            (cpu / "cpu.cfs_period_us").write_text(str(PERIOD_US))
            (cpu / "cpu.cfs_quota_us").write_text(str(-1 if quota is None else quota))
        else:
            (cpu / "cpu.max").write_text(f"{'max' if quota is None else quota} {PERIOD_US}")

    @property
    def procs_files(self) -> list[str]:
        """The `cgroup.procs` files a process is written to, to join the group."""
        return [str(d / "cgroup.procs") for d in self._dirs]

    def join(self, pid: int) -> None:
        """Move `pid` (its children from then on follow it) into the group."""
        for path in self.procs_files:
            with open(path, "w") as f:
                f.write(str(pid))

    def join_self(self) -> None:
        """Move the calling process in: for `subprocess.Popen(preexec_fn=...)`, before exec, so
        that everything the program starts is in the group from its first instruction."""
        for path in self.procs_files:
            fd = os.open(path, os.O_WRONLY)
            try:
                os.write(fd, b"0")
            finally:
                os.close(fd)

    def cpu_s(self) -> float:
        """CPU seconds the group's processes have used, the exited ones included."""
        if self._layout.version == 1:
            return int((self._layout.acct / self.name / "cpuacct.usage").read_text()) / 1e9
        return self._stat()["usage_usec"] / 1e6

    def throttled(self) -> tuple[int, int]:
        """(periods the group ran in, periods it was held back in by its quota)."""
        stat = self._stat()
        return stat.get("nr_periods", 0), stat.get("nr_throttled", 0)

    def _stat(self) -> dict[str, int]:
        text = (self._layout.cpu / self.name / "cpu.stat").read_text()
        return {k: int(v) for k, v in (line.split() for line in text.splitlines() if line)}

    def remove(self) -> None:
        """Move whatever is left to the root group, then remove the directories."""
        for directory in self._dirs:
            root = directory.parent / "cgroup.procs"
            for pid in (directory / "cgroup.procs").read_text().split():
                with contextlib.suppress(ProcessLookupError):  # exited meanwhile
                    root.write_text(pid)
            directory.rmdir()


class CpuGroups:
    """The groups of one benchmark run, named after its pid; all removed when the run ends."""

    def __init__(self, layout: _Layout) -> None:
        self.version = layout.version
        self._layout = layout
        self._groups: list[CpuGroup] = []

    @classmethod
    @contextmanager
    def open(cls) -> Iterator[CpuGroups]:
        if os.geteuid() != 0:
            raise Unsupported("creating cgroups needs root")
        layout = _layout()
        if layout.version == 2:
            try:
                (layout.cpu / "cgroup.subtree_control").write_text("+cpu")
            except OSError as e:
                raise Unsupported(f"cannot enable the v2 cpu controller: {e}") from e
        _remove_stale(layout)
        groups = cls(layout)
        try:
            yield groups
        finally:
            for group in reversed(groups._groups):
                group.remove()

    def make(self, name: str, cores: float | None = None) -> CpuGroup:
        try:
            group = CpuGroup(self._layout, f"{PREFIX}{os.getpid()}-{name}", cores)
        except OSError as e:
            raise Unsupported(f"cannot create a cgroup: {e}") from e
        self._groups.append(group)
        return group


def _remove_stale(layout: _Layout) -> None:
    """Groups left by a benchmark run that was killed (its pid gone), if nothing is in them."""
    for root in dict.fromkeys([layout.cpu, layout.acct]):
        for directory in root.glob(f"{PREFIX}*"):
            match = re.match(rf"{PREFIX}(\d+)-", directory.name)
            gone = match is not None and not Path(f"/proc/{match[1]}").exists()
            if gone and not (directory / "cgroup.procs").read_text().split():
                directory.rmdir()


def descendants(roots: Iterable[int]) -> set[int]:
    """Every live process below `roots` (not the roots themselves), from `/proc`."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(entry))
    found: set[int] = set()
    stack = list(roots)
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in found:
                found.add(child)
                stack.append(child)
    return found
