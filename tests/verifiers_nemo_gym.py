"""Reward rows with Prime Intellect's verifiers 0.4.0 NeMo-Gym taskset against a resource server,
driven by given completions instead of a model (run in the verifiers venv tests/run builds:
`PROCTOR_VERIFIERS_PYTHON`; tests/test_nemo_gym_route.py runs it).

argv[1] is a JSON object: `resources_url`, `headers`, `rows` (the dataset, written to a JSONL
file the taskset loads) and `completions` (per row, `content` and optionally `reasoning`). Each
task runs as a rollout ends: the taskset's own `setup` (POST seed_session), then `Task.score`,
whose `@reward` converts the trace with verifiers' own converter and POSTs verify. One JSON line
per row: `reward`, `metrics` and `info`, or `error` with the HTTP `status` when it raised.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx
from verifiers.v1.configs.agent import AgentConfig
from verifiers.v1.graph import MessageNode
from verifiers.v1.tasksets.nemo_gym import NeMoGymConfig, NeMoGymTaskConfig, NeMoGymTaskset
from verifiers.v1.tasksets.nemo_gym.toolset import NeMoGymState
from verifiers.v1.trace import AgentInfo, Trace, TraceTask
from verifiers.v1.types import AssistantMessage


def rollout(task: Any, completion: dict[str, Any]) -> Trace:
    """The trace a policy that answered `completion` leaves: the prompt, then one sampled turn."""
    nodes = [
        MessageNode(message=m, parent=i - 1 if i else None) for i, m in enumerate(task.data.prompt)
    ]
    answer = AssistantMessage(
        content=completion["content"], reasoning_content=completion.get("reasoning")
    )
    nodes.append(MessageNode(parent=len(nodes) - 1, message=answer, sampled=True))
    return Trace(
        task=TraceTask(type=type(task).__name__, data=task.data),
        agent=AgentInfo(config=AgentConfig()),
        nodes=nodes,
        state=NeMoGymState(),
    )


async def reward(task: Any, completion: dict[str, Any]) -> dict[str, Any]:
    trace = rollout(task, completion)
    try:
        await task.setup(trace, None)
        await task.score(trace)
    except Exception as exc:  # the taskset raised: report what the HTTP answer was
        cause: BaseException | None = exc
        while cause is not None and not isinstance(cause, httpx.HTTPStatusError):
            cause = cause.__cause__ or cause.__context__
        status = cause.response.status_code if isinstance(cause, httpx.HTTPStatusError) else None
        return {"error": type(exc).__name__, "status": status, "message": str(exc)[:500]}
    return {"reward": trace.reward, "metrics": trace.metrics, "info": trace.info.get("nemo_gym")}


async def main(spec: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        dataset = Path(tmp) / "rows.jsonl"
        dataset.write_text("\n".join(json.dumps(row) for row in spec["rows"]), encoding="utf-8")
        config = NeMoGymConfig(
            dataset=dataset,
            task=NeMoGymTaskConfig(resources_url=spec["resources_url"], headers=spec["headers"]),
        )
        tasks = list(NeMoGymTaskset(config).load())
        for task, completion in zip(tasks, spec["completions"], strict=True):
            print(json.dumps(await reward(task, completion)), flush=True)


if __name__ == "__main__":
    asyncio.run(main(json.loads(sys.argv[1])))
