"""Group-level recipe steps: dynamic sampling on the raw score, and group-relative advantages.

Plain Python over the numbers of one group (the G scored responses to one prompt), so that each
rule reads as written and is tested against hand-computed values.

Dynamic sampling keeps or drops a group as a whole, judged on the raw task `score` (not the shaped
`reward`): a group whose scores are all equal carries no relative signal about the task, even when
termination penalties make its rewards differ. Responses Proctor could not judge (`infra_error`,
`invalid`) are left out before either rule is applied: they are neither zeros nor ones.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["GroupCounts", "StdKind", "group_advantages", "is_informative"]

StdKind = Literal["population", "bessel"]
"""How a group's spread is measured: divide by G (the review's eq. 3) or by G - 1."""

_ZERO_STD = 1e-8
"""A spread below this is no spread: such a group's advantages are all 0."""


def is_informative(scores: Sequence[float]) -> bool:
    """Whether a group's raw scores (of its judged responses only) are not all equal.

    A group with fewer than two judged responses has nothing to compare and is not informative.
    """
    return len(scores) >= 2 and max(scores) - min(scores) > _ZERO_STD


def group_advantages(rewards: Sequence[float], std: StdKind = "population") -> list[float]:
    """(R_i - mean) / std over one group's shaped rewards; all 0 when the spread is 0."""
    n = len(rewards)
    if n == 0:
        return []
    mean = sum(rewards) / n
    squares = sum((r - mean) ** 2 for r in rewards)
    divisor = n if std == "population" else n - 1
    spread = math.sqrt(squares / divisor) if divisor > 0 else 0.0
    if spread < _ZERO_STD:
        return [0.0] * n
    return [(r - mean) / spread for r in rewards]


_METRICS = {
    "groups_accepted": "accepted_groups",
    "groups_rejected": "rejected_groups",
    "groups_surplus": "surplus_groups",
    "tokens_accepted": "accepted_tokens",
    "tokens_rejected": "rejected_tokens",
    "tokens_surplus": "surplus_tokens",
}
"""metrics.jsonl's name of each count that `GroupCounts.metrics` writes."""
_ADDED = (*_METRICS.values(), "unjudged_responses")
"""The counts `GroupCounts.merge` adds up."""


@dataclass
class GroupCounts:
    """Accepted and rejected work of one rollout step (the review's Algorithm 1, step 8)."""

    accepted_groups: int = 0
    rejected_groups: int = 0
    accepted_tokens: int = 0
    rejected_tokens: int = 0
    surplus_groups: int = 0
    """Informative groups beyond a full batch: generated and scored, but not trained on."""
    surplus_tokens: int = 0
    unjudged_responses: int = 0
    """Responses left out because Proctor answered `infra_error` or `invalid`."""
    rounds: int = 0
    """Generation rounds the step needed to fill its batch."""
    by_status: dict[str, int] = field(default_factory=dict)

    def merge(self, other: GroupCounts) -> None:
        """Add another batch's counts to these (its `rounds` and `by_status` excepted)."""
        for name in _ADDED:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def metrics(self) -> dict[str, int]:
        """The step metrics both engines write for these counts (metrics.jsonl's names)."""
        return {metric: getattr(self, name) for metric, name in _METRICS.items()}

    def add(self, accepted: bool, tokens: int) -> None:
        if accepted:
            self.accepted_groups += 1
            self.accepted_tokens += tokens
        else:
            self.rejected_groups += 1
            self.rejected_tokens += tokens
