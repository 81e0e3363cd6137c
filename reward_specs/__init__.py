"""Proctor's reward semantics: one scorer per domain, versioned specs, and the scoring engine.

Importable with no server running; the service and `proctor score` both call `score_item`.
"""

from typing import TYPE_CHECKING, Any

from reward_specs import scorer
from reward_specs.canonical import canonical_json
from reward_specs.engine import (
    Item,
    ItemFields,
    ItemKey,
    Outcome,
    Status,
    item_keyer,
    reference_key,
    score_item,
    strip_reasoning,
)
from reward_specs.registry import Registry, UnknownDomain
from reward_specs.scorer import *  # noqa: F403  (the domain-author API: scorer.__all__)
from reward_specs.spec import BUILTIN_SPEC_DIR, Spec, SpecError, load_spec_file, load_specs

if TYPE_CHECKING:
    from reward_specs.domains import SCORERS, default_registry

__all__ = [
    *scorer.__all__,
    "BUILTIN_SPEC_DIR",
    "SCORERS",
    "Item",
    "ItemFields",
    "ItemKey",
    "Outcome",
    "Registry",
    "Spec",
    "SpecError",
    "Status",
    "UnknownDomain",
    "canonical_json",
    "default_registry",
    "item_keyer",
    "load_spec_file",
    "load_specs",
    "reference_key",
    "score_item",
    "strip_reasoning",
]


def __getattr__(name: str) -> Any:
    """`SCORERS` and `default_registry`, from `reward_specs.domains` at first use: importing
    every domain (their verifier libraries) would otherwise come with any module of this
    package, `proctor serve`'s settings among them, before the fork server can start."""
    if name in ("SCORERS", "default_registry"):
        from reward_specs import domains

        return getattr(domains, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
