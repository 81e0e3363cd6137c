"""The dispatch protocol is the whole contract: the app runs on a dispatcher that implements only
the protocol, and the app's modules import nothing of a backend."""

from __future__ import annotations

import ast
from pathlib import Path

from fastapi.testclient import TestClient

from reward_specs import Outcome, ScoreContext, score_item
from service.core.loading import load_registry
from service.dispatch import DispatchStats, Work
from service.main import create_app
from service.settings import Settings
from tests.helpers import TEST_SPECS

ROOT = Path(__file__).resolve().parent.parent


class InProcessDispatcher:
    """Scores on the caller's thread: no workers, no sandbox. Only the protocol's methods."""

    def __init__(self, registry_path: str) -> None:
        self.registry = load_registry(registry_path)
        self.started = self.stopped = False
        self.scored = 0

    async def start(self) -> None:
        self.started = True

    async def stop(self) -> None:
        self.stopped = True

    def readiness(self) -> dict[str, bool]:
        return {"in_process": self.started}

    def environments(self) -> dict[str, str]:
        return {}

    def stats(self) -> DispatchStats:
        return DispatchStats(
            backend="fake", workers=1, ready_workers=1, extras={"scored": self.scored}
        )

    async def run(self, work: Work) -> list[Outcome]:
        outcomes = []
        for position, item in enumerate(work.items):
            outcomes.append(score_item(self.registry, work.spec, item, ScoreContext()))
            self.scored += 1
            work.done(position)
        return outcomes


def test_the_app_runs_on_a_dispatcher_that_implements_only_the_protocol() -> None:
    settings = Settings(workers=1, spec_dirs=(TEST_SPECS,))
    dispatcher = InProcessDispatcher(settings.registry)
    items = [
        {"id": "a", "domain": "math", "response": "\\boxed{2}", "reference": {"answer": "2"}},
        {"id": "b", "domain": "math", "response": "\\boxed{3}", "reference": {"answer": "2"}},
    ]
    with TestClient(create_app(settings, dispatcher)) as client:
        assert dispatcher.started
        assert client.get("/readyz").json() == {
            "status": "ready",
            "components": {"in_process": True, "run_pool": True},
            "judge_endpoints_unconfigured": ["judge"],  # free-form-judge-1's; none configured
        }
        results = client.post("/v1/score", json={"items": items}).json()["results"]
        assert [(r["id"], r["score"]) for r in results] == [("a", 1.0), ("b", 0.0)]
        job = client.post("/v1/jobs", json={"items": items}).json()["job_id"]
        status = client.get(f"/v1/jobs/{job}").json()
        while status["status"] not in ("done", "failed"):
            status = client.get(f"/v1/jobs/{job}").json()
        assert status["completed"] == 2 and status["status"] == "done"
        metrics = client.get("/metrics").text
        assert "proctor_pool_ready_workers 1.0" in metrics
        assert 'proctor_dispatch_extra{backend="fake",name="scored"} 4.0' in metrics
    assert dispatcher.stopped


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_the_app_modules_import_only_the_dispatch_package() -> None:
    users = [ROOT / "service" / "main.py", ROOT / "service" / "state.py"]
    users += sorted((ROOT / "service" / "http").rglob("*.py"))
    for path in users:
        backend = {m for m in _imports(path) if m.startswith("service.dispatch.")}
        assert not backend, f"{path.relative_to(ROOT)} imports {sorted(backend)}"
