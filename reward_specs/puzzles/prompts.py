"""What a model must see for a puzzle: the system prompt that names the answer's format, and the
question, as `POST /v1/puzzles/{task}/sample` hands them out.

The format is the one the spec's scorer reads for the task (`PuzzleConfig`): the `answer_tag`
(Reasoning Gym's default system prompt, which asks for `<answer>...</answer>`), or, for the
`json_block_tasks`, the last ```json fenced block, as Boxnet's question shows it. One format per
task, so the prompt and the scorer cannot disagree.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from reward_specs.lazy import lazy_import
from reward_specs.puzzles.answers import JSON_BLOCK
from reward_specs.puzzles.bounds import check_sample_bounds
from reward_specs.puzzles.domain import PuzzleConfig
from reward_specs.puzzles.gym import sample_entries

if TYPE_CHECKING:
    import reasoning_gym.utils as gym_utils
else:  # imported at first use (reward_specs.lazy)
    gym_utils = lazy_import("reasoning_gym.utils")

__all__ = ["sample_prompts", "system_prompt"]

_JSON_BLOCK_PROMPT = (
    "Given a problem, your task is to answer the question by thinking step-by-step in a clear "
    "and specific manner.\nOnce you have thought about the reasoning process, give the answer as "
    f"JSON in a fenced block, exactly as the question shows:\n{JSON_BLOCK[0]}\n...\n"
    f"{JSON_BLOCK[1]}\nOnly the last such block of your response is read as the answer."
)


def system_prompt(task: str, config: PuzzleConfig) -> str:
    """The system prompt for `task` under `config`: it asks for what the scorer reads."""
    if task in config.json_block_tasks:
        return _JSON_BLOCK_PROMPT
    default: str = gym_utils.SYSTEM_PROMPTS["default"]
    tag = config.answer_tag
    return default.replace("<answer>", f"<{tag}>").replace("</answer>", f"</{tag}>")


def sample_prompts(
    task: str,
    dataset_config: Mapping[str, Any],
    seed: int,
    count: int,
    start: int,
    config: PuzzleConfig,
) -> list[dict[str, Any]]:
    """`sample_entries`, each with the full prompt, `messages` (the system prompt and the
    question as a chat), for the spec whose puzzle config is `config`. A config over
    the sampling bounds (`bounds.SAMPLE_BOUNDS`) is refused before any entry is built."""
    check_sample_bounds(task, dataset_config)
    system = system_prompt(task, config)
    entries = sample_entries(task, dataset_config, seed, count, start)
    for entry in entries:
        question = entry.get("question", "")
        entry["messages"] = [
            {"role": "system", "content": system},
            {"role": "user", "content": question},
        ]
    return entries
