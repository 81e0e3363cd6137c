"""Puzzle sampling away from the API process (`service.work.sampling`): hostile configs are refused
up front or cut off at the item timeout, each call is bounded in memory and output, abandoned calls
kill their child, and while one client floods the route another is answered.

The sampler is tested on its own with real child processes, then through a real `proctor serve`
with two API keys.
"""

from __future__ import annotations

import asyncio
import dataclasses
import multiprocessing
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from reasoning_gym.factory import DATASETS

from reward_specs import InvalidReference
from reward_specs.puzzles import PuzzleConfig, task_names
from reward_specs.puzzles.bounds import SAMPLE_BOUNDS, check_sample_bounds
from service.work import sampling
from service.work.sampling import FairSlots, SampleCall, Sampler
from tests.helpers import descendants, free_port, poll
from tests.redis_fixtures import ROOT, RedisServer, proctor_env, serve_queue, status_of

KEY_A = "tenant-a-key-0123456789"
KEY_B = "tenant-b-key-0123456789"
TIMEOUT_S = 4.0
# Seconds of generation per entry, well inside the bounds; sixteen of them are far past every
# timeout here, however fast the machine: only the timeout (or a cancel) stops them.
SLOW = {"grid_size_x": 100, "grid_size_y": 100, "simulation_steps": 100}
SLOW_COUNT = 16
MATH = {"domain": "math", "response": "\\boxed{4}", "reference": {"answer": "4"}}


def _call(task: str, config: dict[str, Any], count: int = 1) -> SampleCall:
    return SampleCall(task, config, 0, count, 0, PuzzleConfig())


# ------------------------------------------------------------------ the bounds


def test_every_bound_names_a_real_field_and_admits_its_default() -> None:
    for task, bounds in SAMPLE_BOUNDS.items():
        assert task in task_names(), task
        fields = {f.name: f.default for f in dataclasses.fields(DATASETS[task][1])}
        for name, bound in bounds.items():
            assert name in fields, (task, name)
            assert fields[name] <= bound, (task, name)


def test_a_config_over_a_bound_is_refused_naming_the_field() -> None:
    with pytest.raises(InvalidReference, match=r"config\.max_n = 1500") as refused:
        check_sample_bounds("spiral_matrix", {"max_n": 1500})
    assert refused.value.code == "config_too_large"
    composite = {"datasets": [{"name": "game_of_life", "weight": 1, "config": SLOW | {
        "simulation_steps": 10**9}}]}  # fmt: skip
    with pytest.raises(InvalidReference, match=r"datasets\[0\]\.config\.simulation_steps"):
        check_sample_bounds("composite", composite)
    check_sample_bounds("game_of_life", SLOW)  # at the bounds: admitted


# ------------------------------------------------------------------ the sampler alone


def _sample(sampler: Sampler, call: SampleCall, tenant: str = "t") -> list[dict[str, Any]]:
    return asyncio.run(sampler.sample(tenant, call))


@pytest.fixture
def sampler() -> Iterator[Sampler]:
    made = Sampler(processes=2, timeout_s=TIMEOUT_S, memory_mb=4096)
    yield made
    made.close()


def test_entries_come_from_a_child_as_the_library_makes_them(sampler: Sampler) -> None:
    entries = _sample(sampler, _call("gcd", {}, count=3))
    assert [e["index"] for e in entries] == [0, 1, 2]
    assert entries[0]["messages"][1]["content"] == entries[0]["question"]
    with pytest.raises(InvalidReference) as refused:
        _sample(sampler, _call("gcd", {"no_such_field": 1}))
    assert refused.value.code == "invalid_config"


def test_a_slow_config_is_cut_off_at_the_item_timeout() -> None:
    quick = Sampler(processes=1, timeout_s=1.0, memory_mb=4096)
    try:
        with pytest.raises(InvalidReference, match="item_timeout_s") as refused:
            _sample(quick, _call("game_of_life", SLOW, SLOW_COUNT))
        assert refused.value.code == "sample_timeout"
        assert _sample(quick, _call("gcd", {}))  # the slot came back
    finally:
        quick.close()


def test_output_over_the_cap_is_refused(sampler: Sampler, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sampling, "MAX_SAMPLE_BYTES", 64 * 1024)
    with pytest.raises(InvalidReference, match="MiB encoded") as refused:
        _sample(sampler, _call("spiral_matrix", {"min_n": 60, "max_n": 60}, count=8))
    assert refused.value.code == "sample_too_large"


def test_memory_past_the_limit_is_the_configs_fault() -> None:
    # The child's address space is capped; a Tower of Hanoi of 20 disks (a million moves, each
    # a line of the answer) needs more than the child has beyond what it starts with.
    tight = Sampler(processes=1, timeout_s=120.0, memory_mb=_child_baseline_mb() + 32)
    try:
        with pytest.raises(InvalidReference, match="worker_memory_mb") as refused:
            _sample(tight, _call("tower_of_hanoi", {"min_disks": 20, "max_disks": 20}, count=8))
        assert refused.value.code == "sample_too_large"
    finally:
        tight.close()


def _child_baseline_mb() -> int:
    """The address space a sampling child starts with (what the fork server has loaded)."""
    probe = Sampler(processes=1, timeout_s=60.0, memory_mb=1 << 20)
    try:
        _sample(probe, _call("gcd", {}))  # starts the fork server with its preload
        context = multiprocessing.get_context("forkserver")
        reader, writer = context.Pipe(duplex=False)
        child = context.Process(target=_report_vm_size, args=(writer,))
        child.start()
        writer.close()
        size_kb = int(reader.recv())
        child.join()
        return size_kb // 1024
    finally:
        probe.close()


def _report_vm_size(conn: Any) -> None:
    with open("/proc/self/status") as status:
        line = next(x for x in status if x.startswith("VmSize:"))
    conn.send(line.split()[1])


def test_cancelling_a_call_kills_its_child(sampler: Sampler) -> None:
    async def scenario() -> set[int]:
        before = descendants(os.getpid())  # the fork server is a child of this process
        task = asyncio.ensure_future(sampler.sample("t", _call("game_of_life", SLOW, SLOW_COUNT)))
        while len(descendants(os.getpid())) <= len(before):
            await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return descendants(os.getpid()) - before

    _sample(sampler, _call("gcd", {}))  # the fork server is up
    assert asyncio.run(scenario()) == set()  # the slot is freed only once the child is gone


def test_slots_are_shared_round_robin_across_tenants() -> None:
    async def scenario() -> list[str]:
        slots = FairSlots(1)
        order: list[str] = []
        release = asyncio.Event()

        async def use(tenant: str, name: str) -> None:
            async with slots.hold(tenant):
                order.append(name)
                await release.wait()

        first = asyncio.ensure_future(use("a", "a1"))
        await asyncio.sleep(0)
        rest = [asyncio.ensure_future(use(t, n)) for t, n in
                [("a", "a2"), ("a", "a3"), ("b", "b1")]]  # fmt: skip
        await asyncio.sleep(0)
        gone = asyncio.ensure_future(use("c", "c1"))
        await asyncio.sleep(0)
        gone.cancel()  # a waiter that leaves takes no slot with it
        release.set()
        await asyncio.gather(first, *rest)
        return order

    assert asyncio.run(scenario()) == ["a1", "a2", "b1", "a3"]


# ------------------------------------------------------------------ through a real server


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    env = proctor_env(None)
    env.update(
        PROCTOR_API_KEYS=f"{KEY_A},{KEY_B}",
        PROCTOR_ITEM_TIMEOUT_S=str(TIMEOUT_S),
        PROCTOR_SAMPLE_PROCESSES="2",
    )
    port = free_port()
    log = tmp_path_factory.mktemp("sampling") / "serve.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "service.cli", "serve", "--port", str(port), "--workers", "1",
             "--log-level", "info"],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        poll(lambda: status_of(url + "/readyz") == 200 or process.poll() is not None, 180)
        assert process.poll() is None, log.read_text()[-2000:]
        yield url, log
    finally:
        process.terminate()
        process.wait(timeout=60)


def _headers(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def _sample_http(url: str, key: str, task: str, config: dict[str, Any], **kw: Any) -> Any:
    return httpx.post(
        f"{url}/v1/puzzles/{task}/sample",
        json={"config": config, "count": kw.get("count", 1)},
        headers=_headers(key),
        timeout=kw.get("timeout", 120),
    )


def test_hostile_configs_are_refused_or_cut_off_while_others_are_answered(
    served: tuple[str, Path],
) -> None:
    url, _ = served
    refused = _sample_http(url, KEY_A, "spiral_matrix", {"min_n": 1500, "max_n": 1500})
    assert refused.status_code == 422
    assert refused.json()["error"]["code"] == "config_too_large"

    finished: list[tuple[str, int, Any]] = []
    lock = threading.Lock()

    def flood() -> None:
        response = _sample_http(url, KEY_A, "game_of_life", SLOW, count=SLOW_COUNT)
        with lock:
            finished.append(("a", response.status_code, response.json()))

    flooders = [threading.Thread(target=flood) for _ in range(4)]  # twice the processes
    for thread in flooders:
        thread.start()
    poll(lambda: _sampling_children(url) >= 2, 60)
    score = httpx.post(
        url + "/v1/score",
        json={"items": [MATH]},
        headers=_headers(KEY_B),
        timeout=60,
    )
    with lock:
        assert not finished, "A's calls ended before B was answered"
    assert score.status_code == 200 and score.json()["results"][0]["score"] == 1.0
    for path in ("/readyz", "/metrics"):
        assert httpx.get(url + path, headers=_headers(KEY_B), timeout=60).status_code == 200
    cheap = _sample_http(url, KEY_B, "gcd", {})  # waits for one slot, not for A's flood
    with lock:
        a_done = len(finished)
    assert cheap.status_code == 200 and len(cheap.json()["entries"]) == 1
    assert a_done < len(flooders)
    for thread in flooders:
        thread.join()
    assert {status for _, status, _ in finished} == {422}
    assert {body["error"]["code"] for _, _, body in finished} == {"sample_timeout"}


def test_a_client_that_goes_away_takes_its_sampling_with_it(served: tuple[str, Path]) -> None:
    url, log = served
    with pytest.raises(httpx.ReadTimeout):
        _sample_http(url, KEY_A, "game_of_life", SLOW, count=SLOW_COUNT, timeout=1.0)
    poll(lambda: "puzzle sampling abandoned" in log.read_text(), 30)
    poll(lambda: _sampling_children(url) == 0, 30)
    assert "Traceback" not in log.read_text()


def _sampling_children(url: str) -> int:
    """Sampling calls holding a child process (a slot is freed once its child is reaped)."""
    text = httpx.get(url + "/metrics", headers=_headers(KEY_B), timeout=30).text
    for line in text.splitlines():
        if line.startswith("proctor_sampling_running "):
            return int(float(line.split()[1]))
    raise AssertionError("no proctor_sampling_running metric")


def test_queue_mode_samples_in_children_of_the_api_host(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    # No worker pool in this API process: the fork server is the sampler's own.
    env = {"PROCTOR_ITEM_TIMEOUT_S": str(TIMEOUT_S)}
    process, url = serve_queue(redis_server.url, tmp_path / "serve.log", None, env)
    try:
        sampled = httpx.post(f"{url}/v1/puzzles/gcd/sample", json={"count": 2}, timeout=120)
        assert sampled.status_code == 200, sampled.text
        assert [e["index"] for e in sampled.json()["entries"]] == [0, 1]
        slow = httpx.post(
            f"{url}/v1/puzzles/game_of_life/sample",
            json={"config": SLOW, "count": SLOW_COUNT},
            timeout=120,
        )
        assert slow.status_code == 422 and slow.json()["error"]["code"] == "sample_timeout"
    finally:
        process.terminate()
        process.wait(timeout=60)
