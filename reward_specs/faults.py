"""Whose fault a verifier library's exception is: ours, or the response's.

A response can make math-verify, latex2sympy or sympy raise almost anything (an unparsable
expression, a comparison sympy refuses), and that is a judged 0. But the same `except` would turn
a broken install (a missing grammar, an incompatible sympy) into a 0 for every answer, a silent
bias nobody would see. So an exception is ours when its type says so (ImportError, NameError), or
when a canary, a known-good check through the very same functions, fails too; then it is
re-raised and the engine reports `infra_error`. The canary runs once per set of functions in a
process, on the first exception.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable

__all__ = ["ours"]

log = logging.getLogger(__name__)

_ALWAYS_OURS = (ImportError, NameError)
_healthy: dict[Hashable, bool] = {}


def ours(exc: BaseException, canary: Callable[[], bool], key: Hashable) -> bool:
    """True if `exc`, raised by a verifier, means the verifier itself is broken. `canary` checks
    a pair the verifier must accept; `key` names the functions it goes through (so a verifier
    swapped at run time, as tests do, gets its own canary)."""
    if isinstance(exc, _ALWAYS_OURS):
        return True
    healthy = _healthy.get(key)
    if healthy is None:
        try:
            healthy = bool(canary())
        except Exception:  # the canary failing is the verdict: the verifier is broken
            log.exception("the verifier fails its known-good check")
            healthy = False
        if len(_healthy) > 64:  # only tests make more than a few keys
            _healthy.clear()
        _healthy[key] = healthy
    return not healthy
