"""Memory settings for long-lived processes that allocate in bursts: the service's own ones
(`proctor serve`, pool workers), never a program that merely builds the app.

A large batch decodes into hundreds of thousands of containers, and each burst of allocation
starts collections that walk every object alive in the process: sympy's caches, Reasoning Gym's
datasets, the scorers' grammars. Objects that live as long as the process are moved out of the
collector's sight once they are loaded (`gc.freeze`), and young collections run less often.
Cycles are still collected; this changes when, not whether. glibc is asked to keep freed large
blocks for reuse instead of unmapping them, so each request body does not fault in fresh pages;
the process then keeps the memory of its largest burst, up to `_TRIM_BYTES` unused. What each
bought is in benchmarks/HISTORY.md ("Speed tricks").
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import logging
import resource

__all__ = ["limit_address_space", "settle_heap"]

log = logging.getLogger(__name__)

_GEN0_THRESHOLD = 50_000
_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_THRESHOLD = -1, -2, -3  # from glibc's malloc.h
_MMAP_BYTES = 32 << 20  # glibc's largest allowed threshold on 64-bit machines
_TRIM_BYTES = 512 << 20
_TOP_PAD_BYTES = 64 << 20


def settle_heap() -> None:
    """Call once a process has loaded what it keeps for its lifetime."""
    gc.collect()
    gc.freeze()
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(_GEN0_THRESHOLD, gen1, gen2)
    _keep_freed_blocks()


def _keep_freed_blocks() -> None:
    """Ask glibc to reuse freed large blocks rather than unmap them (no-op on other C libraries)."""
    name = ctypes.util.find_library("c")
    if name is None:
        return
    try:
        mallopt = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError):  # not glibc (musl has no mallopt): keep the defaults
        log.debug("no mallopt in %s; the C allocator keeps its defaults", name)
        return
    for option, value in (
        (_M_MMAP_THRESHOLD, _MMAP_BYTES),
        (_M_TRIM_THRESHOLD, _TRIM_BYTES),
        (_M_TOP_PAD, _TOP_PAD_BYTES),
    ):
        if mallopt(option, value) != 1:
            log.debug("mallopt(%d, %d) refused; the C allocator keeps that default", option, value)


def limit_address_space(memory_mb: int) -> None:
    """Cap this process's address space (a worker's, a sampling child's), so that runaway work
    raises MemoryError instead of exhausting the machine; never above an existing hard limit."""
    limit = memory_mb * 1024 * 1024
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
