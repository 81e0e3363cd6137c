"""A batch's distinct items: the one place a caller's items become the engine's `Item`s.

Items that score identically under a spec (`item_keyer`: same domain, scored text, length
fields and reference) are scored once, and equal references become one object with one key, so a
GRPO group of 16 samples of one prompt carries its reference once (the worker pool sends it once
per chunk: pickle shares repeated objects). The service's scoring path and the client's
in-process scorer both build their items here.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from reward_specs.engine import Item, ItemFields, ItemKey, Outcome, item_keyer, reference_key
from reward_specs.registry import Registry
from reward_specs.spec import Spec

__all__ = ["UniqueItems"]


class UniqueItems:
    """The distinct items of a batch scored under `spec` (with `registry`, items are also shared
    by their scorers' answer keys: see `item_keyer`), each with the positions it stands for."""

    def __init__(self, spec: Spec, registry: Registry | None = None) -> None:
        self._key_of = item_keyer(spec, registry)
        self._positions: dict[ItemKey, list[int]] = {}
        self._references: dict[bytes, tuple[Mapping[str, Any], str]] = {}
        self.items: list[Item] = []
        """One engine item per distinct item, in the order first seen."""

    def add(
        self,
        position: int,
        item: ItemFields,
        reference: Mapping[str, Any],
        reference_json: bytes,
    ) -> None:
        """The item at `position`, whose reference is `reference`, of canonical JSON
        `reference_json` (`canonical_json`): the one canonical form every key is made from."""
        key = self._key_of(item, reference_json)
        positions = self._positions.get(key)
        if positions is not None:
            positions.append(position)
            return
        shared = self._references.get(reference_json)
        if shared is None:
            shared = self._references[reference_json] = (reference, reference_key(reference_json))
        self._positions[key] = [position]
        self.items.append(
            Item(
                domain=item.domain,
                response=item.response,
                reference=shared[0],
                reference_key=shared[1],
                finish_reason=item.finish_reason,
                response_tokens=item.response_tokens,
                max_response_tokens=item.max_response_tokens,
            )
        )

    @property
    def sizes(self) -> list[int]:
        """How many positions each distinct item stands for, in the order of `items`."""
        return [len(p) for p in self._positions.values()]

    def shared(self) -> int:
        """Positions added beyond the first of their item: scored with it, never on their own."""
        return sum(self.sizes) - len(self.items)

    def spread(self, outcomes: Sequence[Outcome]) -> Iterator[tuple[int, Outcome]]:
        """(position, outcome) for every position added, given the outcomes of `items`."""
        for positions, outcome in zip(self._positions.values(), outcomes, strict=True):
            for position in positions:
                yield position, outcome
