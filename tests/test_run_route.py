"""POST /v1/run on a real server with real sandboxes, on both backends: output, stdin, files,
the bounds (time, memory, output), no network, auth, the 422s, and that nothing of a scoring
request reaches a run (its memory and its file system), so a policy's tool call never sees
another response's code or test inputs."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from service.settings import RunSettings
from tests.helpers import running_server
from tests.lang_programs import COMPILED, PROGRAMS
from tests.sandbox_fixtures import sandbox_settings

KEY = "proctor-run-test-key-01"
AUTH = {"Authorization": f"Bearer {KEY}"}


@pytest.fixture(scope="module", params=["local", pytest.param("docker", marks=pytest.mark.docker)])
def http(request: pytest.FixtureRequest) -> Iterator[httpx.Client]:
    """A server with keys and a small run pool on one backend, and a client with its key."""
    request.getfixturevalue(f"{request.param}_backend")  # skips, or fails in CI, without one
    run = RunSettings(pool_size=2, cpu_s=3.0, wall_s=30.0, memory_mb=512, output_bytes=64 << 10)
    settings: dict[str, Any] = {
        "workers": 1,
        "api_keys": (KEY,),
        "sandbox": sandbox_settings(request.param, pool_size=2),
        "run": run,
    }
    with (
        running_server(**settings) as server,
        httpx.Client(base_url=server.url, headers=AUTH, timeout=300) as client,
    ):
        yield client


def _run(http: httpx.Client, **body: Any) -> dict[str, Any]:
    response = http.post("/v1/run", json=body)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    assert set(result) == {"status", "stdout", "stderr", "exit_code", "cpu_s", "wall_s", "error"}
    return result


def test_output_stdin_and_files(http: httpx.Client) -> None:
    source = (
        "import sys, helper\nprint(helper.shout(sys.stdin.read()))\nprint('e', file=sys.stderr)"
    )
    files = {"helper.py": "def shout(s):\n    return s.upper()\n", "data/notes.txt": "kept"}
    result = _run(http, language="python", source=source, stdin="hello", files=files)
    assert result["status"] == "ok", result
    assert (result["stdout"], result["stderr"], result["exit_code"]) == ("HELLO\n", "e\n", 0)
    reads = _run(http, language="python", source="print(open('data/notes.txt').read())")
    assert reads["status"] == "error"  # files belong to their own run only
    assert "FileNotFoundError" in reads["stderr"]


def _metric(text: str, name: str) -> float:
    """The value of the sample `name` (with its labels, as exposed) in a Prometheus text."""
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} is not in /metrics")


def test_the_run_pool_is_in_readyz_and_metrics(http: httpx.Client) -> None:
    before = http.get("/metrics").text
    errors_before = (
        _metric(before, 'proctor_runs_total{status="error"}')
        if ('proctor_runs_total{status="error"}' in before)
        else 0.0
    )
    assert _run(http, language="python", source="print(1)")["status"] == "ok"
    assert _run(http, language="python", source="raise SystemExit(3)")["status"] == "error"
    ready = http.get("/readyz")
    assert ready.status_code == 200
    assert ready.json()["components"]["run_pool"] is True
    after = http.get("/metrics").text
    assert _metric(after, "proctor_run_pool_size") == 2  # opened by the first run
    assert _metric(after, "proctor_run_pool_sandboxes") >= 1
    assert _metric(after, "proctor_run_pool_pending") == 0
    assert _metric(after, 'proctor_runs_total{status="ok"}') >= 1
    assert _metric(after, 'proctor_runs_total{status="error"}') == errors_before + 1


def test_nonzero_exit_is_error_with_its_code(http: httpx.Client) -> None:
    result = _run(http, language="python", source="import sys\nprint('so far')\nsys.exit(3)")
    assert (result["status"], result["exit_code"], result["stdout"]) == ("error", 3, "so far\n")
    crash = _run(http, language="python", source="1/0")
    assert crash["status"] == "error" and "ZeroDivisionError" in crash["stderr"]


def test_a_compiled_language_and_its_compile_error(http: httpx.Client) -> None:
    source = "#include <iostream>\nint main(){long a,b; std::cin>>a>>b; std::cout<<a*b<<'\\n';}"
    result = _run(http, language="cpp", source=source, stdin="6 7")
    assert (result["status"], result["stdout"]) == ("ok", "42\n"), result
    broken = _run(http, language="cpp", source="int main() { return 0 }")
    assert broken["status"] == "compile_error"
    assert "error" in broken["stderr"]


def test_time_memory_and_output_are_bounded(http: httpx.Client) -> None:
    assert _run(http, language="python", source="while True: pass")["status"] == "timeout"
    sleep = "import time\ntime.sleep(60)"
    asleep = _run(http, language="python", source=sleep, limits={"wall_s": 2})
    assert asleep["status"] == "timeout"
    hog = "x = bytearray(1 << 30)\nprint(len(x))"
    assert _run(http, language="python", source=hog)["status"] == "memory"
    flood = _run(http, language="python", source="while True: print('y' * 1000)")
    assert flood["status"] == "output_limit"
    assert len(flood["stdout"]) <= 64 << 10


def test_a_request_may_ask_for_less_but_not_more(http: httpx.Client) -> None:
    spin = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass"
    assert _run(http, language="python", source=spin)["status"] == "ok"
    short = _run(http, language="python", source=spin, limits={"cpu_s": 0.1})
    assert short["status"] == "timeout"
    response = http.post(
        "/v1/run", json={"language": "python", "source": "", "limits": {"cpu_s": 30}}
    )
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body", "limits", "cpu_s"]


def test_no_network(http: httpx.Client) -> None:
    port = http.base_url.port
    source = (
        "import socket\n"
        f"for host in (('127.0.0.1', {port}), ('1.1.1.1', 53), ('8.8.8.8', 443)):\n"
        "    try:\n"
        "        socket.create_connection(host, timeout=2)\n"
        "        print('reached', host)\n"
        "    except OSError as exc:\n"
        "        print('refused', type(exc).__name__)\n"
    )
    result = _run(http, language="python", source=source)
    assert result["status"] == "ok", result
    assert "reached" not in result["stdout"] and result["stdout"].count("refused") == 3


def test_each_run_is_a_fresh_interpreter(http: httpx.Client) -> None:
    """Exec'd, not forked from the supervisor: its command line is its own, and none of the
    supervisor's modules (selectors, its frames' codec) is already imported."""
    source = (
        "import sys\n"
        "print(open('/proc/self/cmdline', 'rb').read().split(b'\\0')[:2])\n"
        "print('selectors' in sys.modules, 'base64' in sys.modules)\n"
    )
    result = _run(http, language="python", source=source)
    assert result["stdout"].split("\n")[:2] == ["[b'python3', b'main.py']", "False False"]


def test_auth(http: httpx.Client) -> None:
    body = {"language": "python", "source": "print(1)"}
    for headers in ({}, {"Authorization": "Bearer not-the-key-at-all"}):
        url = str(http.base_url).rstrip("/") + "/v1/run"
        response = httpx.post(url, json=body, headers=headers)
        assert response.status_code == 401
        assert response.json()["error"]["code"] == "unauthorized"


@pytest.mark.parametrize(
    ("body", "loc"),
    [
        ({"source": "print(1)"}, ["body", "language"]),
        ({"language": "cobol", "source": "x"}, ["body", "language"]),
        ({"language": "python"}, ["body", "source"]),
        ({"language": "python", "source": "x", "stdin": 3}, ["body", "stdin"]),
        ({"language": "python", "source": "x", "files": {"/etc/x": "a"}}, ["body", "files"]),
        ({"language": "python", "source": "x", "files": {"a/../../x": "a"}}, ["body", "files"]),
        ({"language": "python", "source": "x", "files": {"a//b": "a"}}, ["body", "files"]),
        ({"language": "python", "source": "x", "files": {"main.py": "a"}}, ["body", "files"]),
        (
            {"language": "python", "source": "x", "files": {f"f{n}": "" for n in range(17)}},
            ["body", "files"],
        ),
        ({"language": "python", "source": "x" * (2 << 20)}, ["body", "source"]),
        ({"language": "python", "source": "x", "limits": {"memory_mb": 4096}}, None),
        ({"language": "python", "source": "x", "timeout": 3}, ["body", "timeout"]),
    ],
)
def test_malformed_requests_are_422_naming_the_field(
    http: httpx.Client, body: dict[str, Any], loc: list[str] | None
) -> None:
    response = http.post("/v1/run", json=body)
    assert response.status_code == 422, response.text
    answer = response.json()
    assert answer["error"]["code"] == "invalid_request"
    got = answer["detail"][0]["loc"]
    assert got[: len(loc)] == loc if loc else got == ["body", "limits", "memory_mb"]


_SCAN = r"""
import os, sys
plant = sys.argv[1:] == ['plant']
pairs = [p.split('|') for p in sys.stdin.read().split()]
needles = [(a.encode(), b.encode()) for a, b in pairs]
planted = [a + b for a, b in needles] if plant else []
found = set()

def look(data, where):
    for a, b in needles:
        i = data.find(a)
        while i != -1:
            if data[i + len(a):i + len(a) + len(b)] == b:
                found.add(a.decode() + '+' + b.decode() + '@' + where)
            i = data.find(a, i + 1)

with open('/proc/self/maps') as f:
    maps = f.read().splitlines()
with open('/proc/self/mem', 'rb', 0) as mem:
    for line in maps:
        fields = line.split()
        if 'r' not in fields[1] or line.endswith(('[vvar]', '[vsyscall]')):
            continue
        lo, hi = (int(x, 16) for x in fields[0].split('-'))
        try:
            mem.seek(lo)
            look(mem.read(hi - lo), 'mem')
        except (OSError, OverflowError, MemoryError):
            pass
for top in (os.getcwd(), '/tmp', '/var/tmp', '/dev/shm', os.path.expanduser('~')):
    for root, dirs, names in os.walk(top):
        for name in names:
            try:
                with open(os.path.join(root, name), 'rb') as f:
                    look(f.read(8 << 20), 'file')
            except OSError:
                pass
print(sorted(found))
print(len(planted))
"""
"""Looks for each `a|b` of stdin as `ab` in its own memory (read through /proc/self/mem) and
in the files it can see; `ab` itself is never in its memory unless found (or planted)."""


def _scoring_items(markers: list[str]) -> list[dict[str, Any]]:
    """Code items whose sources, test inputs and test program carry the markers."""
    m = markers
    py = f"```python\n# {m[0]}\ns = input()\nprint(s)\n```"
    cpp = f'```cpp\n#include <iostream>\nint main(){{std::cout<<"{m[1]}";}}\n```'
    program = f"def test_marker():\n    assert echo('{m[3]}') == '{m[3]}'\n"
    return [
        {
            "domain": "code",
            "response": py,
            "reference": {
                "language": "python",
                "tests": {"stdio": [{"input": m[2] + "\n", "output": m[2] + "\n"}]},
            },
        },
        {
            "domain": "code",
            "response": cpp,
            "reference": {"language": "cpp", "tests": {"stdio": [{"input": "", "output": m[1]}]}},
        },
        {
            "domain": "code",
            "response": "```python\ndef echo(s):\n    return s\n```",
            "reference": {"language": "python", "tests": {"program": program}},
        },
    ]


def test_a_run_finds_nothing_of_an_earlier_scoring_request(http: httpx.Client) -> None:
    markers = [f"PRX{secrets.token_hex(12)}" for _ in range(4)]
    scored = http.post("/v1/score", json={"items": _scoring_items(markers)})
    assert scored.status_code == 200, scored.text
    assert [r["score"] for r in scored.json()["results"]] == [1.0, 1.0, 1.0], scored.text
    stdin = " ".join(f"{m[:10]}|{m[10:]}" for m in markers)
    for _ in range(3):  # every sandbox of the pool (two) and then some
        result = _run(http, language="python", source=_SCAN, stdin=stdin)
        assert result["status"] == "ok", result
        assert result["stdout"] == "[]\n0\n", result
    # The scan does find what is there: the same program, planting the joined markers.
    source = _SCAN.replace("plant = sys.argv[1:] == ['plant']", "plant = True")
    found = _run(http, language="python", source=source, stdin=stdin)
    assert found["status"] == "ok", found
    assert all(f"{m[:10]}+{m[10:]}@mem" in found["stdout"] for m in markers), found


@pytest.mark.parametrize("language", COMPILED)
def test_every_compiled_language_builds_and_runs_as_scoring_does(
    http: httpx.Client, language: str
) -> None:
    program = PROGRAMS[language]
    right = _run(http, language=language, source=program["right"], stdin="1 2\n")
    assert (right["status"], right["stdout"].strip()) == ("ok", "3"), right
    broken = _run(http, language=language, source=program["broken"])
    assert broken["status"] == "compile_error" and broken["stderr"], broken
    loop = _run(http, language=language, source=program["loop"], limits={"cpu_s": 1})
    assert loop["status"] == "timeout", loop
    assert _run(http, language=language, source=program["memory"])["status"] == "memory"
