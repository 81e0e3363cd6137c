"""The run pool's scheduling: runs share the pool fairly between API keys (a flood from one key
does not queue another key's run behind it). Queue mode's runs, on the workers, are
tests/test_queue_runs.py's."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from service.settings import RunSettings, SettingsError, load_settings
from tests.helpers import Server, poll
from tests.sandbox_fixtures import sandbox_settings

FLOOD_KEY = "proctor-run-flood-key-01"
OTHER_KEY = "proctor-run-other-key-01"


def _run(url: str, key: str, source: str) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {key}"}
    body = {"language": "python", "source": source}
    response = httpx.post(f"{url}/v1/run", json=body, headers=headers, timeout=120)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def test_one_key_s_flood_does_not_queue_another_key_s_run_behind_it(
    make_server: Callable[..., Server], request: pytest.FixtureRequest
) -> None:
    request.getfixturevalue("local_backend")  # skips, or fails in CI, without bubblewrap
    server = make_server(
        workers=1,
        api_keys=(FLOOD_KEY, OTHER_KEY),
        sandbox=sandbox_settings("local", pool_size=1),
        run=RunSettings(pool_size=1),
    )
    finished: list[str] = []

    def run(key: str, name: str) -> None:
        result = _run(server.url, key, f"import time\ntime.sleep(1)\nprint('{name}')")
        assert result["status"] == "ok", result
        finished.append(name)

    with ThreadPoolExecutor(5) as pool:
        flood = [pool.submit(run, FLOOD_KEY, f"flood{n}") for n in range(4)]
        # one flood run in the pool's one sandbox, the other three waiting for it
        poll(lambda: server.state.runs.pending() == 3, timeout=60)
        other = pool.submit(run, OTHER_KEY, "other")
        for future in [*flood, other]:
            future.result()
    # First come, first served would finish it last (index 4); round-robin across keys takes
    # it right after the flood's next run.
    assert finished.index("other") <= 2, finished


def test_the_run_settings_refuse_a_backstop_below_the_budget() -> None:
    with pytest.raises(SettingsError, match=r"PROCTOR_RUN: .*run\.wall_s must be at least"):
        load_settings(run={"cpu_s": 5, "wall_s": 1})
    assert load_settings(run={"cpu_s": 1, "wall_s": 1}).run.wall_s == 1
