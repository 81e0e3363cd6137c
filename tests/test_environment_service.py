"""The sandbox environment in the hashes the service uses, with real processes: two `proctor
serve`s whose `local` jails differ by numpy alone report different code hashes (and the same
hash for every other domain), and in queue mode a `proctor worker` whose jail lacks numpy gets
no code chunk while `/readyz` says its environment is not the API's.

numpy is hidden from a process's jail by running it in a mount namespace of its own where
Debian's numpy directory is an empty tmpfs (with an `__init__` that raises ImportError) and its
metadata is masked: the jail binds /usr from that namespace, the host is left as it was.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from proctor_client.local import LocalScorer
from reward_specs import default_registry, load_specs
from sandboxes import SandboxSettings
from service.dispatch.base import DispatchStats
from service.queue import keys, transport
from service.settings import Settings
from tests.helpers import TEST_SPECS, Server, free_port, poll
from tests.redis_fixtures import (
    IN_CI,
    ROOT,
    WORKER_READY_S,
    RedisServer,
    Worker,
    proctor_env,
    serve_queue,
    status_of,
)

DOC = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
DIST = Path("/usr/lib/python3/dist-packages")
_HIDE_NUMPY = f"""
set -e
for p in {DIST}/numpy {DIST}/numpy-*-info; do
  if [ -d "$p" ]; then mount -t tmpfs -o size=1m,mode=0755 tmpfs "$p"
  else mount --bind /dev/null "$p"; fi
done
echo 'raise ImportError("numpy is hidden from this jail")' > {DIST}/numpy/__init__.py
exec "$@"
"""


def _needs_namespaces() -> None:
    problem = None
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        problem = "hiding numpy needs root and unshare (util-linux)"
    elif not (DIST / "numpy").is_dir():
        problem = "no Debian python3-numpy under /usr (tests/run installs it)"
    if problem is not None:
        if IN_CI:
            pytest.fail(problem, pytrace=False)
        pytest.skip(problem)


def _without_numpy(argv: list[str]) -> list[str]:
    """`argv` in a mount namespace of its own whose /usr shows no numpy (same pid: all exec)."""
    return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", _HIDE_NUMPY,
            "sh", *argv]  # fmt: skip


def _env(**extra: str) -> dict[str, str]:
    env = proctor_env(registry=None)  # the default registry: code is one of its domains
    env.update(PROCTOR_SANDBOX__POOL_SIZE="1", PROCTOR_WORKERS="1", **extra)
    return env


def _popen(argv: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:
        return subprocess.Popen(
            argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


@pytest.fixture
def processes() -> Iterator[list[Worker]]:
    """Processes a test starts, killed with their children at its end."""
    started: list[Worker] = []
    yield started
    for process in started:
        process.kill_all()


def _serve_local(tmp_path: Path, name: str, hide_numpy: bool, started: list[Worker]) -> str:
    """`proctor serve` on the embedded default with the `local` sandbox; its URL once ready."""
    port = free_port()
    argv = [sys.executable, "-m", "service.cli", "serve", "--port", str(port),
            "--spec-dir", str(TEST_SPECS), "--log-level", "info"]  # fmt: skip
    log = tmp_path / f"{name}.log"
    process = _popen(_without_numpy(argv) if hide_numpy else argv, log, _env())
    started.append(Worker(process, log))
    url = f"http://127.0.0.1:{port}"
    poll(lambda: status_of(url + "/readyz") == 200 or process.poll() is not None, WORKER_READY_S)
    assert process.poll() is None, log.read_text()[-2000:]
    return url


@pytest.mark.slow
def test_a_jail_without_numpy_is_another_code_hash_and_the_same_of_every_other(
    tmp_path: Path, processes: list[Worker]
) -> None:
    _needs_namespaces()
    plain = httpx.get(_serve_local(tmp_path, "plain", False, processes) + "/v1/specs").json()
    bare = httpx.get(_serve_local(tmp_path, "bare", True, processes) + "/v1/specs").json()
    shown = json.loads(
        DOC.split("### The code environment")[1].split("```json\n")[1].split("```")[0]
    )
    assert set(plain) == set(shown) and set(plain["specs"][0]) == set(shown["specs"][0])
    digest, other = plain["environments"]["code"], bare["environments"]["code"]
    assert digest.startswith("sha256:") and other.startswith("sha256:") and digest != other
    for mine, theirs in zip(plain["specs"], bare["specs"], strict=True):
        assert mine["name"] == theirs["name"]
        assert mine["parameters"]["environments"] == {"code": digest}
        assert mine["hash"] != theirs["hash"]
        assert mine["domain_hashes"]["code"] != theirs["domain_hashes"]["code"]
        for domain in set(mine["domain_hashes"]) - {"code"}:
            assert mine["domain_hashes"][domain] == theirs["domain_hashes"][domain], domain


def _worker(url: str, tmp_path: Path, name: str, hide_numpy: bool, started: list[Worker]) -> Worker:
    argv = [sys.executable, "-m", "service.cli", "worker", "--queue", url, "--domains", "code",
            "--concurrency", "2", "--spec-dir", str(TEST_SPECS), "--log-level", "info"]  # fmt: skip
    log = tmp_path / f"{name}.log"
    worker = Worker(_popen(_without_numpy(argv) if hide_numpy else argv, log, _env()), log)
    started.append(worker)
    worker.wait_alive(url)
    return worker


def _report(server: RedisServer, worker: Worker) -> transport.WorkerReport:
    client = server.client()
    for key in client.scan_iter(match=keys.alive_key("*")):
        if worker.named(key.decode()[len(keys.alive_key("")) :]):
            report = transport.WorkerReport.decode(client.get(key) or b"")
            if report is not None:
                return report
    raise AssertionError("the worker is not registered")


def _claims(server: RedisServer) -> dict[str, str]:
    """Chunk job -> the worker that took it."""
    client = server.client()
    claims = {}
    for key in client.scan_iter(match=keys.claim_key("*")):
        name = client.get(key)
        if name is not None:
            claims[key.decode()] = name.decode()
    return claims


def _numpy_items(n: int) -> list[dict[str, Any]]:
    """Code items that pass only where numpy can be imported (distinct: none deduplicated)."""
    tests = {"stdio": [{"input": "21\n", "output": "42\n"}]}
    return [
        {"id": f"np-{k}", "domain": "code",
         "response": f"```python\nimport numpy\nprint(int(numpy.int64(input())) * 2)  # {k}\n```",
         "reference": {"language": "python", "tests": tests}}
        for k in range(n)
    ]  # fmt: skip


@pytest.mark.redis
@pytest.mark.slow
def test_a_worker_of_another_environment_gets_no_code_chunk(
    redis_server: RedisServer, tmp_path: Path, processes: list[Worker]
) -> None:
    _needs_namespaces()
    plain = _worker(redis_server.url, tmp_path, "plain", False, processes)
    api, url = serve_queue(
        redis_server.url, tmp_path / "serve.log", registry=None,
        extra_env={"PROCTOR_QUEUE_CHUNK_SIZE": "1"},
    )  # fmt: skip
    try:
        poll(lambda: status_of(url + "/readyz") == 200, timeout=WORKER_READY_S)
        expected = _report(redis_server, plain).environment("code")
        specs = httpx.get(url + "/v1/specs").json()
        assert specs["environments"] == {"code": expected}
        assert httpx.get(url + "/readyz").json()["components"]["code_environment"] is True

        bare = _worker(redis_server.url, tmp_path, "bare", True, processes)
        other = _report(redis_server, bare).environment("code")
        assert other is not None and other != expected
        poll(lambda: status_of(url + "/readyz") == 503, timeout=10)
        ready = httpx.get(url + "/readyz").json()
        assert ready["components"] == {"queue": True, "workers": True, "code_environment": False}

        response = httpx.post(url + "/v1/score", json={"items": _numpy_items(8)}, timeout=120)
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["spec"]["hash"] == next(
            s["hash"] for s in specs["specs"] if s["name"] == body["spec"]["name"]
        )
        assert [r["score"] for r in body["results"]] == [1.0] * 8  # numpy was there for each
        claims = _claims(redis_server)
        assert len(claims) == 8
        assert all(plain.named(name) for name in claims.values()), claims
        assert not any(bare.named(name) for name in claims.values())

        # The matching worker gone, the other never takes its place: a 503 that says why.
        plain.kill_all()
        poll(lambda: not any(plain.named(n) for n in _live(redis_server)), timeout=10)
        refused = httpx.post(url + "/v1/score", json={"items": _numpy_items(1)}, timeout=120)
        assert refused.status_code == 503
        assert f"code in the environment {expected}" in refused.json()["detail"]
        assert httpx.get(url + "/readyz").json()["components"]["code_environment"] is False
        assert bare.process.poll() is None
    finally:
        api.terminate()
        api.wait(timeout=60)


def _live(server: RedisServer) -> list[str]:
    client = server.client()
    prefix = len(keys.alive_key(""))
    return [k.decode()[prefix:] for k in client.scan_iter(match=keys.alive_key("*"))]


def test_an_environment_pinned_by_setting_must_be_a_digest() -> None:
    with pytest.raises(ValueError, match="code_environment"):
        Settings(code_environment="proctor-sandbox:2")
    digest = "sha256:" + "0" * 64
    assert Settings(code_environment=digest).code_environment == digest


def test_a_worker_report_carries_its_environment() -> None:
    report = transport.WorkerReport.of(("code",), DispatchStats("local"), 2, {"code": "sha256:x"})
    again = transport.WorkerReport.decode(report.encode())
    assert again is not None and again.environment("code") == "sha256:x"
    assert keys.queue_name("code", "sha256:x") == "proctor-code@sha256:x"
    assert keys.queue_name("math") == "proctor-math"
    old = transport.WorkerReport.decode('{"domains": ["code"]}')  # a worker of an earlier version
    assert old is not None and old.environment("code") is None


@pytest.mark.redis
def test_a_pinned_environment_no_worker_has_refuses_code_and_serves_the_rest(
    redis_server: RedisServer, start_worker: Callable[..., Worker]
) -> None:
    start_worker(redis_server.url, registry=None, domains="math,code")
    pinned = "sha256:" + "0" * 64
    settings = Settings(
        queue_url=redis_server.url, spec_dirs=(TEST_SPECS,), queue_wait_s=1,
        code_environment=pinned,
    )  # fmt: skip
    api = Server(settings)
    api.start(wait_ready=False)
    try:
        assert httpx.get(api.url + "/v1/specs").json()["environments"] == {"code": pinned}
        poll(lambda: httpx.get(api.url + "/readyz").json()["components"]["workers"], 30)
        ready = httpx.get(api.url + "/readyz")
        assert ready.status_code == 503
        assert ready.json()["components"]["code_environment"] is False
        refused = httpx.post(api.url + "/v1/score", json={"items": _numpy_items(1)}, timeout=60)
        assert refused.status_code == 503
        assert f"code in the environment {pinned}" in refused.json()["detail"]
        math = {"domain": "math", "response": "\\boxed{4}", "reference": {"answer": "4"}}
        served = httpx.post(api.url + "/v1/score", json={"items": [math]}, timeout=60)
        assert [r["score"] for r in served.json()["results"]] == [1.0]
    finally:
        api.stop()


# ------------------------------------------------- one hash everywhere, and a changed environment


def _proctor(*args: str, wrap: Callable[[list[str]], list[str]] = list) -> str:
    """`proctor ARGS` on this checkout with `_env()` (the `local` sandbox); its stdout."""
    argv = wrap([sys.executable, "-m", "service.cli", *args])
    done = subprocess.run(argv, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def _listed(stdout: str) -> dict[str, str]:
    """`proctor specs`'s lines: spec name -> hash."""
    rows = [line[2:].split() for line in stdout.splitlines() if not line.startswith("#")]
    return {row[0]: row[2] for row in rows}


@pytest.mark.slow
def test_a_server_proctor_score_proctor_specs_and_the_local_scorer_report_one_hash(
    tmp_path: Path, processes: list[Worker]
) -> None:
    served = httpx.get(_serve_local(tmp_path, "served", False, processes) + "/v1/specs").json()
    hashes = {s["name"]: s["hash"] for s in served["specs"]}
    digest = served["environments"]["code"]
    builtin = sorted(p.stem for p in (ROOT / "reward_specs" / "specs").glob("*.toml"))
    assert set(builtin) <= set(hashes)

    specs = _proctor("specs", "--spec-dir", str(TEST_SPECS))
    assert f"# code environment {digest} (local sandbox)" in specs.splitlines()
    assert _listed(specs) == hashes
    shown = json.loads(_proctor("specs", builtin[0]))
    assert shown["hash"] == hashes[builtin[0]] and shown["environments"] == {"code": digest}

    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    for name in builtin:  # line 1 of `proctor score`, written once its sandbox is probed
        header = _proctor("score", str(empty), "--spec", name, "--workers", "1", "--no-progress")
        assert json.loads(header.splitlines()[0])["spec"]["hash"] == hashes[name], name

    scorer = LocalScorer(builtin[0], workers=1, sandbox=SandboxSettings(pool_size=1))
    try:
        assert scorer.spec.hash == hashes[builtin[0]]
    finally:
        scorer.close()


def test_proctor_specs_without_a_sandbox_lists_the_hashes_without_the_environment() -> None:
    env = {**_env(), "PROCTOR_SANDBOX__BACKEND": "docker",
           "PROCTOR_SANDBOX__DOCKER_URL": "unix:///nonexistent/docker.sock"}  # fmt: skip
    argv = [sys.executable, "-m", "service.cli", "specs"]
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    first, *rest = done.stdout.splitlines()
    assert first.startswith("# without the code environment: the docker sandbox is unavailable")
    plain = {name: spec.hash for name, spec in load_specs(default_registry()).items()}
    assert _listed("\n".join(rest)) == plain
