"""The supervisor's calls into the kernel that Python has no wrapper for: prctl and seccomp."""

from __future__ import annotations

import ctypes
import os

PR_SET_NO_NEW_PRIVS = 38
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
_libc = ctypes.CDLL(None, use_errno=True)
_libc_prctl = _libc.prctl
"""Resolved once: each `_libc.prctl` lookup in a forked child writes to `CDLL.__getattr__`, which
the attribute hook holds a reference to while it looks."""


def prctl(option: int, value: int) -> None:
    if _libc_prctl(option, value, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl({option}) failed: {os.strerror(err)}")


_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]


def install_filter(code: bytes) -> None:
    """Install the seccomp filter `code` (classic BPF, see `seccomp.seccomp_program`) on this
    supervisor, inherited by every run, refusing the kernel surface Docker's default profile
    refuses a process without capabilities and no solution needs: new namespaces, io_uring,
    mounts, keyrings, bpf, perf, userfaultfd, the machine's administration, AF_VSOCK and other
    ABIs (sandboxes/README.md lists them all and why). The same on every backend: on docker it
    stacks on the engine's own profile, whatever its version, and where both refuse a call the
    errno a program sees is this filter's. Needs no-new-privileges (or CAP_SYS_ADMIN)."""
    fprog = _SockFprog(len(code) // 8, code)
    if _libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"seccomp filter refused: {os.strerror(err)}")
