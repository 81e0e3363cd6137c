"""`reward_specs.caches`: the one cache type (a memo and a decorator), its bound, its `never`
predicate, its thread safety, and the registry that `clear_all()` empties."""

from __future__ import annotations

import ast
import itertools
import threading
from pathlib import Path

import pytest

import reward_specs
from reward_specs import Item, ScoreContext, caches, default_registry, load_specs, score_item
from reward_specs.caches import BytesCache, Cache

_numbers = itertools.count()


def _name() -> str:
    """A name no other cache has: the registry refuses a second cache of the same name."""
    return f"tests.caches.{next(_numbers)}"


def test_a_memo_holds_at_most_its_size_and_evicts_the_oldest() -> None:
    memo: Cache[int, str] = Cache(_name(), 3)
    for key in range(3):
        memo.put(key, str(key))
    assert memo.get(0) == "0"  # a hit does not refresh an entry: 0 is still the oldest
    memo.put(1, "one")  # nor does an update
    memo.put(3, "3")
    assert len(memo) == 3
    assert memo.get(0) is None
    assert [memo.get(k) for k in (1, 2, 3)] == ["one", "2", "3"]


def test_get_takes_a_default_so_that_none_can_be_a_value() -> None:
    memo: Cache[str, int | None] = Cache(_name(), 2)
    memo.put("a", None)
    absent = object()
    assert memo.get("a", absent) is None
    assert memo.get("b", absent) is absent


def test_a_decorated_function_is_cached_by_its_arguments() -> None:
    calls: list[tuple[int, int]] = []
    cache: Cache[object, object] = Cache(_name(), 2)

    @cache
    def add(a: int, b: int = 0) -> int:
        calls.append((a, b))
        return a + b

    assert add(1, 2) == add(1, 2) == 3
    assert add(2, 1) == 3
    assert calls == [(1, 2), (2, 1)]
    assert len(cache) == 2
    add(5)  # a third key: the least recently used, (1, 2), goes
    assert len(cache) == 2
    add(1, 2)
    assert calls == [(1, 2), (2, 1), (5, 0), (1, 2)]
    assert add.__name__ == "add"


def test_a_decorated_function_never_caches_an_exception() -> None:
    calls = []

    @Cache(_name(), 4)
    def fragile(x: int) -> int:
        calls.append(x)
        if len(calls) == 1:
            raise RuntimeError("once")
        return x

    with pytest.raises(RuntimeError):
        fragile(1)
    assert fragile(1) == fragile(1) == 1
    assert calls == [1, 1]


def test_values_the_never_predicate_accepts_are_returned_but_not_stored() -> None:
    memo: Cache[str, str] = Cache(_name(), 8, never=lambda v: v.startswith("timeout"))
    memo.put("a", "timeout: 5 s")
    memo.put("b", "ok")
    assert memo.get("a") is None and memo.get("b") == "ok"
    assert len(memo) == 1

    calls = []
    cache: Cache[object, str] = Cache(_name(), 8, never=lambda v: v == "late")

    @cache
    def judge(answer: str, *, late: bool = False) -> str:
        calls.append(answer)
        return "late" if late else answer

    assert judge("x", late=True) == judge("x", late=True) == "late"
    assert judge("x") == judge("x") == "x"
    assert calls == ["x", "x", "x"]  # each late verdict computed again, the other once
    assert len(cache) == 1


def test_a_decorated_function_keys_keywords_apart_from_positions() -> None:
    cache: Cache[object, object] = Cache(_name(), 8, never=lambda v: False)

    @cache
    def pair(*args: object, **kwargs: object) -> tuple[object, ...]:
        return (args, tuple(kwargs.items()))

    assert pair("k", 1) != pair(k=1)
    assert len(cache) == 2


def test_the_registry_refuses_a_second_cache_of_a_name_and_an_empty_bound() -> None:
    name = _name()
    Cache(name, 1)
    with pytest.raises(ValueError, match="registered already"):
        Cache(name, 1)
    with pytest.raises(ValueError, match="at least one"):
        Cache(_name(), 0)


def test_a_function_s_cache_serves_that_function_alone() -> None:
    cache: Cache[object, int] = Cache(_name(), 4)

    @cache
    def one() -> int:
        return 1

    with pytest.raises(TypeError):
        cache(one)
    with pytest.raises(TypeError):
        cache.put((), 2)


def test_clear_all_empties_every_registered_cache() -> None:
    # Fill the scorers' caches for real (a math, a STEM and a puzzle item), and a memo of ours.
    caches.clear_all()
    registry = default_registry()
    spec = load_specs(registry)["prorl-v1-careful"]
    ctx = ScoreContext()
    items = [
        Item("math", "so \\boxed{\\frac{1}{2}}", {"answer": "0.5"}, reference_key="m"),
        Item("stem", "the answer is 2.0", {"answer": "2"}, reference_key="s"),
        Item(
            "puzzle",
            "<answer>4</answer>",
            {"task": "basic_arithmetic", "config": {}, "seed": 1, "index": 0},
            reference_key="p",
        ),
    ]
    for item in items:
        assert score_item(registry, spec, item, ctx).status == "ok"
    memo: Cache[int, int] = Cache(_name(), 4)
    memo.put(1, 1)
    everything = caches.registered()
    names = {
        "engine.references",
        "math.verdicts",
        "math.gold_facts",
        "puzzles.entries",
        "puzzles.scoring_datasets",
        "puzzles.verdicts",
    }
    assert all(len(everything[name]) > 0 for name in names)
    caches.clear_all()
    assert {name: len(cache) for name, cache in everything.items() if len(cache)} == {}


def test_threads_hammering_one_cache_keep_its_bound_and_its_values() -> None:
    memo: Cache[int, int] = Cache(_name(), 64)
    cache: Cache[object, int] = Cache(_name(), 64, never=lambda v: v % 7 == 0)

    @cache
    def square(x: int) -> int:
        return x * x

    wrong: list[str] = []
    start = threading.Barrier(8)

    def hammer(seed: int) -> None:
        start.wait()
        for i in range(4000):
            key = (seed * 7919 + i * 31) % 200
            value = memo.get(key)
            if value is not None and value != key * 3:
                wrong.append(f"memo[{key}] = {value}")
            memo.put(key, key * 3)
            if square(key) != key * key:
                wrong.append(f"square({key})")
            if len(memo) > 64 or len(cache) > 64:
                wrong.append("over the bound")

    threads = [threading.Thread(target=hammer, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wrong == []
    assert len(memo) == 64 and 0 < len(cache) <= 64


_OTHER_CACHES = {"lru_cache", "cache", "OrderedDict"}


def test_reward_specs_caches_only_through_caches_py() -> None:
    """One way to cache: no functools caches nor hand-made LRUs anywhere else in reward_specs."""
    root = Path(reward_specs.__file__).parent
    found = []
    for path in sorted(root.rglob("*.py")):
        if path.name == "caches.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module in ("functools", "collections"):
                names = {alias.name for alias in node.names}
                found += [f"{path.relative_to(root)}: {n}" for n in names & _OTHER_CACHES]
    assert found == []


def test_a_bytes_cache_evicts_the_least_recently_used_by_size() -> None:
    # The judge's reply cache: bounded in bytes (key + value here), a hit refreshes an entry.
    cache: BytesCache[str, str] = BytesCache(10, lambda key, value: len(key) + len(value))
    cache.put("a", "1234")  # 5 bytes
    cache.put("b", "1234")  # 10
    assert cache.get("a") == "1234"  # a is now the most recently used
    cache.put("c", "12")  # 13 > 10: b goes, not a
    assert (cache.get("a"), cache.get("b"), cache.get("c")) == ("1234", None, "12")
    cache.put("d", "x" * 10)  # larger than the whole: never stored, nothing evicted
    assert cache.get("d") is None and len(cache) == 2
    cache.put("a", "1")  # replacing an entry counts its new size only
    cache.put("e", "123456")  # 2 + 3 + 7 = 12 > 10: c (least recent) goes
    assert (cache.get("a"), cache.get("c"), cache.get("e")) == ("1", None, "123456")
