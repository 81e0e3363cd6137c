"""A run's YAML, its stage schedule and its prompt files are refused at start, naming the field
or the line; the shipped configs load."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from proctor_client._defaults import DEFAULT_SPEC
from proctor_client.trainer.data import PromptSampler, load_jsonl
from proctor_client.trainer.grpo import load_args
from proctor_client.trainer.schedule import Schedule

CONFIGS = Path(__file__).parent.parent / "clients" / "configs"


def _stage(**changes: Any) -> dict[str, Any]:
    stage = {
        "name": "s1",
        "steps": 3,
        "max_response_tokens": 4,
        "group_size": 4,
        "temperature": 1.0,
        "mixture": {"digits": 1.0},
    }
    return {**stage, **changes}


def _write(tmp_path: Path, config: dict[str, Any]) -> Path:
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _config(**changes: Any) -> dict[str, Any]:
    base = {
        "data": {"digits": {"kind": "digits"}},
        "stages": [_stage()],
        "prompts_per_step": 4,
        "prompts_per_minibatch": 2,
    }
    return {**base, **changes}


@pytest.mark.parametrize("name", ["prorl-8-stage.yaml", "tiny-cpu.yaml"])
def test_shipped_configs_load(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # prompt files are only opened at train time, not here
    args = load_args(CONFIGS / name)
    assert Schedule(args.stages).total_steps > 0


def test_the_8_stage_schedule_mirrors_the_review() -> None:
    args = load_args(CONFIGS / "prorl-8-stage.yaml")
    stages = args.stages
    assert len(stages) == 8
    assert [s.max_response_tokens for s in stages] == [8192] * 7 + [16384]
    assert [s.group_size for s in stages] == [16] * 5 + [32, 32, 16]
    assert [("ifeval" in s.mixture) for s in stages] == [False, False] + [True] * 6
    shaped = "prorl-v1-careful-termination-2"  # the default's grader, with termination shaping
    assert [s.spec for s in stages] == [DEFAULT_SPEC] * 3 + [shaped] * 2 + [DEFAULT_SPEC] * 3
    assert {s.temperature for s in stages} == {1.2}
    assert (args.eps_low, args.eps_high, args.learning_rate) == (0.2, 0.4, 2e-6)
    assert args.prompts_per_step // args.prompts_per_minibatch == 4
    assert sum(s.steps for s in stages) > 2000  # the review: more than 2,000 steps
    assert set(args.validation_data) == {
        "aime24",
        "codeforces",
        "gpqa",
        "ifeval_held_out",
        "graph_color",
    }
    assert not set(args.validation_data) & {n for s in stages for n in s.mixture}


def test_validation_data_must_be_held_out(tmp_path: Path) -> None:
    base = {"stages": [_stage()], "data": {"digits": {"kind": "digits"}}}
    shared = {"digits": {"kind": "digits"}}
    with pytest.raises(ValueError, match="also training sources"):
        load_args(_write(tmp_path, {**base, "validation_data": shared}))
    same_file = {
        "data": {"train": {"kind": "jsonl", "path": "p.jsonl"}},
        "stages": [_stage(mixture={"train": 1.0})],
        "validation_data": {"held": {"kind": "jsonl", "path": "p.jsonl"}},
    }
    with pytest.raises(ValueError, match=r"\['held'\] read a file a training source reads"):
        load_args(_write(tmp_path, same_file))
    with pytest.raises(ValueError, match="unknown validation_data sources"):
        held = {
            "validation_data": {"held": {"kind": "digits"}},
            "validation_mixture": {"digits": 1},
        }
        load_args(_write(tmp_path, {**base, **held}))


@pytest.mark.parametrize(
    "changes,message",
    [
        ({"learning_rat": 1e-3}, "learning_rat"),  # a typo is an unknown key, not a default
        ({"stages": [_stage(group_sise=8)]}, "stages.0.group_sise"),
        ({"stages": [_stage(group_size=1)]}, "stages.0.group_size"),
        ({"stages": [_stage(mixture={"math": 1.0})]}, "unknown data sources ['math']"),
        ({"stages": [_stage(mixture={"digits": 0})]}, "must be positive"),
        ({"stages": [_stage(), _stage()]}, "duplicate stage names"),
        ({"stages": []}, "at least one stage"),
        ({"total_steps": 5}, "add up to 3"),
        ({"reset_steps": [3]}, "reset_steps: 3 is outside the run"),
        ({"prompts_per_minibatch": 3}, "multiple of prompts_per_minibatch"),
        ({"kl_estimator": "k4"}, "kl_estimator"),
        ({"plateau_patience": 2}, "needs validation_every"),
        ({"data": {"digits": {"kind": "jsonl"}}}, "needs `path`"),
        ({"validation_mixture": {"nope": 1}}, "validation_mixture"),
    ],
)
def test_bad_configs_are_refused_naming_the_field(
    tmp_path: Path, changes: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=r"run\.yaml") as refused:
        load_args(_write(tmp_path, _config(**changes)))
    assert message in str(refused.value)


def test_a_config_that_is_not_a_mapping_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "run.yaml"
    path.write_text("- just\n- a list\n")
    with pytest.raises(ValueError, match="mapping"):
        load_args(path)


def test_schedule_maps_steps_to_stages() -> None:
    args = load_args(CONFIGS / "prorl-8-stage.yaml")
    schedule = Schedule(args.stages)
    first, second = args.stages[0].steps, args.stages[1].steps
    assert schedule.index_at(0) == 0
    assert schedule.index_at(first - 1) == 0
    assert schedule.index_at(first) == 1
    assert schedule.begins_at(first) and not schedule.begins_at(0)
    assert schedule.index_at(first + second) == 2
    with pytest.raises(IndexError):
        schedule.index_at(schedule.total_steps)


def _jsonl(tmp_path: Path, rows: list[object]) -> Path:
    path = tmp_path / "prompts.jsonl"
    lines = [r if isinstance(r, str) else json.dumps(r) for r in rows]
    path.write_text("\n".join(lines) + "\n")
    return path


GOOD = {"prompt": "2+2?", "domain": "math", "reference": {"answer": "4"}}


@pytest.mark.parametrize(
    "bad,message",
    [
        ("{not json", "not valid JSON"),
        ([1, 2], "must be a JSON object"),
        ({**GOOD, "answer": "4"}, "unknown fields ['answer']"),
        ({"domain": "math", "reference": {}}, "`prompt`"),
        ({**GOOD, "reference": "4"}, "`reference` must be an object"),
        ({**GOOD, "domain": ""}, "`domain`"),
    ],
)
def test_a_bad_prompt_row_is_refused_naming_the_line(
    tmp_path: Path, bad: object, message: str
) -> None:
    path = _jsonl(tmp_path, [GOOD, "", bad])
    with pytest.raises(ValueError, match=r"prompts\.jsonl:3: ") as refused:
        load_jsonl(path)
    assert message in str(refused.value)


def test_a_good_prompt_file_loads_and_samples_reproducibly(tmp_path: Path) -> None:
    other = {**GOOD, "prompt": "3+3?", "reference": {"answer": "6"}, "id": 7}
    prompts = load_jsonl(_jsonl(tmp_path, [GOOD, other]))
    assert [p.id for p in prompts] == [f"{tmp_path}/prompts.jsonl:1", "7"]
    draws = [PromptSampler({"a": prompts}, seed=3).sample(6, {"a": 1.0}) for _ in range(2)]
    assert draws[0] == draws[1]
    sampler = PromptSampler({"a": prompts}, seed=3)
    sampler.sample(2, {"a": 1.0})
    state = sampler.state()
    after = sampler.sample(4, {"a": 1.0})
    sampler.set_state(state)
    assert sampler.sample(4, {"a": 1.0}) == after
