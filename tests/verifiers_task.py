"""Run inside verifiers 0.4's own environment (a separate venv: its pins clash with the
server's): score scripted rollouts of a v1 task that mixes in `ProctorTask`, through the task's
own `score(trace)`, the step of a rollout that runs its `@vf.reward` methods. Prints one JSON line
per rollout: its rewards, metrics and stop condition, or the error scoring raised.

    python tests/verifiers_task.py URL ROLLOUTS_JSON

Each rollout is `{"answer", "reply", "finish_reason", "completion_tokens", "max_tokens",
"domain"?}`: the task's data and what the scripted policy replied, with the model call verifiers
records for it.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import verifiers.v1 as vf

from proctor_client._judged import aclose
from proctor_client.verifiers import ProctorTask


class ProctorData(vf.TaskData):
    answer: str
    domain: str | None = None


class ProctorMathTask(ProctorTask, vf.Task[ProctorData]):
    infra_retries = 1


def trace_of(task: ProctorMathTask, rollout: dict[str, Any]) -> vf.Trace:
    """The trace a single-turn rollout leaves: the prompt, the sampled reply, its model call."""
    return vf.Trace(
        task=vf.TraceTask(type=type(task).__name__, data=task.data, hash=task.hash),
        agent=vf.AgentInfo(config=vf.AgentConfig()),
        nodes=[
            vf.MessageNode(message=vf.UserMessage(content="Solve it.")),
            vf.MessageNode(
                parent=0, message=vf.AssistantMessage(content=rollout["reply"]), sampled=True
            ),
        ],
        calls=[
            vf.ModelCall(
                node=1,
                finish_reason=rollout["finish_reason"],
                usage=vf.Usage(prompt_tokens=3, completion_tokens=rollout["completion_tokens"]),
                sampling=vf.Sampling(max_tokens=rollout["max_tokens"]),
            )
        ],
    )


async def main() -> None:
    url, rollouts = sys.argv[1], json.loads(sys.argv[2])
    ProctorMathTask.proctor_url = url
    try:
        for rollout in rollouts:
            data = ProctorData(prompt="Solve it.", answer=rollout["answer"],
                               domain=rollout.get("domain"))  # fmt: skip
            task = ProctorMathTask(data)
            trace = trace_of(task, rollout)
            outcome: dict[str, Any] = {"truncated": trace.is_truncated}
            try:
                await task.score(trace)
                outcome.update(metrics=trace.metrics, reward=trace.reward)
            except Exception as exc:  # what verifiers records on the trace as its error
                outcome.update(error=type(exc).__name__, message=str(exc))
            outcome["rewards"] = {k: r.score if r else None for k, r in trace.rewards.items()}
            print(json.dumps(outcome))
    finally:
        await aclose()


if __name__ == "__main__":
    asyncio.run(main())
