"""Run in the sandbox-fusion venv (tests/run builds it, PROCTOR_SANDBOX_FUSION_PYTHON) by
tests/test_compat_clients.py: the `sandbox-fusion` 0.3.7 client's own `run_code`, `run_jupyter`
and `submit` against ENDPOINT (argv[1]); one JSON line per call, as the client parsed it."""

from __future__ import annotations

import base64
import json
import sys

from sandbox_fusion import (
    RunCodeRequest,
    RunJupyterRequest,
    SubmitRequest,
    TestConfig,
    run_code,
    run_jupyter,
    set_endpoint,
    submit,
    summary_run_code_result,
)
from sandbox_fusion.models import SummaryMapping


def emit(name: str, value: object) -> None:
    print(json.dumps({"call": name, "value": value}), flush=True)


def main() -> None:
    set_endpoint(sys.argv[1])
    mapping = SummaryMapping(CompileFailed="compile_failed", RunFailed="run_failed",
                             RunTimeout="run_timeout")  # fmt: skip
    ok = run_code(
        RunCodeRequest(
            code="import sys\nprint(open('in.txt').read() + sys.stdin.read())\n"
            "open('out.txt', 'w').write('written')",
            language="python",
            stdin="+stdin",
            files={"in.txt": base64.b64encode(b"file").decode()},
            fetch_files=["out.txt"],
        ),
        max_attempts=1,
    )
    emit("python", ok.dict())
    emit("python_summary", summary_run_code_result(ok, mapping))
    for name, code, language in [
        ("cpp_compile", "int main() { return 0 }", "cpp"),
        ("nodejs_exit", "process.exit(4)", "nodejs"),
        ("python_timeout", "while True: pass", "python"),
    ]:
        result = run_code(RunCodeRequest(code=code, language=language, run_timeout=1),
                          max_attempts=1)  # fmt: skip
        emit(name, summary_run_code_result(result, mapping))
    try:
        run_code(RunCodeRequest(code="x", language="lua"), max_attempts=1)
        emit("lua", "no error")
    except Exception as exc:
        emit("lua", str(exc))
    cells = ["a = 123", "a", "print(a)", "raise RuntimeError('boom')", "a + 1"]
    jupyter = run_jupyter(RunJupyterRequest(cells=cells), max_attempts=1)
    emit("jupyter", jupyter.dict())
    tests = [{"input": {"stdin": "21\n"}, "output": {"stdout": "42\n"}},
             {"input": {"stdin": "1\n"}, "output": {"stdout": "2\n"}}]  # fmt: skip
    config = TestConfig(dataset_type="CommonOJDataset", language="python",
                        provided_data={"id": 3, "test": tests})  # fmt: skip
    completion = "```python\nprint(int(input()) * 2)\n```"
    judged = submit(SubmitRequest(dataset="inline", id=3, completion=completion, config=config),
                    max_attempts=1)  # fmt: skip
    emit("submit", judged.dict())


if __name__ == "__main__":
    main()
