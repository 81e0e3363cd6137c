"""The SandboxFusion-compatible routes on a real server with real sandboxes (both backends):
every field and status of `run_code` and `run_jupyter` as SandboxFusion answers them, the
clamps, `files` and `fetch_files` under `/v1/run`'s path rules (a symlink the program plants is
never followed), `submit` through the score path, the key in the path (401 on every route for a
wrong one, never in a log line, a metric or the schema), and the 504 a client retries when no
sandbox is free in time or the key is at its limit. The real clients' tests are in
tests/test_compat_clients.py."""

from __future__ import annotations

import base64
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from service.settings import CompatSettings, RunSettings
from tests.helpers import Server, running_server
from tests.sandbox_fixtures import sandbox_settings

KEY = "compat-test-key-0123456789abcdef"
OTHER_KEY = "compat-other-key-0123456789abcde"
POD = "proctor-compat-test"


@pytest.fixture(scope="module", params=["local", pytest.param("docker", marks=pytest.mark.docker)])
def server(request: pytest.FixtureRequest) -> Iterator[Server]:
    """A server with keys and a run pool of two sandboxes, on each backend."""
    request.getfixturevalue(f"{request.param}_backend")  # skips, or fails in CI, without one
    run = RunSettings(pool_size=2, cpu_s=3.0, wall_s=6.0, memory_mb=256, max_files=4)
    with running_server(
        workers=1,
        api_keys=(KEY, OTHER_KEY),
        sandbox=sandbox_settings(request.param, pool_size=2),
        run=run,
        compat=CompatSettings(executor_pod_name=POD),
    ) as srv:
        yield srv


@pytest.fixture(scope="module")
def sf(server: Server) -> Iterator[httpx.Client]:
    """A client of the keyed prefix, as verl is given it: no header."""
    base = f"{server.url}/compat/sandbox-fusion/k/{KEY}"
    with httpx.Client(base_url=base, timeout=120) as client:
        yield client


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def run_code(sf: httpx.Client, **body: Any) -> dict[str, Any]:
    response = sf.post("/run_code", json=body)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    keys = {"status", "message", "compile_result", "run_result", "executor_pod_name", "files"}
    assert set(answer) == keys
    assert answer["executor_pod_name"] == POD
    for result in (answer["compile_result"], answer["run_result"]):
        if result is not None:  # never a null output, as verl reads them
            assert isinstance(result["stdout"], str) and isinstance(result["stderr"], str)
            if result["status"] == "Finished":
                assert isinstance(result["return_code"], int)
    return answer


def test_python_stdin_files_and_fetch(sf: httpx.Client) -> None:
    code = (
        "import sys, helper\n"
        "out = helper.shout(sys.stdin.read())\n"
        "print(out)\n"
        "open('out/result.bin', 'wb').write(bytes(range(256)))\n"
    )
    files = {"helper.py": _b64(b"def shout(s):\n    return s.upper()\n"), "out/keep": _b64(b"")}
    answer = run_code(
        sf,
        code=code,
        language="python",
        stdin="hello",
        files={**files, "skipped.txt": None},
        fetch_files=["out/result.bin", "missing.txt", "helper.py"],
    )
    assert answer["status"] == "Success" and answer["message"] == ""
    assert answer["compile_result"] is None  # Python has none, as upstream
    run = answer["run_result"]
    assert (run["status"], run["return_code"], run["stdout"]) == ("Finished", 0, "HELLO\n")
    assert run["execution_time"] >= 0 and run["cpu_time"] >= 0
    # A path that is not there is left out, as SandboxFusion leaves it out.
    assert set(answer["files"]) == {"out/result.bin", "helper.py"}
    assert base64.b64decode(answer["files"]["out/result.bin"]) == bytes(range(256))


def test_clamps_are_applied_and_named(sf: httpx.Client) -> None:
    body = {"code": "print(1)", "language": "python", "run_timeout": 30, "memory_limit_MB": 1024}
    response = sf.post("/run_code", json=body)
    assert response.status_code == 200
    clamped = response.headers["X-Proctor-Clamped"]
    assert "run_timeout cpu_s=3" in clamped and "run_timeout wall_s=6" in clamped
    assert "memory_limit_MB memory_mb=256" in clamped
    # Absent or -1 (SandboxFusion's "no limit") is the server's bound too; within bounds: none.
    absent = sf.post("/run_code", json={"code": "print(1)", "language": "python"})
    assert "memory_limit_MB memory_mb=256" in absent.headers["X-Proctor-Clamped"]
    within = {"code": "print(1)", "language": "python", "run_timeout": 2, "memory_limit_MB": 128}
    assert "X-Proctor-Clamped" not in sf.post("/run_code", json=within).headers


def test_the_clamped_memory_binds(sf: httpx.Client) -> None:
    hog = "x = bytearray(400 * 1024 * 1024)\nprint(len(x))"
    answer = run_code(sf, code=hog, language="python", memory_limit_MB=4096)
    assert answer["status"] == "Failed"
    assert answer["run_result"]["return_code"] != 0


def test_outcomes_map_to_sandbox_fusion_statuses(sf: httpx.Client) -> None:
    failed = run_code(sf, code="import sys; sys.exit(3)", language="python")
    assert (failed["status"], failed["run_result"]["return_code"]) == ("Failed", 3)
    # A death by a signal is a finished run with 128 + the signal (SIGSEGV = 11).
    segv = "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"
    crashed = run_code(sf, code=segv, language="python")
    assert crashed["run_result"]["status"] == "Finished"
    assert crashed["run_result"]["return_code"] == 128 + 11
    looped = run_code(sf, code="while True: pass", language="python", run_timeout=1)
    assert looped["status"] == "Failed"
    assert looped["run_result"]["status"] == "TimeLimitExceeded"
    assert looped["run_result"]["return_code"] is None  # as SandboxFusion's time limit


def test_compile_failure_has_no_run_result(sf: httpx.Client) -> None:
    answer = run_code(sf, code="int main() { return 0 }", language="cpp")
    assert answer["status"] == "Failed"
    assert answer["run_result"] is None
    compiled = answer["compile_result"]
    assert compiled["status"] == "Finished" and compiled["return_code"] != 0
    assert "error" in compiled["stderr"]
    ok = run_code(sf, code='#include <cstdio>\nint main(){puts("hi");}', language="cpp")
    assert ok["status"] == "Success" and ok["compile_result"]["return_code"] == 0
    assert ok["run_result"]["stdout"] == "hi\n"


def test_nodejs_is_javascript(sf: httpx.Client) -> None:
    answer = run_code(sf, code="console.log(6 * 7)", language="nodejs")
    assert answer["status"] == "Success" and answer["run_result"]["stdout"] == "42\n"
    # A syntax error is the run's failure, as SandboxFusion's `node` run reports it.
    broken = run_code(sf, code="console.log(1", language="nodejs")
    assert broken["compile_result"] is None and broken["run_result"]["return_code"] != 0
    assert "SyntaxError" in broken["run_result"]["stderr"]


def test_unknown_language_names_ours(sf: httpx.Client) -> None:
    answer = run_code(sf, code="print 1", language="lua")
    assert answer["status"] == "SandboxError"
    assert "'lua'" in answer["message"] and "nodejs" in answer["message"]
    assert "python" in answer["message"]


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ({"files": {"../escape": _b64(b"x")}}, "'../escape'"),  # a path out of the work dir
        ({"files": {"/etc/x": _b64(b"x")}}, "'/etc/x'"),
        ({"files": {"a//b": _b64(b"x")}}, "'a//b'"),
        ({"files": {"data": "not base64!"}}, "not base64"),
        ({"files": {"big": _b64(b"x" * (1 << 20 + 1))}}, "'big'"),
        ({"files": {f"f{i}": _b64(b"") for i in range(5)}}, "at most 4"),
        ({"fetch_files": ["a/../../etc/passwd"]}, "'a/../../etc/passwd'"),
        ({"fetch_files": ["/etc/passwd"]}, "'/etc/passwd'"),
        ({"files": {"main.py": _b64(b"x")}}, "'main.py'"),  # the source's own name
        ({"code": "#" * ((1 << 20) + 1)}, "code"),
        ({"stdin": "x" * ((1 << 20) + 1)}, "stdin"),
    ],
)
def test_bad_input_is_a_sandbox_error_naming_it(
    sf: httpx.Client, body: dict[str, Any], named: str
) -> None:
    answer = run_code(sf, **{"code": "print(1)", "language": "python", **body})
    assert answer["status"] == "SandboxError"
    assert named in answer["message"]
    assert answer["run_result"] is None


def test_malformed_requests_are_422(sf: httpx.Client) -> None:
    raw = sf.post("/run_code", content=b"{not json", headers={"content-type": "application/json"})
    assert raw.status_code == 422
    assert sf.post("/run_code", json={"language": "python"}).status_code == 422  # no code
    assert sf.post("/run_code", json=["code"]).status_code == 422
    nan = b'{"code": "print(1)", "language": "python", "run_timeout": NaN}'
    assert (
        sf.post("/run_code", content=nan, headers={"content-type": "application/json"}).status_code
        == 422
    )


def test_fetch_never_follows_a_planted_symlink(sf: httpx.Client) -> None:
    plant = (
        "import os\n"
        "os.symlink('/etc/passwd', 'link')\n"
        "os.symlink('/etc', 'dirlink')\n"
        "os.mkfifo('fifo')\n"
        "open('real.txt', 'w').write('mine')\n"
    )
    answer = run_code(
        sf,
        code=plant,
        language="python",
        fetch_files=["link", "dirlink/passwd", "fifo", "real.txt"],  # max_files: 4
    )
    assert answer["status"] == "Success"
    # The symlinks, the directory and the FIFO are not regular files beneath the work dir.
    assert answer["files"] == {"real.txt": _b64(b"mine")}
    directory = run_code(sf, code="import os; os.mkdir('d')", language="python", fetch_files=["d"])
    assert directory["status"] == "Success" and directory["files"] == {}


def test_fetched_files_count_against_the_output_limit(make_server: Any) -> None:
    run = RunSettings(pool_size=1, output_bytes=4096)
    srv = make_server(workers=1, sandbox=sandbox_settings("local", pool_size=1), run=run)
    big = "open('big', 'wb').write(b'x' * 3000)\nprint('y' * 2000)"
    response = httpx.post(
        f"{srv.url}/compat/sandbox-fusion/run_code",
        json={"code": big, "language": "python", "fetch_files": ["big"]},
        timeout=60,
    )
    answer = response.json()
    assert answer["status"] == "SandboxError" and "output limit" in answer["message"]
    small = big.replace("2000", "20")
    response = httpx.post(
        f"{srv.url}/compat/sandbox-fusion/run_code",
        json={"code": small, "language": "python", "fetch_files": ["big"]},
        timeout=60,
    )
    assert base64.b64decode(response.json()["files"]["big"]) == b"x" * 3000


def test_jupyter_cells_run_in_order_in_a_fresh_interpreter(sf: httpx.Client) -> None:
    cells = [
        "a = 123",
        "a",
        "print(a)",
        "import sys; sys.stderr.write('to stderr\\n'); None",
        "raise RuntimeError('boom')",
        "a + 1",
        "def f(:",
    ]
    response = sf.post("/run_jupyter", json={"cells": cells, "total_timeout": 30})
    assert response.status_code == 200
    assert "total_timeout wall_s=6" in response.headers["X-Proctor-Clamped"]
    answer = response.json()
    assert answer["status"] == "Success" and answer["executor_pod_name"] == POD
    assert answer["driver"]["status"] == "Finished" and answer["driver"]["return_code"] == 0
    out = answer["cells"]
    assert [c["display"] for c in out[:3]] == [[], [{"text/plain": "123"}], []]
    assert out[2]["stdout"] == "123\n" and out[3]["stderr"] == "to stderr\n"
    assert out[3]["display"] == []  # a None value shows nothing
    (error,) = out[4]["error"]
    assert (error["ename"], error["evalue"]) == ("RuntimeError", "boom")
    assert error["traceback"][-1] == "RuntimeError: boom\n"
    assert out[5]["display"] == [{"text/plain": "124"}]  # after an error, as upstream
    assert out[6]["error"][0]["ename"] == "SyntaxError"
    again = sf.post("/run_jupyter", json={"cells": ["a"]}).json()
    assert again["cells"][0]["error"][0]["ename"] == "NameError"  # nothing kept


def test_jupyter_bad_input(sf: httpx.Client) -> None:
    huge = sf.post("/run_jupyter", json={"cells": ["#" * ((1 << 20) + 1)]}).json()
    assert huge["status"] == "SandboxError" and "cells" in huge["message"]
    escape = sf.post("/run_jupyter", json={"cells": ["1"], "fetch_files": ["../x"]}).json()
    assert escape["status"] == "SandboxError" and "'../x'" in escape["message"]
    assert sf.post("/run_jupyter", json={"cells": ["1"], "kernel": "julia"}).status_code == 422
    assert sf.post("/run_jupyter", json={"cells": "1"}).status_code == 422


def test_jupyter_driver_that_does_not_finish_is_failed(sf: httpx.Client) -> None:
    ended = sf.post("/run_jupyter", json={"cells": ["import os; os._exit(7)", "1"]}).json()
    assert ended["status"] == "Failed" and ended["cells"] == []
    assert ended["driver"]["return_code"] == 7
    looped = sf.post("/run_jupyter", json={"cells": ["while True: pass"], "total_timeout": 1})
    assert looped.json()["status"] == "Failed"
    assert looped.json()["driver"]["status"] == "TimeLimitExceeded"
    fetched = sf.post(
        "/run_jupyter",
        json={"cells": ["open('o.txt', 'w').write('cell')"], "fetch_files": ["o.txt"]},
    ).json()
    assert fetched["files"] == {"o.txt": _b64(b"cell")}


def test_ping_and_a_wrong_key_fail_on_every_route(server: Server, sf: httpx.Client) -> None:
    assert sf.get("/v1/ping").json() == "pong"
    wrong = f"{server.url}/compat/sandbox-fusion/k/{KEY[:-1]}x"
    for method, path in [("GET", "/v1/ping"), ("POST", "/run_code"), ("POST", "/run_jupyter"),
                         ("POST", "/submit")]:  # fmt: skip
        response = httpx.request(method, wrong + path, json={"code": "print(1)"})
        assert response.status_code == 401, (path, response.text)
        assert response.json()["error"]["code"] == "unauthorized"
    # Checked before routing: nothing of the prefix is told to a wrong key, not even a 404.
    assert httpx.get(wrong + "/no/such/route").status_code == 401
    assert httpx.get(wrong + "/run_code").status_code == 401
    # The prefix without a key takes the header on a keyed server.
    bare = f"{server.url}/compat/sandbox-fusion/v1/ping"
    assert httpx.get(bare).status_code == 401
    assert httpx.get(bare, headers={"Authorization": f"Bearer {KEY}"}).json() == "pong"
    # A key with characters that URLs escape is still a key (and still wrong).
    assert httpx.get(f"{server.url}/compat/sandbox-fusion/k/a%2Fb/v1/ping").status_code == 401


def test_an_open_server_refuses_a_key_segment(make_server: Any) -> None:
    srv = make_server(workers=1)
    assert httpx.get(f"{srv.url}/compat/sandbox-fusion/v1/ping").json() == "pong"
    response = httpx.get(f"{srv.url}/compat/sandbox-fusion/k/{KEY}/v1/ping")
    assert response.status_code == 401 and "no API keys" in response.json()["error"]["message"]


def test_no_key_in_logs_metrics_or_the_schema(
    server: Server, sf: httpx.Client, caplog: pytest.LogCaptureFixture
) -> None:
    access = logging.getLogger("uvicorn.access")
    access.addHandler(caplog.handler)  # uvicorn's access logger does not propagate
    level = access.level
    access.setLevel(logging.INFO)
    try:
        with caplog.at_level(logging.DEBUG):
            sf.get("/v1/ping")
            sf.post("/run_code", json={"code": "print(1)", "language": "python"})
            httpx.get(f"{server.url}/compat/sandbox-fusion/k/{OTHER_KEY[:-1]}/v1/ping")
            sf.get("/nothing/here")
            sf.post("/run_code", content=b"{")
    finally:
        access.setLevel(level)
        access.removeHandler(caplog.handler)
    # The server's lines (the test's own HTTP client logs the URL it was given, key and all).
    ours = [r for r in caplog.records if not r.name.startswith(("httpx", "httpcore"))]
    text = "\n".join(r.getMessage() for r in ours)
    assert "k/REDACTED/run_code" in text  # the access lines were captured
    assert KEY not in text and OTHER_KEY[:-1] not in text
    metrics = httpx.get(f"{server.url}/metrics", headers={"Authorization": f"Bearer {KEY}"})
    assert "/compat/sandbox-fusion/k/REDACTED/run_code" in metrics.text
    assert KEY not in metrics.text
    schema = httpx.get(f"{server.url}/openapi.json", headers={"Authorization": f"Bearer {KEY}"})
    assert KEY not in schema.text and "REDACTED" in schema.text


def test_past_the_queue_wait_or_the_key_limit_it_is_a_504_to_retry(make_server: Any) -> None:
    srv = make_server(
        workers=1,
        api_keys=(KEY, OTHER_KEY),
        max_inflight_requests_per_key=1,
        sandbox=sandbox_settings("local", pool_size=1),
        run=RunSettings(pool_size=1, cpu_s=5.0, wall_s=10.0),
        compat=CompatSettings(queue_wait_s=0.5),
    )
    mine = f"{srv.url}/compat/sandbox-fusion/k/{KEY}/run_code"
    other = f"{srv.url}/compat/sandbox-fusion/k/{OTHER_KEY}/run_code"
    quick = {"code": "print(1)", "language": "python"}
    assert httpx.post(mine, json=quick, timeout=60).status_code == 200  # the sandbox is warm
    first: list[httpx.Response] = []

    def hold_the_only_sandbox() -> None:
        body = {"code": "import time; time.sleep(6)", "language": "python"}
        first.append(httpx.post(mine, json=body, timeout=60))

    holder = threading.Thread(target=hold_the_only_sandbox)
    holder.start()
    time.sleep(2)  # ordering only: the holder's run has the sandbox well before these ask
    same_key = httpx.post(mine, json=quick, timeout=60)  # past its one request in flight
    waited = httpx.post(other, json=quick, timeout=60)  # its turn, but no sandbox in time
    holder.join()
    assert first[0].json()["status"] == "Success"
    for response in (same_key, waited):
        assert response.status_code == 504, response.text
        assert response.headers["Retry-After"] == "1"
        assert response.json()["status"] == "SandboxError"
    assert "too many requests" in same_key.json()["message"]
    assert "free within 0.5 s" in waited.json()["message"]
    assert httpx.post(other, json=quick, timeout=60).json()["status"] == "Success"


def _problem(*cases: tuple[str, str]) -> dict[str, Any]:
    tests = [{"input": {"stdin": i}, "output": {"stdout": o}} for i, o in cases]
    return {"dataset_type": "CommonOJDataset", "provided_data": {"id": 7, "test": tests}}


DOUBLER = "Here:\n```python\nn = int(input())\nprint(n * 2)\n```"


def test_submit_judges_provided_stdio_tests_by_the_spec(sf: httpx.Client) -> None:
    config = {**_problem(("21\n", "42\n"), ("0\n", "0\n")), "language": "python"}
    body = {"dataset": "my_problems", "id": 7, "completion": DOUBLER, "config": config}
    answer = sf.post("/submit", json=body).json()
    assert answer["id"] == 7 and answer["accepted"] is True
    assert answer["extracted_type"] == "fenced"
    assert answer["extracted_code"] == "n = int(input())\nprint(n * 2)\n"
    assert [t["passed"] for t in answer["tests"]] == [True, True]
    assert answer["tests"][0]["exec_info"]["status"] == "Success"
    assert answer["tests"][0]["test_info"]["input"] == {"stdin": "21\n"}
    assert answer["extra"]["spec"]["name"] == "prorl-v1-careful-2"
    assert answer["extra"]["spec"]["hash"].startswith("sha256:")
    half = {**body, "config": _problem(("21\n", "42\n"), ("1\n", "3\n"))}
    judged = sf.post("/submit", json=half).json()
    assert judged["accepted"] is False
    # Every case is judged (SandboxFusion stops at the first failure); the diff is the spec's.
    assert [t["passed"] for t in judged["tests"]] == [True, False]
    assert judged["tests"][1]["test_info"]["proctor"]["status"] == "wrong_answer"


def test_submit_without_provided_data_names_what_is_not_offered(sf: httpx.Client) -> None:
    body = {"dataset": "humaneval_python", "id": 0, "completion": "x", "config": {}}
    answer = sf.post("/submit", json=body).json()
    assert answer["status"] == "SandboxError"
    assert "registered datasets" in answer["message"] and "humaneval" in answer["message"]
    lua = {**body, "config": {**_problem(("1", "1")), "language": "lua"}}
    assert "'lua'" in sf.post("/submit", json=lua).json()["message"]
    files = {**body, "config": _problem(("1", "1"))}
    files["config"]["provided_data"]["test"][0]["input"] = {"data.txt": "1"}
    assert "other files" in sf.post("/submit", json=files).json()["message"]
