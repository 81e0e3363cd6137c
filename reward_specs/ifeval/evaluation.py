"""Strict and loose evaluation, as IFEval's evaluation library defines them.

Strict: an instruction is followed when the response is not blank and its check passes on the
response as given. Loose: it is followed when the check passes on any non-blank one of eight
variants: the response, the response without its first line, without its last line, without both
(each of these three stripped), and each of those four with every "*" removed. Loose is therefore
never below strict (the first variant is the response itself).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from reward_specs.ifeval.instructions import Check

__all__ = ["Verdict", "evaluate", "loose_variants"]


@dataclass(frozen=True, slots=True)
class Verdict:
    strict: bool
    loose: bool


def loose_variants(response: str) -> list[str]:
    """The reference's eight variants, in its order, blank ones and repeats left out."""
    lines = response.split("\n")
    without_first = "\n".join(lines[1:]).strip()
    without_last = "\n".join(lines[:-1]).strip()
    without_both = "\n".join(lines[1:-1]).strip()
    variants = [response, without_first, without_last, without_both]
    candidates = [*variants, *(v.replace("*", "") for v in variants)]
    # The reference's order is: response, response without "*", then the cut variants, then
    # the cut variants without "*"; order only decides which variant is tried first, and the
    # verdict is "any of them", so the set is all that matters.
    seen: set[str] = set()
    kept = []
    for candidate in candidates:
        if candidate.strip() and candidate not in seen:
            seen.add(candidate)
            kept.append(candidate)
    return kept


def evaluate(response: str, checks: Sequence[Check]) -> list[Verdict]:
    """Each instruction's strict and loose verdict on `response`."""
    blank = not response.strip()
    variants: list[str] | None = None
    verdicts = []
    for check in checks:
        strict = not blank and check(response)
        loose = strict
        if not strict:
            if variants is None:
                variants = loose_variants(response)
            loose = any(check(v) for v in variants if v != response)
        verdicts.append(Verdict(strict=strict, loose=loose))
    return verdicts
