"""The registry of scorers, filled explicitly (never as a side effect of importing a module)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from reward_specs.scorer import DomainConfig, ReferenceModel, Scorer

__all__ = ["Registry", "UnknownDomain", "load_registry"]


class UnknownDomain(KeyError):
    """No scorer is registered for this domain."""


class Registry:
    """Domain name -> scorer. Duplicates and ill-typed entries are refused at registration."""

    def __init__(self, scorers: Iterable[Scorer[Any, Any]] = ()) -> None:
        self._scorers: dict[str, Scorer[Any, Any]] = {}
        for scorer in scorers:
            self.register(scorer)

    def register(self, scorer: Scorer[Any, Any]) -> None:
        if not isinstance(scorer, Scorer):
            raise TypeError(f"expected a Scorer, got {type(scorer).__name__}")
        if not scorer.domain or not scorer.domain.isidentifier():
            raise ValueError(f"domain name {scorer.domain!r} is not an identifier")
        if scorer.domain in self._scorers:
            raise ValueError(f"a scorer for domain {scorer.domain!r} is already registered")
        if not (
            isinstance(scorer.config_type, type) and issubclass(scorer.config_type, DomainConfig)
        ):
            raise TypeError(f"{scorer.domain}: config_type must subclass DomainConfig")
        if not (
            isinstance(scorer.reference_type, type)
            and issubclass(scorer.reference_type, ReferenceModel)
        ):
            raise TypeError(f"{scorer.domain}: reference_type must subclass ReferenceModel")
        if scorer.executor not in ("process", "thread"):
            raise ValueError(f"{scorer.domain}: unknown executor {scorer.executor!r}")
        self._scorers[scorer.domain] = scorer

    def get(self, domain: str) -> Scorer[Any, Any]:
        try:
            return self._scorers[domain]
        except KeyError:
            raise UnknownDomain(domain) from None

    def __contains__(self, domain: object) -> bool:
        return domain in self._scorers

    def __iter__(self) -> Iterator[Scorer[Any, Any]]:
        return iter(self._scorers.values())

    def domains(self) -> list[str]:
        return list(self._scorers)


def load_registry(path: str) -> Registry:
    """Resolve a `module:function` registry factory (the service's `registry` setting; the
    evaluator's `--registry`): a seam for operators' own scorers."""
    module_name, _, attr = path.partition(":")
    factory: Callable[[], Registry] = getattr(importlib.import_module(module_name), attr)
    registry = factory()
    if not isinstance(registry, Registry):
        raise TypeError(f"{path} returned {type(registry).__name__}, not a Registry")
    return registry
