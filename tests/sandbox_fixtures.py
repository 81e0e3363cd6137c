"""pytest fixtures for the sandbox backends (loaded as a plugin from tests/conftest.py).

- `local_backend`, `docker_backend`: one warm backend per test session, closed at the end.
- `backend`: parametrized over both (the docker case carries the `docker` mark).

Where a backend cannot run (no bubblewrap or namespaces, no Docker engine, no sandbox image) its
tests are skipped with the reason, except in CI (`CI=true`), where they fail: CI must run them all.
The docker fixture uses the image `PROCTOR_SANDBOX_IMAGE` (default: the settings' default) and its
own container label, so a test run never touches a service's containers.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from sandboxes import SandboxBackend, SandboxSettings, SandboxUnavailable, open_backend
from sandboxes.checkers import open_checker_backend
from sandboxes.settings import DEFAULT_IMAGE

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
TEST_LABEL = "proctor-test"
TEST_POOL_SIZE = 4
"""Small on purpose: the tests run on 2 cores, and queueing behind a busy pool is itself tested."""


def sandbox_settings(backend: str, **overrides: object) -> SandboxSettings:
    """The settings the test fixtures use; tests that need a private backend start from these."""
    values: dict[str, object] = {
        "backend": backend,
        "pool_size": TEST_POOL_SIZE,
        "image": os.environ.get("PROCTOR_SANDBOX_IMAGE", DEFAULT_IMAGE),
        "docker_label": TEST_LABEL,
    }
    values.update(overrides)
    return SandboxSettings.model_validate(values)


def unavailable(reason: str) -> None:
    """Skip, or fail in CI where every sandbox test must run."""
    if IN_CI:
        pytest.fail(f"sandbox unavailable in CI: {reason}", pytrace=False)
    pytest.skip(reason)


def open_or_skip(settings: SandboxSettings) -> SandboxBackend:
    try:
        return open_backend(settings)
    except ImportError as exc:  # the `docker` extra is not installed
        unavailable(f"{settings.backend} backend: {exc}")
    except SandboxUnavailable as exc:
        unavailable(f"{settings.backend} backend: {exc}")
    raise AssertionError("unreachable")


@pytest.fixture(scope="session")
def local_backend() -> Iterator[SandboxBackend]:
    backend = open_or_skip(sandbox_settings("local"))
    yield backend
    backend.close()


@pytest.fixture(scope="session")
def docker_backend() -> Iterator[SandboxBackend]:
    backend = open_or_skip(sandbox_settings("docker"))
    yield backend
    backend.close()


@pytest.fixture(params=["local", pytest.param("docker", marks=pytest.mark.docker)])
def backend(request: pytest.FixtureRequest) -> SandboxBackend:
    """Each backend in turn: a test using this runs once on `local` and once on `docker`."""
    value: SandboxBackend = request.getfixturevalue(f"{request.param}_backend")
    return value


@pytest.fixture(scope="session")
def _checker_backends() -> Iterator[dict[str, SandboxBackend]]:
    opened: dict[str, SandboxBackend] = {}
    yield opened
    for backend in opened.values():
        backend.close()


@pytest.fixture
def checkers(
    backend: SandboxBackend, _checker_backends: dict[str, SandboxBackend]
) -> SandboxBackend:
    """The pool for checkers and program tests of the same kind as `backend` (opened lazily)."""
    if backend.name not in _checker_backends:
        _checker_backends[backend.name] = open_checker_backend(sandbox_settings(backend.name))
    return _checker_backends[backend.name]
