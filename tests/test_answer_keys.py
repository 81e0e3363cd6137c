"""Items that differ only in their reasoning are scored once, and each still gets its own result.

A scorer may declare an answer key (the part of the response its verdict reads); the service then
shares one scoring among the items of a batch with equal keys, equal references and equal length
fields. These tests pin what may be shared and what must not be.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from reward_specs import canonical_json, default_registry, item_keyer, load_specs, strip_reasoning
from reward_specs.puzzles import PuzzleConfig, gym, puzzle_answer_key
from service.schemas import ScoreItem
from tests.helpers import Server, score

REGISTRY = "tests.pool_scorers:registry"


def _counted(response: str, domain: str = "count", **fields: Any) -> dict[str, Any]:
    return {"domain": domain, "response": response, "reference": {}, **fields}


def test_equal_answer_keys_share_one_scoring(make_server: Callable[..., Server]) -> None:
    server = make_server(registry=REGISTRY, workers=1)
    with httpx.Client(base_url=server.url, timeout=60) as client:
        results = score(
            client,
            [
                {**_counted("first I add\n42"), "id": "a"},
                {**_counted("then I check\n42"), "id": "b"},
                {**_counted("no\n43"), "id": "c"},
                {**_counted("other words\n42"), "id": "d", "finish_reason": "length"},
            ],
        )
    calls = {r["id"]: r["details"]["call"] for r in results}
    assert [r["id"] for r in results] == ["a", "b", "c", "d"]
    assert calls["a"] == calls["b"]  # same last line: one call
    assert len({calls["a"], calls["c"], calls["d"]}) == 3  # other answer, other length field


def test_a_raising_answer_key_loses_the_sharing_not_the_item(
    make_server: Callable[..., Server],
) -> None:
    server = make_server(registry=REGISTRY, workers=1)
    with httpx.Client(base_url=server.url, timeout=60) as client:
        results = score(client, [_counted("x\n1", "bad_key"), _counted("y\n1", "bad_key")])
    assert [r["status"] for r in results] == ["ok", "ok"]
    assert results[0]["details"]["call"] != results[1]["details"]["call"]


REGISTRY_REAL = default_registry()
SPECS = load_specs(REGISTRY_REAL)
PUZZLE_REF = {"task": "basic_arithmetic", "config": {}, "seed": 1, "index": 0}


def _key(response: str, domain: str = "puzzle", spec: str = "prorl-v1", **fields: Any) -> Any:
    reference = PUZZLE_REF if domain == "puzzle" else {"answer": "2"}
    item = ScoreItem(domain=domain, response=response, reference=reference, **fields)
    return item_keyer(SPECS[spec], REGISTRY_REAL)(item, canonical_json(reference))


def test_puzzle_keys_ignore_the_reasoning() -> None:
    assert _key("I think it is 7. <answer>7</answer>") == _key("Surely <answer> 7 </answer>")
    assert _key("<answer>7</answer>") != _key("<answer>8</answer>")
    # no answer at all is one key, whatever the words
    assert _key("I give up") == _key("no idea")
    # reasoning that never ended hides the answer: the same key as no answer
    assert _key("<think>so <answer>7</answer>") == _key("no idea")


def test_math_keys_are_the_final_answer() -> None:
    assert _key("so \\boxed{2}", "math") == _key("thus, surely, \\boxed{ 2 }", "math")
    assert _key("so \\boxed{2}", "math") != _key("so \\boxed{3}", "math")
    # the fallback is part of the key: "the answer is 2" is not the boxed 2 (details differ)
    assert _key("so \\boxed{2}", "math") != _key("so the answer is 2", "math")
    assert _key("first the answer is 2", "math") == _key("then the answer is 2.", "math")


def test_domains_without_an_answer_key_use_the_whole_response() -> None:
    # IFEval judges the whole text: no two different responses share a key.
    assert _key("One two.", "ifeval") != _key("One two three.", "ifeval")
    assert _key("One two.", "ifeval") == _key("One two.", "ifeval")


def test_length_fields_and_trailing_loops_stay_in_the_key() -> None:
    plain = "<answer>7</answer>"
    assert _key(plain) != _key(plain, finish_reason="length")
    assert _key(plain) != _key(plain, response_tokens=10, max_response_tokens=20)
    loop = "<answer>7</answer>" + " and again" * 40
    spec = "prorl-v1-termination"  # penalises a response that ends in a loop
    assert _key(loop, spec=spec) != _key("<answer>7</answer> and again", spec=spec)
    assert _key(loop) == _key("<answer>7</answer> and again")  # prorl-v1 reads no loops


def test_shared_items_keep_their_own_termination_penalties(client: httpx.Client) -> None:
    gold = str(gym.entry_for("basic_arithmetic", {}, 1, 0)["answer"])
    items = [
        {"id": "stop", "domain": "puzzle", "response": f"a <answer>{gold}</answer>"},
        {"id": "cut", "domain": "puzzle", "response": f"b <answer>{gold}</answer>"},
    ]
    items = [{**i, "reference": PUZZLE_REF} for i in items]
    items[1]["finish_reason"] = "length"
    results = score(client, items, spec="prorl-v1-termination")
    assert [r["score"] for r in results] == [1.0, 1.0]
    assert [r["reward"] for r in results] == [1.0, 0.0]
    assert results[1]["penalties"] == {"truncation": -1.0}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I think> so", "I think> so"),  # "think>" alone is not a tag
        ("a</think>b", "b"),
        ("<think>a", ""),
        ("x<think>a</think>b</think>c", "c"),
        ("plain", "plain"),
    ],
)
def test_strip_reasoning(text: str, expected: str) -> None:
    assert strip_reasoning(text) == expected


def test_with_fallbacks_the_whole_response_is_the_key() -> None:
    # Fallback scans (JSON above all) are not cheap on hostile text; the service computes keys in
    # its own process, so with fallbacks it leaves extraction to the workers.
    assert puzzle_answer_key("a <answer>7</answer>", PuzzleConfig()) == "tag:7"
    assert puzzle_answer_key("a <answer>7</answer>", PuzzleConfig(fallbacks=("json",))) is None
