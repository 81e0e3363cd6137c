"""The puzzle domain: the scorer (`domain`), Reasoning Gym registry access (`gym`), answer
extraction (`answers`), and our Boxnet and graph colouring validators."""

from reward_specs.puzzles.domain import (
    SCORER,
    VALIDATED_TASKS,
    PuzzleConfig,
    PuzzleReference,
    puzzle_answer_key,
    puzzle_workload,
    score_puzzle,
)
from reward_specs.puzzles.gym import (
    MAX_SAMPLE_COUNT,
    SEED_SPACE,
    SEED_STRIDE,
    TaskInfo,
    dataset_seed,
    entry_for,
    sample_entries,
    task_info,
    task_names,
)
from reward_specs.puzzles.prompts import sample_prompts, system_prompt

__all__ = [
    "MAX_SAMPLE_COUNT",
    "SCORER",
    "SEED_SPACE",
    "SEED_STRIDE",
    "VALIDATED_TASKS",
    "PuzzleConfig",
    "PuzzleReference",
    "TaskInfo",
    "dataset_seed",
    "entry_for",
    "puzzle_answer_key",
    "puzzle_workload",
    "sample_entries",
    "sample_prompts",
    "score_puzzle",
    "system_prompt",
    "task_info",
    "task_names",
]
