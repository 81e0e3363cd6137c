"""The judge domain through a real server (worker processes, uvicorn) against a scripted
OpenAI-compatible judge: the worker processes call it, the endpoint's models enter the judge hash
and only the judge hash, an unconfigured endpoint is named by `/readyz` and its items are
`infra_error`, and a changed model makes judge items `infra_error` until a restart."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from reward_specs import BUILTIN_SPEC_DIR, default_registry, load_specs
from reward_specs.judge import Endpoint
from reward_specs.judge.client import models_digest
from tests.helpers import TEST_SPECS, poll, running_server, score
from tests.scripted_judge import equivalence_judge, scripted_judge

ROOT = Path(__file__).parent.parent
SPEC = "free-form-judge-1"
REFERENCE = {"question": "Which gas do plants take in?", "answer": "carbon dioxide"}


def _items(*answers: str) -> list[dict[str, Any]]:
    return [
        {"domain": "judge", "response": f"\\boxed{{{a}}}", "reference": REFERENCE} for a in answers
    ]


def test_judge_items_are_scored_by_the_workers_under_a_hash_of_the_models() -> None:
    with scripted_judge() as judge:
        endpoints = {"judge": Endpoint(url=judge.url)}
        with (
            running_server(workers=1, judge_endpoints=endpoints) as server,
            httpx.Client(base_url=server.url, timeout=60) as client,
        ):
            results = score(client, _items("carbon dioxide", "oxygen", "carbon dioxide"), SPEC)
            again = score(client, _items("carbon dioxide"), SPEC)  # the worker's cache answers
            ready = client.get("/readyz").json()["components"]
            specs = client.get("/v1/specs").json()
            metrics = client.get("/metrics").text
    assert [r["reward"] for r in results] == [1.0, 0.0, 1.0]
    assert len(judge.asked) == 4  # the repeated answer is scored once: two answers, two orders
    assert again[0]["details"]["judge"]["cached"] is True
    assert 'proctor_judge_calls_total{endpoint="judge"} 4.0' in metrics
    assert 'proctor_judge_cache_hits_total{endpoint="judge"} 1.0' in metrics
    assert 'proctor_judge_tokens_total{endpoint="judge",kind="prompt"}' in metrics
    assert ready["judge_endpoint_judge"] and ready["judge_environment"]
    environments = specs["environments"]
    assert environments["judge"] == models_digest({"judge": judge.models})
    by_name = {s["name"]: s for s in specs["specs"]}
    directories = (BUILTIN_SPEC_DIR, TEST_SPECS)
    offline = load_specs(default_registry(), directories, environments)
    no_judge = {d: e for d, e in environments.items() if d != "judge"}
    without = load_specs(default_registry(), directories, no_judge)
    assert by_name[SPEC]["hash"] == offline[SPEC].hash != without[SPEC].hash
    assert by_name["prorl-v1"]["hash"] == without["prorl-v1"].hash  # no judge: untouched


def test_an_unconfigured_endpoint_is_named_and_its_items_fail() -> None:
    with (
        running_server(workers=1) as server,  # ready: a spec's missing judge takes no other
        httpx.Client(base_url=server.url, timeout=60) as client,
    ):
        readyz = client.get("/readyz").json()
        (result,) = score(client, _items("carbon dioxide"), SPEC)
        metrics = client.get("/metrics").text
    assert readyz["judge_endpoints_unconfigured"] == ["judge"]
    assert "judge_endpoint_judge" not in readyz["components"]
    assert result["status"] == "infra_error"
    assert result["error"]["code"] == "judge_unavailable"
    assert 'proctor_judge_infra_errors_total{spec="free-form-judge-1"} 1.0' in metrics
    assert 'proctor_judge_failures_total{code="judge_unavailable",endpoint="judge"} 1.0' in metrics


KEY_A, KEY_B = "a" * 24, "b" * 24


def test_the_judge_is_shared_fairly_across_api_keys() -> None:
    """Key A's four items hold the only worker's judge calls; key B's one item, sent while the
    first of A's is being judged, is judged within a turn of A's, not after all of them: the pool
    hands the worker's turns round-robin across keys (B joins the rotation behind A's next
    turn), so each key's judge calls take its share."""
    held = threading.Event()

    def held_first(prompt: str) -> tuple[int, str]:
        held.wait(60)
        return equivalence_judge(prompt)

    with scripted_judge(held_first) as judge:
        endpoints = {"judge": Endpoint(url=judge.url)}
        with (
            running_server(
                workers=1, chunk_size=1, api_keys=(KEY_A, KEY_B), judge_endpoints=endpoints
            ) as server,
            httpx.Client(base_url=server.url, timeout=120) as a,
            httpx.Client(base_url=server.url, timeout=120) as b,
        ):
            a.headers["Authorization"] = f"Bearer {KEY_A}"
            b.headers["Authorization"] = f"Bearer {KEY_B}"
            with ThreadPoolExecutor(2) as pool:
                first = pool.submit(score, a, _items("a1", "a2", "a3", "a4"), SPEC)
                poll(lambda: len(judge.asked) == 1, timeout=60)  # a1 is with the judge
                second = pool.submit(score, b, _items("b1"), SPEC)
                pending = "proctor_pool_pending_chunks 4.0"
                poll(lambda: pending in a.get("/metrics").text, timeout=60)  # a2-a4 and b1
                held.set()
                first.result(), second.result()
    answers = [p.split("Second answer:\n", 1)[1].split("\n", 1)[0] for p in judge.prompts()]
    judged = list(dict.fromkeys(a if a.startswith(("a", "b")) else "" for a in answers))
    order = [a for a in judged if a]
    assert [a for a in order if a != "b1"] == ["a1", "a2", "a3", "a4"]
    assert order.index("b1") <= 2, order


def test_a_changed_model_makes_judge_items_infra_errors() -> None:
    with scripted_judge() as judge:
        endpoints = {"judge": Endpoint(url=judge.url)}
        with (
            running_server(
                workers=1, judge_endpoints=endpoints, environment_probe_interval_s=1.0
            ) as server,
            httpx.Client(base_url=server.url, timeout=60) as client,
        ):
            assert score(client, _items("carbon dioxide"), SPEC)[0]["reward"] == 1.0
            judge.models = [{"id": "judge-model", "root": "/w/other", "max_model_len": 4096}]
            poll(lambda: client.get("/readyz").status_code == 503, timeout=30)
            (result,) = score(client, _items("oxygen"), SPEC)
            ready = client.get("/readyz").json()["components"]
    assert ready["judge_environment"] is False
    assert (result["status"], result["error"]["code"]) == ("infra_error", "environment_changed")


def test_proctor_specs_reads_the_judge_models_as_the_server_does() -> None:
    with scripted_judge() as judge:
        endpoints = {"judge": Endpoint(url=judge.url)}
        env = dict(
            os.environ,
            PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "clients")]),
            PROCTOR_SANDBOX__BACKEND="local",
            PROCTOR_JUDGE_ENDPOINTS=json.dumps({"judge": {"url": judge.url}}),
        )
        shown = subprocess.run(
            [sys.executable, "-m", "service.cli", "specs", SPEC],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        with (
            running_server(workers=1, judge_endpoints=endpoints) as server,
            httpx.Client(base_url=server.url, timeout=60) as client,
        ):
            served = client.get("/v1/specs").json()["environments"]
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["environments"]["judge"] == served["judge"]
