"""The list of shipped scorers. Adding a domain means adding its module and one line here."""

from __future__ import annotations

from typing import Any

from reward_specs import code_domain, ifeval_domain, math_domain, puzzle_domain, stem_domain
from reward_specs.registry import Registry
from reward_specs.scorer import Scorer

SCORERS: tuple[Scorer[Any, Any], ...] = (
    math_domain.SCORER,
    stem_domain.SCORER,
    ifeval_domain.SCORER,
    puzzle_domain.SCORER,
    code_domain.SCORER,
)


def default_registry() -> Registry:
    """Every domain Proctor ships, registered in one visible place."""
    return Registry(SCORERS)
