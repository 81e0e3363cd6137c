"""The collector and allocator are tuned only by a process that is the service's own
(`proctor serve`, a pool worker), never by building an app inside another program."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from fastapi.testclient import TestClient

from service.main import create_app
from service.settings import Settings
from tests.helpers import TEST_SPECS
from tests.test_dispatch_seam import InProcessDispatcher

ROOT = Path(__file__).resolve().parent.parent


def test_an_embedded_app_leaves_the_collector_as_it_found_it() -> None:
    before = gc.get_threshold(), gc.get_freeze_count()
    settings = Settings(workers=1, spec_dirs=(TEST_SPECS,))
    with TestClient(create_app(settings, InProcessDispatcher(settings.registry))) as client:
        assert client.get("/readyz").status_code == 200
        assert (gc.get_threshold(), gc.get_freeze_count()) == before


def test_an_app_that_owns_its_process_settles_the_heap_once_started() -> None:
    probe = textwrap.dedent(
        f"""
        import gc
        from fastapi.testclient import TestClient
        from service.main import create_app
        from service.settings import Settings
        from tests.test_dispatch_seam import InProcessDispatcher
        settings = Settings(workers=1, spec_dirs=({str(TEST_SPECS)!r},))
        app = create_app(settings, InProcessDispatcher(settings.registry), owns_process=True)
        before = gc.get_threshold()[0]
        with TestClient(app):
            print(before, gc.get_threshold()[0], gc.get_freeze_count() > 0)
        """
    )
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'clients'}"}
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        cwd=ROOT,
        env=env,
    )
    before, after, frozen = done.stdout.split()
    assert before == "700" and int(after) > 700 and frozen == "True"
