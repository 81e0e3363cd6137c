"""The outcome ledger of one batch: one slot per item, filled once, first outcome wins.

Every backend resolves batches through it, so they all keep the same contract: exactly one
`Outcome` per item; a duplicate (a chunk that finished twice) is dropped; an item that costs a
worker twice is judged 0 as `poison`; whatever is still missing when the batch must answer (its
deadline, a shutdown, workers that cannot start) is `infra_error` with the reason.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from reward_specs import Outcome

__all__ = ["MAX_STRIKES", "POISON_MESSAGE", "OutcomeLedger"]

log = logging.getLogger(__name__)

MAX_STRIKES = 2
"""Workers an item may cost before it is judged 0 as a poison item."""
POISON_MESSAGE = "scoring this item killed a worker twice"


class OutcomeLedger:
    def __init__(
        self,
        n: int,
        on_done: Callable[[int], None] | None = None,
        log_extra: dict[str, Any] | None = None,
    ) -> None:
        self.results: list[Outcome | None] = [None] * n
        self.remaining = n
        self.on_done = on_done
        self.strikes: dict[int, int] = {}
        self._log_extra = log_extra

    @property
    def complete(self) -> bool:
        return self.remaining == 0

    def has(self, position: int) -> bool:
        return self.results[position] is not None

    def missing(self) -> list[int]:
        return [p for p, outcome in enumerate(self.results) if outcome is None]

    def record(self, position: int, outcome: Outcome) -> bool:
        """`outcome` for `position` unless it has one already (then False: a duplicate)."""
        if self.results[position] is not None:
            return False
        self.results[position] = outcome
        self.remaining -= 1
        if self.on_done is not None:
            try:
                self.on_done(position)
            except Exception:  # a progress report is never worth a batch
                log.exception("a batch's progress callback failed", extra=self._log_extra)
        return True

    def strike(self, position: int) -> bool:
        """`position` was being scored when its worker was lost. True if that made it a poison
        item (it is then judged 0); False if it should be tried again."""
        if self.results[position] is not None:
            return False
        strikes = self.strikes.get(position, 0) + 1
        self.strikes[position] = strikes
        if strikes < MAX_STRIKES:
            return False
        self.record(position, Outcome.judged_zero("poison", message=POISON_MESSAGE))
        return True

    def fill_missing(self, code: str, message: str) -> None:
        """Every item without an outcome is `infra_error` with `code`."""
        for position in self.missing():
            self.record(position, Outcome.failure("infra_error", code, message))

    def outcomes(self) -> list[Outcome]:
        """All outcomes, in order (the batch must be complete)."""
        if self.remaining:
            raise RuntimeError(f"{self.remaining} items have no outcome yet")
        return [outcome for outcome in self.results if outcome is not None]
