"""The fair queue: round-robin across tenants, then across a tenant's requests, in order within a
request; work to redo goes first in its request; a finished request leaves nothing behind."""

from __future__ import annotations

from service.dispatch.fair import FairQueue


def _drain(queue: FairQueue[str]) -> list[str]:
    out = []
    while (unit := queue.pop()) is not None:
        out.append(unit)
    return out


def test_tenants_then_requests_take_turns() -> None:
    queue: FairQueue[str] = FairQueue()
    for n in range(4):
        queue.push("a", "a1", f"a1-{n}")  # A's large request came first
    queue.push("a", "a2", "a2-0")
    queue.push("b", "b1", "b1-0")
    assert len(queue) == 6
    assert _drain(queue) == ["a1-0", "b1-0", "a2-0", "a1-1", "a1-2", "a1-3"]
    assert len(queue) == 0


def test_a_newcomer_is_next_but_one() -> None:
    queue: FairQueue[str] = FairQueue()
    for n in range(1000):
        queue.push("a", "big", f"big-{n}")
    assert queue.pop() == "big-0"
    queue.push("b", "small", "small-0")
    assert [queue.pop(), queue.pop()] == ["big-1", "small-0"]


def test_redo_goes_first_and_discard_forgets() -> None:
    queue: FairQueue[str] = FairQueue()
    queue.push("a", "r", "r-1")
    queue.push("a", "r", "r-0", front=True)
    queue.push("b", "s", "s-0")
    assert queue.discard("s") == ["s-0"]
    assert queue.discard("s") == []
    assert _drain(queue) == ["r-0", "r-1"]
