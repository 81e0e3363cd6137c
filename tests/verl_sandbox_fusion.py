"""Run in the verl venv (tests/run builds it, PROCTOR_VERL_PYTHON) by tests/test_compat_clients.py:
verl 0.9.1's own SandboxFusion reward code (`verl.utils.reward_score.sandbox_fusion`) against URL
(argv[1], ending in /run_code), one JSON line per case of argv[2] (a JSON list of
{completion, test_cases, language?, timeout?, continuous?}). Also the call verl's
`SandboxFusionTool` makes for a tool call (`_process_single_case` with its 30 s timeout, no
expected output): its reply is stdout + stderr."""

from __future__ import annotations

import json
import sys

from verl.utils.reward_score.sandbox_fusion import compute_score
from verl.utils.reward_score.sandbox_fusion.utils import _process_single_case, check_correctness


def main() -> None:
    url = sys.argv[1]
    for case in json.loads(sys.argv[2]):
        if case.get("language", "python") == "python":
            score, metadata = compute_score(
                url, None, 1024, case["completion"], case["test_cases"],
                continuous=case.get("continuous", False), timeout=case.get("timeout", 10),
            )  # fmt: skip
            statuses = [m.get("status") for m in metadata]
            print(json.dumps({"score": score, "statuses": statuses}), flush=True)
        else:  # compute_score extracts Python only: the language goes to check_correctness
            results, metadata = check_correctness(
                url, case["test_cases"], case["completion"], timeout=case.get("timeout", 10),
                language=case["language"],
            )  # fmt: skip
            print(json.dumps({"results": results, "statuses": [m["status"] for m in metadata]}))
    # SandboxFusionTool.execute_code (verl/tools/sandbox_fusion_tools.py of earlier releases;
    # 0.9.1 has no such file, in its wheel or its sdist), line for line: the reply is stdout +
    # stderr of a finished run, from the same `_process_single_case` 0.9.1 still ships.
    status, metadata = _process_single_case(
        0, None, None, url, "import sys\nprint('out')\nprint('err', file=sys.stderr)", 30, 1024,
        "python",
    )  # fmt: skip
    finished = metadata["run_status"] == "Finished"
    reply = metadata["stdout"] + metadata["stderr"] if finished else "no stdout here"
    print(json.dumps({"tool_status": status, "tool_reply": reply}), flush=True)


if __name__ == "__main__":
    main()
