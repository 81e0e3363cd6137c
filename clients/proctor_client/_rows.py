"""What the integrations share: turning a trainer's per-sample columns into a Proctor item's
domain and reference, and a result into a reward or "no reward"."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from proctor_client._models import ScoreResult

__all__ = ["ReferenceFrom", "as_reference", "pick_reference", "reward_or_none"]

ReferenceFrom = str | Callable[[Mapping[str, Any]], Mapping[str, Any] | None]
"""A column name, or a function of the sample's columns returning its reference."""


def as_reference(value: Any) -> dict[str, Any] | None:
    """A column value as a reference: a mapping as it is, a plain gold answer (a string or a
    number) as `{"answer": value}`."""
    if value is None:
        return None
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, bool):
        raise TypeError(f"a reference cannot be a bool ({value!r})")
    if isinstance(value, int | float):
        return {"answer": str(value)}
    if isinstance(value, str):
        return {"answer": value}
    raise TypeError(f"cannot make a reference of a {type(value).__name__}: {value!r}")


def pick_reference(source: ReferenceFrom, row: Mapping[str, Any]) -> dict[str, Any] | None:
    if callable(source):
        found = source(row)
        return None if found is None else dict(found)
    if source not in row:
        raise KeyError(f"no column {source!r} to take the reference from; columns: {sorted(row)}")
    return as_reference(row[source])


def reward_or_none(result: ScoreResult) -> float | None:
    """The reward of a judged item; None for one that was not judged (`infra_error`) or cannot
    be (`invalid`), so that a trainer leaves it out instead of learning from a fake 0."""
    return result.reward if result.status == "ok" else None
