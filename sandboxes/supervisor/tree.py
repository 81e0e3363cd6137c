"""The run's process tree: its processes' CPU time and memory, and killing and reaping them all."""

from __future__ import annotations

import os
import resource
import signal
import time

_CLK_TCK = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


def child_pids(pid: int) -> list[int]:
    """Direct children of `pid` (all its threads), from /proc/<pid>/task/*/children."""
    found: list[int] = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                found.extend(int(p) for p in f.read().split())
        except OSError:
            continue
    return found


def descendant_pids(root: int) -> list[int]:
    seen = []
    stack = child_pids(root)
    while stack:
        pid = stack.pop()
        seen.append(pid)
        stack.extend(child_pids(pid))
    return seen


def live_usage(pids: list[int]) -> tuple[float, int]:
    """CPU seconds (utime + stime, plus that of their reaped children) and resident bytes, summed
    over live processes."""
    ticks = 0
    pages = 0
    for pid in pids:
        # os.open and one read, not open(): a buffered file costs five more system calls, and
        # the line is generated whole (far shorter than the read's size).
        try:
            fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            stat = os.read(fd, 4096)
        except OSError:
            continue
        finally:
            os.close(fd)
        if not stat:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        # fields[0] is field 3 (state): utime=14, stime=15, cutime=16, cstime=17, rss=24
        ticks += int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])
        pages += int(fields[21])
    return ticks / _CLK_TCK, pages * _PAGE


def rusage_cpu(ru: resource.struct_rusage) -> float:
    return ru.ru_utime + ru.ru_stime


class Reaper:
    """Kills and reaps every descendant of the supervisor, summing their CPU time, but one: the
    template (`spared`), a child of ours that is never the run's and never killed here. Should a
    program kill it, reaping it sets `spared_exited` (its CPU time is not the run's)."""

    def __init__(self, use_kill_all: bool) -> None:
        self.use_kill_all = use_kill_all
        self.me = os.getpid()
        self.spared = 0
        self.spared_exited = False

    def _direct(self) -> list[int]:
        """Our children (zombies too), the template left out."""
        spared = self.spared
        return [pid for pid in child_pids(self.me) if pid != spared]

    def run_processes(self) -> list[int]:
        """The run's live (or not yet reaped) processes. As our PID namespace's init, every
        process in it but us and the template, from one listing of /proc: a walk of the process
        tree costs two reads per process, which adds up when a fork bomb leaves us a sliver of
        the CPU."""
        if self.use_kill_all:
            mine = (str(self.me), str(self.spared))
            return [int(p) for p in os.listdir("/proc") if p.isdigit() and p not in mine]
        direct = self._direct()
        return direct + [p for c in direct for p in descendant_pids(c)]

    def _reaped(
        self, pid: int, status: int, ru: resource.struct_rusage, statuses: dict[int, int]
    ) -> float:
        """Record a reaped process; returns its CPU seconds (the template's are not the run's)."""
        if pid == self.spared:
            self.spared_exited = True
            return 0.0
        statuses[pid] = status
        return rusage_cpu(ru)

    def reap_ready(self, statuses: dict[int, int]) -> float:
        """Reap whatever has exited; returns the CPU seconds of the reaped processes."""
        cpu = 0.0
        while True:
            try:
                pid, status, ru = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                return cpu
            if pid == 0:
                return cpu
            cpu += self._reaped(pid, status, ru, statuses)

    def kill_all(self, statuses: dict[int, int]) -> tuple[float, set[int]]:
        """SIGKILL every process of the run until none is left; returns (CPU seconds, pids
        killed). Each round kills every process it lists, so even a fork bomb runs out."""
        cpu = 0.0
        killed: set[int] = set()
        # The usual end of a step: no child is left but the template, so no process of the run
        # is (every orphan of the run is reparented to us), and there is nothing to kill.
        if not self._direct():
            return cpu + self.reap_ready(statuses), killed
        deadline = time.monotonic() + 30.0
        while time.monotonic() < deadline:
            targets = self.run_processes()
            if not targets:
                return cpu + self.reap_ready(statuses), killed
            for pid in targets:
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed.add(pid)
                except ProcessLookupError:
                    continue
            if self._direct():
                # Every direct child was just sent SIGKILL (or is a zombie), so this returns soon.
                try:
                    pid, status, ru = os.wait4(-1, 0)
                except ChildProcessError:
                    return cpu, killed
                cpu += self._reaped(pid, status, ru, statuses)
            cpu += self.reap_ready(statuses)
        raise RuntimeError("could not kill the run's processes within 30 s")
