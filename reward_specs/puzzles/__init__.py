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
    TaskInfo,
    entry_for,
    sample_entries,
    task_info,
    task_names,
)

__all__ = [
    "MAX_SAMPLE_COUNT",
    "SCORER",
    "VALIDATED_TASKS",
    "PuzzleConfig",
    "PuzzleReference",
    "TaskInfo",
    "entry_for",
    "puzzle_answer_key",
    "puzzle_workload",
    "sample_entries",
    "score_puzzle",
    "task_info",
    "task_names",
]
