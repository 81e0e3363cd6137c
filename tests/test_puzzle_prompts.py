"""The puzzle prompt and the puzzle scorer agree (issue 24, item 2): the sample route hands out the
full prompt (system + question) asking for the one format the spec's scorer reads for the task,
a Boxnet answer written as its prompt asks scores 1, and the 2.0.0 training specs pay no floors."""

from __future__ import annotations

import json
import random
from typing import Any

import httpx
import pytest

from reward_specs import ScoreContext
from reward_specs.puzzles import (
    PuzzleConfig,
    PuzzleReference,
    sample_prompts,
    score_puzzle,
    system_prompt,
    task_info,
    task_names,
)
from tests.test_puzzle_boxnet import render, solve

NEW = PuzzleConfig(json_block_tasks=("boxnet",), json_recovery=False, partial_credit=False)
"""The puzzle config of the 2.0.0 training specs."""


def _plan(entry: dict[str, Any]) -> str:
    steps = solve(entry["metadata"]["initial_state"], random.Random(0))
    return render([[(f"Agent[{x}, {y}]", a) for (x, y), a in step] for step in steps])


def _judge(response: str, reference: dict[str, Any], config: PuzzleConfig) -> Any:
    ref = PuzzleReference.model_validate(reference)
    return score_puzzle(response, ref, config, ScoreContext())


def test_every_task_gets_a_full_prompt_asking_for_what_its_scorer_reads() -> None:
    for task in task_names():
        if not task_info(task).default_config_valid:
            continue
        for config in (PuzzleConfig(), NEW):
            (entry,) = sample_prompts(task, {}, 0, 1, 0, config)
            system, user = entry["messages"]
            assert system == {"role": "system", "content": system_prompt(task, config)}, task
            assert user == {"role": "user", "content": entry["question"]}, task
            assert "system" not in entry  # the system prompt once, in the chat
            if task in config.json_block_tasks:
                assert "```json" in system["content"] and "<answer>" not in system["content"]
            else:
                assert "<answer>answer here</answer>" in system["content"], task


def test_the_boxnet_sample_answered_as_its_prompt_asks_scores_1(client: httpx.Client) -> None:
    for spec, wrap in (
        ("prorl-v1-careful-2", "Thinking done.\n```json\n{}\n```"),  # the fenced block alone
        ("prorl-v1-careful", "Thinking done.\n<answer>\n```json\n{}\n```\n</answer>"),
    ):
        reply = client.post("/v1/puzzles/boxnet/sample", json={"count": 2, "spec": spec})
        assert reply.status_code == 200, reply.text
        body = reply.json()
        assert body["spec"] == spec
        items = []
        for entry in body["entries"]:
            assert entry["messages"][1]["content"] == entry["question"]
            asked = "```json" if spec.endswith("-2") else "<answer>"
            assert asked in entry["messages"][0]["content"]
            response = wrap.replace("{}", _plan(entry))
            items.append(
                {"domain": "puzzle", "response": response, "reference": entry["reference"]}
            )
        scored = client.post("/v1/score", json={"spec": spec, "items": items}).json()
        assert [r["score"] for r in scored["results"]] == [1.0, 1.0], scored


def test_one_target_per_task_the_last_one_wins_and_no_second_format() -> None:
    (entry,) = sample_prompts("boxnet", {}, 3, 1, 0, NEW)
    reference = entry["reference"]
    plan = _plan(entry)
    block = f"```json\n{plan}\n```"
    assert _judge(f"```json\n[]\n```\n{block}", reference, NEW).score == 1.0
    assert _judge(f"{block}\n```json\n[]\n```", reference, NEW).score < 1.0  # the last block
    tagged = _judge(f"<answer>{plan}</answer>", reference, NEW)
    assert (tagged.score, tagged.parsed) == (0.0, False)  # the tag is not Boxnet's target
    legacy = PuzzleConfig()
    assert _judge(f"<answer>{block}</answer>", reference, legacy).score == 1.0
    assert _judge(block, reference, legacy).parsed is False  # 1.0.0 keeps its verdicts
    with pytest.raises(ValueError, match="no fallbacks"):
        PuzzleConfig(json_block_tasks=("boxnet",), fallbacks=("json",))


def test_the_floors_are_off_in_the_2_0_0_specs() -> None:
    boxnet = {"task": "boxnet", "config": {}, "seed": 3, "index": 0}
    idle = "```json\n[]\n```"  # a plan that moves nothing
    assert _judge(idle, boxnet, NEW).score == 0.0
    assert _judge(f"<answer>{idle}</answer>", boxnet, PuzzleConfig()).score == 0.05
    (entry,) = sample_prompts("graph_color", {}, 7, 1, 0, NEW)
    graph = entry["reference"]
    vertices = entry["metadata"]["puzzle"]["vertices"]
    edges = entry["metadata"]["puzzle"]["edges"]
    assert edges, "the entry must have an edge to colour wrongly"
    same = json.dumps({str(v): 1 for v in vertices})  # every edge's two ends alike
    assert _judge(f"<answer>{same}</answer>", graph, PuzzleConfig()).score == 0.01
    assert _judge(f"<answer>{same}</answer>", graph, NEW).score == 0.0
    # Reasoning Gym's containment credit: the gold among other candidates
    (sum_entry,) = sample_prompts("basic_arithmetic", {}, 1, 1, 0, NEW)
    arithmetic = sum_entry["reference"]
    hedge = f"<answer>{sum_entry['answer']} or 12345</answer>"
    assert 0.0 < _judge(hedge, arithmetic, PuzzleConfig()).score < 1.0
    assert _judge(hedge, arithmetic, NEW).score == 0.0
    exact = f"<answer>{sum_entry['answer']}</answer>"
    assert _judge(exact, arithmetic, NEW).score == 1.0
