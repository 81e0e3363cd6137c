"""Reasoning Gym puzzles: registry access, answer extraction, and our Boxnet and graph colouring
validators. The scorer itself is `reward_specs.puzzle_domain`."""

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
    "TaskInfo",
    "entry_for",
    "sample_entries",
    "task_info",
    "task_names",
]
