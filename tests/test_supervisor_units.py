"""The supervisor's decisions, without forking: how a step's end maps to its status, and the
configuration a backend may give."""

from __future__ import annotations

import signal

import pytest

from sandboxes.supervisor import CONFIG_DEFAULTS, SupervisorConfig, classify, supervisor_config


@pytest.mark.parametrize(
    ("killed_for", "exit_code", "sig", "stderr", "expected"),
    [
        (None, 0, None, b"", ("ok", False)),
        (None, 1, None, b"Traceback ...\nValueError: x\n", ("runtime_error", False)),
        (None, 1, None, b"MemoryError\n", ("memory", False)),
        (None, 134, None, b"terminate called after throwing 'std::bad_alloc'", ("memory", False)),
        (None, None, signal.SIGKILL, b"", ("memory", True)),  # not ours: the OOM killer
        (None, None, signal.SIGXCPU, b"", ("timeout", False)),  # the RLIMIT_CPU backstop
        (None, None, signal.SIGSEGV, b"", ("runtime_error", False)),
        ("timeout", None, signal.SIGKILL, b"", ("timeout", False)),  # killed by us
        ("output_limit", 0, None, b"", ("output_limit", False)),
        ("memory", None, signal.SIGKILL, b"MemoryError", ("memory", False)),
        ("runtime_error", None, signal.SIGKILL, b"", ("runtime_error", False)),
    ],
)
def test_a_steps_end_maps_to_one_status(
    killed_for: str | None,
    exit_code: int | None,
    sig: int | None,
    stderr: bytes,
    expected: tuple[str, bool],
) -> None:
    assert classify(killed_for, exit_code, sig, stderr) == expected


def test_a_backend_gives_the_work_root_and_what_differs_from_the_defaults() -> None:
    config = supervisor_config({"work_root": "/sandbox", "pid_namespace": True})
    assert config["pid_namespace"] is True
    assert config["nofile"] == CONFIG_DEFAULTS["nofile"]
    assert set(config) == set(SupervisorConfig.__annotations__)


@pytest.mark.parametrize("given", [{"work_root": "/w", "pid_namespaces": True}, {"wipe": []}])
def test_a_misspelt_or_missing_key_is_refused(given: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="supervisor configuration"):
        supervisor_config(given)
