"""SandboxSettings: documented defaults, and validators that refuse values weakening isolation."""

from __future__ import annotations

import inspect
import os
from typing import Any

import pytest
from pydantic import ValidationError

from sandboxes import SandboxSettings
from sandboxes import settings as settings_module


def test_defaults() -> None:
    s = SandboxSettings()
    assert s.backend == "local"
    assert s.pool_size == max(1, os.cpu_count() or 1)
    assert s.container_memory_bytes > s.work_tmpfs_bytes
    assert s.docker_uid >= 1000 and s.run_uid_base >= 1000
    assert s.fork_python is True


def test_every_field_is_documented() -> None:
    source = inspect.getsource(settings_module)
    for name in SandboxSettings.model_fields:
        head = source.index(f"\n    {name}:")
        assert '"""' in source[head : source.index("\n\n", head + 1)], f"{name} has no docstring"


@pytest.mark.parametrize(
    "values",
    [
        {"backend": "none"},  # not a backend
        {"pool_size": 0},
        {"docker_uid": 0},  # root in the container
        {"run_uid_base": 0},  # root on the host
        {"run_uid_base": 999},  # system uids
        {"python": "python3"},  # relative: resolved against whose PATH?
        {"python": "/root/.pyenv/versions/3.11.7/bin/python"},  # not visible in the jail
        {"container_memory_bytes": 1024},
        {"container_pids": 0},
        {"container_memory_bytes": 128 * 2**20, "work_tmpfs_bytes": 256 * 2**20},
        {"docker_label": "has space"},
        {"uid_lock_dir": "relative/dir"},
        {"unknown_field": 1},
    ],
)
def test_unsafe_or_invalid_values_are_refused(values: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        SandboxSettings(**values)


def test_frozen() -> None:
    s = SandboxSettings()
    with pytest.raises(ValidationError):
        s.backend = "unsafe"  # type: ignore[misc]
