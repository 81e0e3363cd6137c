"""Run inside verifiers 0.4's own environment (a separate venv: its pins clash with the
server's): full rollouts of a v1 task that mixes in `ProctorTask`, through verifiers' own
machinery. A `SingleAgentEnv` plays each task: its agent provisions a subprocess runtime, starts
verifiers' chat program there, which asks the model through the rollout's interception server;
that server relays the request to the model endpoint (`policy_url`, a scripted policy the test
runs), records the reply and its model call on the trace; then the task's `@vf.reward` runs,
which is Proctor (at `PROCTOR_URL`). Prints one JSON line per task: the rewards, metrics, stop
condition, recorded model call and the errors of its rollout.

    python tests/verifiers_task.py SPEC_JSON

SPEC is `{"policy_url", "model", "max_tokens", "rows": [{"prompt", "answer", "domain"?}]}`.

This module is also the taskset plugin verifiers loads by id (`verifiers_task`): it exports the
taskset and the harness it runs with. The harness is verifiers' `null` harness (a tool-less chat
loop) with one step changed: its program runs on this venv's interpreter, which holds the
program's declared dependencies, where every built-in harness has `uv sync --script` download them
(`Runtime.prepare_uv_script` in verifiers/v1/runtimes/base.py), which needs the network.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from typing import Any

import verifiers.v1 as vf
from pydantic import Field
from verifiers.v1.harnesses.null import NullHarness
from verifiers.v1.harnesses.utils.launch import CHAT_PROGRAM_SOURCE

from proctor_client._judged import aclose
from proctor_client.verifiers import ProctorTask

__all__ = ["InstalledChatHarness", "ProctorTaskset"]

PLUGIN_ID = "verifiers_task"


class ProctorData(vf.TaskData):
    answer: str
    domain: str | None = None


class ProctorMathTask(ProctorTask, vf.Task[ProctorData]):
    infra_retries = 1


class RowsConfig(vf.TasksetConfig):
    rows: list[dict[str, Any]] = Field(default_factory=list)


class ProctorTaskset(vf.Taskset[ProctorMathTask, RowsConfig]):
    def load(self) -> Iterator[ProctorMathTask]:
        for row in self.config.rows:
            yield ProctorMathTask(ProctorData(**row), self.config.task)


class InstalledChatHarness(NullHarness):
    """The `null` harness's chat program, run by this interpreter (nothing to provision)."""

    async def setup(self, runtime: vf.Runtime) -> None:
        pass

    async def launch(
        self,
        ctx: vf.ModelContext,
        trace: vf.Trace,
        runtime: vf.Runtime,
        endpoint: str,
        secret: str,
        mcp_urls: dict[str, str],
        data: vf.TaskData,
        tool_interception_url: str | None = None,
    ) -> vf.ProgramResult:
        system_prompt, prompt = self.resolve_text_prompt(data)
        await runtime.write("chat_program.py", CHAT_PROGRAM_SOURCE.encode())
        argv = [sys.executable, "chat_program.py", f"--base-url={endpoint}",
                f"--api-key={secret}", f"--model={ctx.model}", f"--prompt={prompt}"]  # fmt: skip
        if system_prompt:
            argv.append(f"--system-prompt={system_prompt}")
        if tool_interception_url:
            argv.append(f"--tool-interception-url={tool_interception_url}")
        return await runtime.run_program(argv, dict(self.config.resolved_env))


def outcome(episode: vf.Episode) -> dict[str, Any]:
    (trace,) = episode.traces
    call = trace.calls[-1] if trace.calls else None
    return {
        "ok": episode.ok,
        "stop": trace.stop_condition,
        "reply": trace.last_reply,
        "truncated": trace.is_truncated,
        "call": call and {
            "finish_reason": call.finish_reason,
            "completion_tokens": call.usage.completion_tokens if call.usage else None,
            "max_tokens": call.sampling.max_tokens if call.sampling else None,
        },
        "rewards": {name: r.score if r else None for name, r in trace.rewards.items()},
        "reward": trace.reward,
        "metrics": trace.metrics,
        "errors": [{"type": e.type, "message": e.message} for e in episode.errors + trace.errors],
    }  # fmt: skip


async def main(spec: dict[str, Any]) -> None:
    config = vf.SingleAgentEnvConfig(
        taskset={"id": PLUGIN_ID, "rows": spec["rows"]},
        agent={"runtime": {"type": "subprocess"}},  # the harness: the taskset's own
    )
    env = vf.SingleAgentEnv(config)
    ctx = vf.ModelContext(
        model=spec["model"],
        client=vf.EvalClientConfig(base_url=spec["policy_url"], api_key_var="POLICY_API_KEY"),
        sampling=vf.Sampling(max_tokens=spec["max_tokens"]),
    )
    try:
        async with env.serving():
            episodes = await asyncio.gather(*(env.run_episode(t, ctx) for t in env.taskset))
        for episode in episodes:
            print(json.dumps(outcome(episode)), flush=True)
    finally:
        await aclose()


if __name__ == "__main__":
    sys.modules[PLUGIN_ID] = sys.modules[__name__]  # verifiers imports its plugins by id
    asyncio.run(main(json.loads(sys.argv[1])))
