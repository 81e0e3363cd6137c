"""`ProctorClient.run` and `AsyncProctorClient.run` against a real server and sandbox: a typed
result, and a tool-use rollout's loop (docs/api.md, "Tool-use rollouts"): a scripted policy
writes a program, runs it on a sample, reads the output, fixes its bug, and the fixed program is
then scored."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from proctor_client import AsyncProctorClient, ProctorClient, ProctorError, RunResult
from tests.helpers import Server, running_server
from tests.sandbox_fixtures import sandbox_settings

KEY = "proctor-run-sdk-key-0001"

SAMPLE_IN, SAMPLE_OUT = "3\n1 2 3\n", "6\n"
DRAFTS = [
    # turn 1: forgets to convert the numbers
    "n = int(input())\nprint(sum(input().split()))\n",
    # turn 2: converts, but drops the last number
    "n = int(input())\nxs = list(map(int, input().split()))\nprint(sum(xs[:-1]))\n",
    # turn 3: right
    "n = int(input())\nxs = list(map(int, input().split()))\nprint(sum(xs))\n",
]


@pytest.fixture(scope="module")
def server(request: pytest.FixtureRequest) -> Iterator[Server]:
    request.getfixturevalue("local_backend")  # skips, or fails in CI, without bubblewrap
    sandbox = sandbox_settings("local", pool_size=2)
    with running_server(workers=1, api_keys=(KEY,), sandbox=sandbox) as srv:
        yield srv


def _policy(turn: int, feedback: str | None) -> str:
    """A stand-in for the model: its next draft, given what the last run printed."""
    assert (turn == 0) == (feedback is None)
    return DRAFTS[turn]


def test_a_multi_turn_tool_loop_through_the_sdk(server: Server) -> None:
    transcript: list[RunResult] = []
    with ProctorClient(server.url, api_key=KEY) as proctor:
        feedback = None
        for turn in range(len(DRAFTS)):
            code = _policy(turn, feedback)
            result = proctor.run("python", code, stdin=SAMPLE_IN)
            transcript.append(result)
            if result.status == "ok" and result.stdout == SAMPLE_OUT:
                break
            feedback = f"status={result.status}\nstdout={result.stdout}\nstderr={result.stderr}"
        answer = f"```python\n{code}```"
        reference = {
            "language": "python",
            "tests": {
                "stdio": [
                    {"input": SAMPLE_IN, "output": SAMPLE_OUT},
                    {"input": "1\n-4\n", "output": "-4\n"},
                ]
            },
        }
        (scored,) = proctor.score([{"domain": "code", "response": answer, "reference": reference}])
    assert [r.status for r in transcript] == ["error", "ok", "ok"]
    assert "TypeError" in transcript[0].stderr
    assert [r.stdout for r in transcript[1:]] == ["3\n", "6\n"]
    assert scored.status == "ok" and scored.score == 1.0


def test_the_async_client_runs_and_asks_for_less(server: Server) -> None:
    async def main() -> tuple[RunResult, RunResult]:
        async with AsyncProctorClient(server.url, api_key=KEY) as proctor:
            fast = await proctor.run("python", "print(input()[::-1])", stdin="abc")
            spin = await proctor.run("python", "while True: pass", cpu_s=0.2)
            return fast, spin

    fast, spin = asyncio.run(main())
    assert (fast.status, fast.stdout, fast.exit_code, fast.error) == ("ok", "cba\n", 0, None)
    assert spin.status == "timeout" and spin.cpu_s < 5


def test_a_malformed_run_raises_naming_the_field(server: Server) -> None:
    with ProctorClient(server.url, api_key=KEY) as proctor, pytest.raises(ProctorError) as raised:
        proctor.run("python", "print(1)", files={"../escape": "x"})
    assert raised.value.status_code == 422
    assert "files" in str(raised.value)
