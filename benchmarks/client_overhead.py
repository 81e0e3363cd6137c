"""What the client side costs: the SDK against one direct POST, and Proctor's TRL reward function
against TRL's in-process math-verify reward, in one run.

  (1) 4,096 math items (math_throughput's responses) against one `proctor serve` started here:
      (a) one `POST /v1/score` of all items through `http.client`, JSON encoding and decoding
          included; (b) `ProctorClient.score()` with its defaults (chunks of 4,096, four at once,
          typed results). Rounds alternate a, b after a warm-up of each, so the server's verdict
          memo is equally warm for both; medians. Target: (b) within 5% of (a). Each call starts
          from a settled collector (`gc.collect()` first, untimed): a full collection walks the
          whole heap of the caller, which here is small enough for one every few calls (a
          trainer's is not); the same rounds with the collector's state carried over, and how
          many collections each call set off, are printed beside, and so is this process's
          CPU time per settled call on each side (the client's own cost, which the machine's
          load moves far less than it moves the wall time).
  (2) one GRPO step of 256 prompts x 16 completions, as TRL calls its rewards: (c) Proctor's
      async reward function awaited on TRL's reward event loop (`trl.trainer.utils`), (d)
      `trl.rewards.accuracy_reward`, math-verify in the trainer's own thread, which is what TRL
      users run today. Prints the seconds the step spends in each, and the ratio.

Exits non-zero if (a) and (b) differ in any result, or an item is not `ok`. `--short` (or
PROCTOR_SHORT=1): 512 items and a 32 x 16 step, one round.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from _served import proctor_server, timed_score
from math_throughput import PROBLEMS, PROSE, make_cases

sys.path.insert(0, str(Path(__file__).parent.parent / "clients"))

from proctor_client import ProctorClient
from proctor_client.trl import reward_func


class Collections:
    """Counts the collector's passes per generation while a call runs (`gc.callbacks`)."""

    def __init__(self) -> None:
        self.counts = [0, 0, 0]
        gc.callbacks.append(self._seen)

    def _seen(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self.counts[info["generation"]] += 1

    def reset(self, settle: bool) -> None:
        if settle:
            gc.collect()
        self.counts = [0, 0, 0]


CPU: dict[str, list[float]] = {"a": [], "b": []}
"""This process's CPU seconds per settled call, by side: the client's own cost, which the
machine's load moves far less than the wall time."""


def direct(url: str, items: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], float]:
    started, cpu = time.perf_counter(), time.process_time()
    results, _ = timed_score(url, json.dumps({"items": items}))
    CPU["a"].append(time.process_time() - cpu)
    return results, time.perf_counter() - started


def through_sdk(client: ProctorClient, items: list[dict[str, Any]]) -> tuple[list[Any], float]:
    started, cpu = time.perf_counter(), time.process_time()
    results = client.score(items)
    CPU["b"].append(time.process_time() - cpu)
    return results, time.perf_counter() - started


def grpo_step(groups: int, size: int, seed: int = 1) -> tuple[list[str], list[str]]:
    """`groups` prompts' golds and `size` completions each: a few KB of reasoning, then a boxed
    answer that is the gold, an equivalent form or a wrong one (integers for 55% of prompts)."""
    rng = random.Random(seed)
    golds, completions = [], []
    for _ in range(groups):
        if rng.random() < 0.55:
            value = rng.randint(0, 999)
            gold, right, wrong = str(value), [str(value)], [str(value + d) for d in (-2, -1, 1, 3)]
        else:
            gold, equivalent, wrong = rng.choice(PROBLEMS)
            right = [gold, *equivalent]
        for _ in range(size):
            reasoning = " ".join(rng.choice(PROSE) for _ in range(rng.randint(12, 40)))
            answer = rng.choice(right) if rng.random() < 0.5 else rng.choice(wrong)
            golds.append(gold)
            completions.append(f"{reasoning}\n\nSo the final answer is $\\boxed{{{answer}}}$.")
    return golds, completions


def trl_async_call(url: str, golds: list[str], completions: list[str]) -> tuple[list[Any], float]:
    """Proctor's reward, called the way GRPOTrainer calls an async reward function."""
    import asyncio

    from trl.trainer.utils import start_event_loop_in_daemon

    _thread, loop, ready = start_event_loop_in_daemon(name="GRPOTrainer-AsyncLoop")
    ready.wait()
    reward = reward_func(url, domain="math", reference="solution")
    metrics: dict[str, float] = {}

    def log_metric(name: str, value: float) -> None:
        metrics[name] = value

    def call() -> Any:
        return reward(
            prompts=["p"] * len(completions),
            completions=completions,
            completion_ids=None,
            solution=golds,
            trainer_state=None,
            log_metric=log_metric,
            log_extra=lambda column, values: None,
        )

    asyncio.run_coroutine_threadsafe(call(), loop).result()  # warm: connections, server memo
    started = time.perf_counter()
    rewards = asyncio.run_coroutine_threadsafe(call(), loop).result()
    elapsed = time.perf_counter() - started
    asyncio.run_coroutine_threadsafe(reward.aclose(), loop).result()
    loop.call_soon_threadsafe(loop.stop)
    return rewards, elapsed


def trl_in_process(golds: list[str], completions: list[str]) -> tuple[list[Any], float]:
    from trl.rewards import accuracy_reward

    conversational = [[{"role": "assistant", "content": c}] for c in completions]
    started = time.perf_counter()
    rewards = accuracy_reward(conversational, golds)
    return rewards, time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--short", action="store_true", help="512 items, a 32 x 16 step (CI)")
    parser.add_argument("--rounds", type=int, default=None)
    args = parser.parse_args()
    short = args.short or os.environ.get("PROCTOR_SHORT") == "1"
    n, groups = (512, 32) if short else (4096, 256)
    rounds = args.rounds or (1 if short else 5)
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    print(f"load average at start: {os.getloadavg()}")

    items = [
        {"domain": "math", "response": c.response, "reference": {"answer": c.gold}}
        for c in make_cases(n)
    ]
    golds, completions = grpo_step(groups, 16)
    failures = 0
    collections = Collections()
    times: dict[tuple[bool, str], list[float]] = {}
    full_passes: dict[tuple[bool, str], int] = {}
    with proctor_server() as url, ProctorClient(url) as client:
        reference, _ = direct(url, items)
        through_sdk(client, items)
        CPU["a"].clear()
        CPU["b"].clear()
        for settle in (True,) * rounds + (False,) * rounds:
            collections.reset(settle)
            results_a, took = direct(url, items)
            times.setdefault((settle, "a"), []).append(took)
            full_passes[settle, "a"] = full_passes.get((settle, "a"), 0) + collections.counts[2]
            collections.reset(settle)
            results_b, took = through_sdk(client, items)
            times.setdefault((settle, "b"), []).append(took)
            full_passes[settle, "b"] = full_passes.get((settle, "b"), 0) + collections.counts[2]
            keep = ("status", "reward", "score", "success", "parsed", "penalties", "details")
            plain_b = [r.model_dump(include=set(keep)) for r in results_b]
            plain_a = [{k: r[k] for k in keep} for r in results_a]
            differ = sum(a != b for a, b in zip(plain_a, plain_b, strict=True))
            not_ok = sum(r["status"] != "ok" for r in results_a)
            if differ or not_ok or plain_a != [{k: r[k] for k in keep} for r in reference]:
                print(f"results differ: {differ} between (a) and (b); {not_ok} not ok")
                failures += 1
        rewards_c, step_c = trl_async_call(url, golds, completions)

    print(f"load average after (1): {os.getloadavg()}")
    rewards_d, step_d = trl_in_process(golds, completions)
    a, b = statistics.median(times[True, "a"]), statistics.median(times[True, "b"])
    print(f"(1) {n} math items, median of {rounds} rounds, each call from a settled collector")
    print(f"(a) one POST /v1/score (http.client):  {n / a:8.1f} items/s  ({a * 1000:.0f} ms)")
    print(f"(b) ProctorClient.score():             {n / b:8.1f} items/s  ({b * 1000:.0f} ms)")
    print(f"SDK overhead (b)/(a) - 1: {100 * (b / a - 1):+.1f}% (target under 5%)")
    cpu_a, cpu_b = (statistics.median(CPU[m][:rounds]) for m in "ab")
    print(
        f"client CPU per settled call: (a) {cpu_a * 1000:.0f} ms, (b) {cpu_b * 1000:.0f} ms, "
        f"{100 * (cpu_b / cpu_a - 1):+.1f}%"
    )
    carried_a, carried_b = (statistics.median(times[False, m]) for m in "ab")
    print(
        f"collector carried over: (a) {carried_a * 1000:.0f} ms, (b) {carried_b * 1000:.0f} ms, "
        f"{100 * (carried_b / carried_a - 1):+.1f}%; full collections in {rounds} calls: "
        f"(a) {full_passes[False, 'a']}, (b) {full_passes[False, 'b']}"
    )
    skipped = sum(r is None for r in rewards_d)
    differ = sum(c != d for c, d in zip(rewards_c, rewards_d, strict=True) if d is not None)
    print(f"(2) TRL reward call, one {groups} x 16 step ({len(completions)} completions)")
    print(f"(c) Proctor, async on TRL's reward loop: {step_c:7.2f} s")
    print(f"(d) accuracy_reward, math-verify in TRL's thread: {step_d:7.2f} s")
    print(f"ratio (d)/(c): {step_d / step_c:.1f}x less time in the reward with Proctor")
    print(
        f"rewards: (c) none missing: {all(r is not None for r in rewards_c)}; "
        f"(d) skipped {skipped}; differing where both judged: {differ}"
    )
    return 1 if failures or any(r is None for r in rewards_c) else 0


if __name__ == "__main__":
    sys.exit(main())
