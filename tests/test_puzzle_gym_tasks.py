"""Reasoning Gym's tasks imported one at a time (`reward_specs.puzzles.gym_tasks`)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from reward_specs.puzzles import gym, gym_tasks


def test_the_index_names_the_module_that_registers_each_task() -> None:
    gym_tasks.load_all()
    registered = {task: classes[0].__module__ for task, classes in gym.gym_factory.DATASETS.items()}
    assert gym_tasks.task_modules() == registered


def test_a_named_task_imports_its_module_only_and_the_rest_still_loads() -> None:
    program = textwrap.dedent(
        """
        import sys
        from reward_specs.puzzles import gym, gym_tasks
        entry = gym.entry_for("basic_arithmetic", {}, 1, 0)
        loaded = {name for name in sys.modules if name.startswith("reasoning_gym.")}
        assert "reasoning_gym.arithmetic.basic_arithmetic" in loaded, loaded
        assert "reasoning_gym.algorithmic.game_of_life" not in loaded, loaded
        assert "matplotlib" not in sys.modules
        import reasoning_gym
        assert reasoning_gym.create_dataset("basic_arithmetic", seed=1)[0] == entry
        assert len(gym.task_names()) == len(gym_tasks.task_modules())
        assert "reasoning_gym.algorithmic.game_of_life" in sys.modules
        """
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
