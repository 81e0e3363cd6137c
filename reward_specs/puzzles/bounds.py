"""Size bounds on the configs a sampling request may ask for.

Reasoning Gym accepts any size its config fields can hold, and some generators' cost grows with
them faster than linearly: a spiral matrix of side 1,500, a Game of Life of a million steps, a
Tower of Hanoi of 40 disks (an answer of 2^40 moves). Sampling refuses such configs before any
work starts, naming the field and its bound. The bounds sit far above every default and above
what the review's training mixtures use; they are a cheap first refusal, not the guarantee: a
sampling call still runs under the service's time and memory limits whatever its config.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reward_specs.scorer import InvalidReference

__all__ = ["SAMPLE_BOUNDS", "check_sample_bounds"]

_GRID = 100
"""Side of a grid or matrix: the generators (and the questions) grow with its square."""

SAMPLE_BOUNDS: Mapping[str, Mapping[str, int]] = {
    # Matrices and grids, whose cells each question spells out.
    "binary_matrix": {"min_n": _GRID, "max_n": _GRID},
    "rotate_matrix": {"min_n": _GRID, "max_n": _GRID, "max_rotations": 1000},
    "rotten_oranges": {"min_n": _GRID, "max_n": _GRID},
    "spiral_matrix": {"min_n": _GRID, "max_n": _GRID},
    "manipulate_matrix": {
        "min_rows": _GRID,
        "max_rows": _GRID,
        "min_cols": _GRID,
        "max_cols": _GRID,
        "max_transforms": 100,
    },
    "pool_matrix": {"min_rows": _GRID, "max_rows": _GRID, "min_cols": _GRID, "max_cols": _GRID},
    "largest_island": {"min_rows": _GRID, "max_rows": _GRID, "min_cols": _GRID, "max_cols": _GRID},
    "shortest_path": {"min_rows": _GRID, "max_rows": _GRID, "min_cols": _GRID, "max_cols": _GRID},
    "kakurasu": {"min_rows": 20, "max_rows": 20, "min_cols": 20, "max_cols": 20},
    "maze": {"min_grid_size": _GRID, "max_grid_size": _GRID, "max_dist": 10_000},
    "modulo_grid": {"size_x": _GRID, "size_y": _GRID},
    "rectangle_count": {"width": 2 * _GRID, "height": 2 * _GRID, "max_rectangles": 100},
    "arc_1d": {"min_size": 1000, "max_size": 1000},
    # Simulations: cost is grid cells times steps.
    "game_of_life": {"grid_size_x": _GRID, "grid_size_y": _GRID, "simulation_steps": 100},
    "game_of_life_halting": {
        "grid_size_x": _GRID,
        "grid_size_y": _GRID,
        "max_simulation_steps": 1000,
    },
    # Boards solved or checked by search.
    "futoshiki": {"min_board_size": 12, "max_board_size": 12},
    "survo": {"min_board_size": 12, "max_board_size": 12},
    "tsumego": {"min_board_size": 19, "max_board_size": 19},
    "n_queens": {"n": 30},
    "sokoban": {"max_w": 20, "max_h": 20, "max_boxes": 20, "max_depth": 200},
    "rubiks_cube": {"cube_size": 10, "max_scramble_steps": 1000},
    "tower_of_hanoi": {"min_disks": 20, "max_disks": 20, "max_pegs": 10},
    "knight_swap": {"min_nodes": 50, "max_nodes": 50, "max_steps": 1000, "max_attempts": 10_000},
    # Generators that precompute or iterate up to a bound.
    "count_primes": {"min_n": 10_000_000, "max_n": 10_000_000},
    "string_splitting": {"max_iterations": 100_000},
    "string_synthesis": {"max_iterations": 100_000},
    "mahjong_puzzle": {"min_num_rounds": 10_000, "max_num_rounds": 10_000},
    "needle_haystack": {"min_num_statements": 100_000, "max_num_statements": 100_000},
    "graph_color": {"min_num_vertices": 1000, "max_num_vertices": 1000, "num_colors": 100},
    "course_schedule": {"min_num_courses": 1000, "max_num_courses": 1000},
    "family_relationships": {"min_family_size": 100, "max_family_size": 100},
    "letter_jumble": {"max_word_len": 1000, "max_words": 1000},
    "palindrome_partitioning": {"min_string_len": 30, "max_string_len": 30},
}
"""Task -> config field -> the largest value sampling accepts for it."""


def check_sample_bounds(task: str, config: Mapping[str, Any]) -> None:
    """Refuse (`InvalidReference`, code `config_too_large`) a config over `SAMPLE_BOUNDS`,
    including the parts of a `composite` config."""
    _check(task, config, "config")
    if task != "composite":
        return
    for position, part in enumerate(config.get("datasets") or ()):
        if isinstance(part, Mapping) and isinstance(part.get("name"), str):
            inner = part.get("config") or {}
            if isinstance(inner, Mapping):
                _check(part["name"], inner, f"config.datasets[{position}].config")


def _check(task: str, config: Mapping[str, Any], where: str) -> None:
    for name, bound in SAMPLE_BOUNDS.get(task, {}).items():
        value = config.get(name)
        if isinstance(value, int | float) and not isinstance(value, bool) and value > bound:
            raise InvalidReference(
                f"task {task!r}: {where}.{name} = {value} is over this server's bound of {bound} "
                "for sampling (larger sizes cost far more than they teach)",
                "config_too_large",
            )
