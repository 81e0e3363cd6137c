"""Free-form answers judged by a model: the judge domain against one plain judge call per response.

The workload is a GRPO step of free-form items: 256 questions, 16 responses each (4,096 items),
each response's reasoning its own but its final answer one of about three per question (the
reference, or one of two wrong answers), as a policy's group repeats itself. Both sides ask the
same scripted OpenAI-compatible judge (tests/scripted_judge.py: a real HTTP server in this
process), which answers after a fixed 50 ms with at most 64 requests in service at once (its
slots; the rest wait), and with `[[A=B]]` exactly when the two answers it is shown are equal.

(a) the baseline: one chat completion per response, the built-in spec's template filled with the
    question, the reference and the response's extracted answer (one order), sent with the
    `openai` client (httpx where it is not installed) from `--concurrency` threads, then again
    from 64 threads (the judge's slots: the most a caller can use);
(b) ours: the 4,096 items in one `POST /v1/score` under `free-form-judge-1` (both orders asked)
    to a fresh `proctor serve` with `--workers` worker processes (judge calls run in the
    workers, one item at a time each: `--workers` calls in flight, the same concurrency as (a)'s
    first run) and `PROCTOR_JUDGE_ENDPOINTS` pointing at the scripted judge.

Reports the judge calls each made, the wall time and the ratios. Exits non-zero if an item of (b)
is not `ok` or its score differs from (a)'s verdict.
`--short` (or PROCTOR_SHORT=1): 32 questions (512 items).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the scripted judge is the tests'

from _served import proctor_server, timed_score

from reward_specs import default_registry, load_specs
from reward_specs.extract import extract_answer
from reward_specs.judge.domain import JudgeConfig, render
from tests.scripted_judge import ScriptedJudge, equivalence_judge, scripted_judge

SPEC = "free-form-judge-1"
RESPONSES_PER_QUESTION = 16
LATENCY_S = 0.05
SLOTS = 64
NOUNS = ["carbon dioxide", "the mitochondrion", "Avogadro's number", "a prime", "the Krebs cycle"]


@dataclass(frozen=True)
class Case:
    question: str
    reference: str
    response: str
    answer: str


def workload(questions: int) -> list[Case]:
    """`questions` x 16 responses; each response's answer is the reference (about half), or one
    of two wrong answers of its question."""
    cases = []
    for q in range(questions):
        reference = f"{NOUNS[q % len(NOUNS)]} {q}"
        answers = [reference, f"{NOUNS[(q + 1) % len(NOUNS)]} {q}", f"not {reference}"]
        for r in range(RESPONSES_PER_QUESTION):
            answer = answers[0] if r % 2 == 0 else answers[1 + (r // 2) % 2]
            response = (
                f"Step {r}: let me think about question {q} in my own words ({r * 7919 % 1000}).\n"
                f"So the answer is \\boxed{{{answer}}}."
            )
            cases.append(Case(f"Question {q}: what is thing {q}?", reference, response, answer))
    return cases


def slow_judge(slots: threading.BoundedSemaphore) -> Any:
    def script(prompt: str) -> tuple[int, str]:
        with slots:
            time.sleep(LATENCY_S)
        return equivalence_judge(prompt)

    return script


def config() -> JudgeConfig:
    judge = load_specs(default_registry())[SPEC].config("judge")
    assert isinstance(judge, JudgeConfig)
    return judge


def baseline_call(client: Any, url: str, case: Case, judge: JudgeConfig) -> float:
    """One chat completion for one response, as a trainer's reward function makes it: the
    extracted answer in the template, one order; 1.0 when the reply's last line is the yes."""
    answer, _ = extract_answer(case.response, judge.fallbacks)
    prompt = render(
        judge.template,
        {"question": case.question, "reference": case.reference, "answer": answer or ""},
    )
    messages = [{"role": "user", "content": prompt}]
    args = {"model": judge.model, "max_tokens": judge.max_tokens, "temperature": 0.0}
    if hasattr(client, "chat"):
        completion = client.chat.completions.create(messages=messages, **args)
        text = completion.choices[0].message.content or ""
    else:
        reply = client.post(url + "/chat/completions", json={"messages": messages, **args})
        reply.raise_for_status()
        text = reply.json()["choices"][0]["message"]["content"] or ""
    lines = text.strip().splitlines()
    return 1.0 if lines and lines[-1].strip() == "[[A=B]]" else 0.0


def baseline(
    cases: list[Case], judge_server: ScriptedJudge, concurrency: int
) -> tuple[list[float], float, str]:
    judge = config()
    try:
        import openai

        client: Any = openai.OpenAI(
            base_url=judge_server.url, api_key="none", max_retries=0, timeout=60
        )
        kind = f"openai {openai.__version__}"
    except ImportError:
        import httpx

        client = httpx.Client(timeout=60, limits=httpx.Limits(max_connections=concurrency))
        kind = "httpx"
    with ThreadPoolExecutor(concurrency) as pool:
        started = time.perf_counter()
        scores = list(pool.map(lambda c: baseline_call(client, judge_server.url, c, judge), cases))
        elapsed = time.perf_counter() - started
    client.close()
    return scores, elapsed, kind


def ours(cases: list[Case], judge_server: ScriptedJudge, workers: int) -> tuple[list[Any], float]:
    endpoints = {"judge": {"url": judge_server.url, "max_concurrency": SLOTS, "timeout_s": 60}}
    env = {"PROCTOR_JUDGE_ENDPOINTS": json.dumps(endpoints), "PROCTOR_WORKERS": str(workers)}
    items = [
        {
            "domain": "judge",
            "response": c.response,
            "reference": {"question": c.question, "answer": c.reference},
        }
        for c in cases
    ]
    with proctor_server(env) as url:
        del judge_server.asked[:]  # the start-up probe is no judge call
        return timed_score(url, json.dumps({"items": items, "spec": SPEC}))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--short", action="store_true")
    parser.add_argument("--questions", type=int, default=256)
    parser.add_argument(
        "--workers", type=int, default=16, help="(b)'s worker processes and (a)'s first threads"
    )
    args = parser.parse_args()
    questions = 32 if args.short or os.environ.get("PROCTOR_SHORT") else args.questions
    cases = workload(questions)
    distinct = len({(c.question, c.answer) for c in cases})
    print(
        f"{len(cases)} items, {questions} questions x {RESPONSES_PER_QUESTION} responses, "
        f"{distinct} distinct answers; judge {LATENCY_S * 1000:.0f} ms, {SLOTS} slots"
    )
    slots = threading.BoundedSemaphore(SLOTS)
    with scripted_judge(slow_judge(slots)) as judge_server:
        rows = []
        for concurrency in dict.fromkeys([args.workers, SLOTS]):
            del judge_server.asked[:]
            scores, base_s, kind = baseline(cases, judge_server, concurrency)
            rows.append((concurrency, len(judge_server.asked), base_s))
            print(
                f"(a) one call per response ({kind}), {concurrency:3} threads: "
                f"{len(judge_server.asked):6} calls, {base_s:7.2f} s, "
                f"{len(cases) / base_s:8.1f} items/s"
            )
        results, ours_s = ours(cases, judge_server, args.workers)
        our_calls = len(judge_server.asked)
    print(
        f"(b) POST /v1/score, {SPEC}, both orders, {args.workers} workers: {our_calls:6} calls, "
        f"{ours_s:7.2f} s, {len(cases) / ours_s:8.1f} items/s"
    )
    for concurrency, calls, base_s in rows:
        print(
            f"    against (a) at {concurrency} threads: calls {calls / max(our_calls, 1):.2f}x "
            f"fewer, wall {base_s / ours_s:.2f}x"
        )
    wrong = [
        f"item {i}: {r['status']} {r.get('score')} {r.get('reason') or r.get('error')}"
        for i, (r, s) in enumerate(zip(results, scores, strict=True))
        if r["status"] != "ok" or r["score"] != s
    ]
    if wrong:
        print(f"{len(wrong)} verdicts differ from the baseline's:", *wrong[:10], sep="\n  ")
        return 1
    print(f"every verdict agreed ({sum(scores):.0f} of {len(cases)} right)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
