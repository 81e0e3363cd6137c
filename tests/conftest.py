"""Shared fixtures: a real Proctor server (uvicorn in a thread) and an HTTP client for it.

In CI (`CI=true`) a skipped test is a failure: tests that need Docker or Redis must run there.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from service.settings import Settings
from tests.helpers import TEST_SPECS, Server, running_server

pytest_plugins = ["tests.sandbox_fixtures", "tests.redis_fixtures"]

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
SHORT = os.environ.get("PROCTOR_SHORT", "") == "1"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if IN_CI and report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = f"skipped in CI, which must run every test: {report.longrepr}"


@pytest.fixture(scope="session")
def server() -> Iterator[Server]:
    """One shared server on the embedded default; do not kill its workers."""
    with running_server() as srv:
        yield srv


@pytest.fixture(scope="session")
def client(server: Server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=600) as c:
        yield c


@pytest.fixture
def make_server() -> Iterator[Callable[..., Server]]:
    """Start a private server with settings overrides; stopped at the end of the test."""
    started: list[Server] = []

    def make(**overrides: Any) -> Server:
        values: dict[str, Any] = {"workers": 2, "spec_dirs": (TEST_SPECS,)}
        values.update(overrides)
        srv = Server(Settings(**values))
        srv.start()
        started.append(srv)
        return srv

    yield make
    for srv in started:
        srv.stop()
