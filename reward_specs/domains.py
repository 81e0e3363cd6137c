"""The list of shipped scorers. Adding a domain means adding its package and one line here."""

from __future__ import annotations

from typing import Any

from reward_specs import code, ifeval, math, puzzles, stem
from reward_specs.judge import domain as judge
from reward_specs.registry import Registry
from reward_specs.scorer import Scorer

SCORERS: tuple[Scorer[Any, Any], ...] = (
    math.SCORER,
    stem.SCORER,
    ifeval.SCORER,
    puzzles.SCORER,
    code.SCORER,
    judge.SCORER,
)


def default_registry() -> Registry:
    """Every domain Proctor ships, registered in one visible place."""
    return Registry(SCORERS)
