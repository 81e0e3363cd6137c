"""The sandbox environment in the hashes the service uses, with real processes: two `proctor
serve`s whose `local` jails differ by numpy alone report different code hashes (and the same
hash for every other domain), and in queue mode a `proctor worker` whose jail lacks numpy gets
no code chunk while `/readyz` says its environment is not the API's.

numpy is hidden from a process's jail by running it in a mount namespace of its own where
Debian's numpy directory is an empty tmpfs (with an `__init__` that raises ImportError) and its
metadata is masked: the jail binds /usr from that namespace, the host is left as it was.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import secrets
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import docker.errors
import httpx
import pytest

from proctor_client.local import LocalScorer
from reward_specs import caches, default_registry, load_specs
from sandboxes import SandboxSettings
from sandboxes.api import Execution, RunRequest
from sandboxes.checkers import checker_settings
from sandboxes.settings import DEFAULT_IMAGE
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
from tests.sandbox_fixtures import open_or_skip, sandbox_settings, unavailable

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
        assert ready["components"] == {
            "queue": True,
            "workers": True,
            "code_environment": False,
            "run_pool": True,
        }

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


def test_the_probe_interval_is_bounded() -> None:
    for refused in (0, 0.5, 86401):
        with pytest.raises(ValueError, match="environment_probe_interval_s"):
            Settings(environment_probe_interval_s=refused)
    assert Settings().environment_probe_interval_s == 300


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


def _visible_site_dir() -> Path:
    """The directory of the sandbox interpreter's path under /usr/local where pip installs."""
    argv = ["/usr/bin/python3", "-I", "-c", "import sys; print('\\n'.join(sys.path))"]
    path = subprocess.run(argv, capture_output=True, text=True, check=True).stdout.split()
    local = [Path(p) for p in path if p.startswith("/usr/local/") and Path(p).is_dir()]
    if not local:
        problem = "the sandbox's python3 has no /usr/local site directory on its path"
        if IN_CI:
            pytest.fail(problem, pytrace=False)
        pytest.skip(problem)
    return local[0]


def _over(directory: Path, source: Path) -> Callable[[list[str]], list[str]]:
    """`argv` in a mount namespace of its own where `directory` shows `source` (the jail binds
    /usr from that namespace; the host is left as it was)."""
    script = f'mount --bind "{source}" "{directory}" && exec "$@"'
    return lambda argv: ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
                         script, "sh", *argv]  # fmt: skip


def _own_site_dir(tmp_path: Path) -> tuple[Path, Callable[[list[str]], list[str]]]:
    """A copy of the sandbox interpreter's /usr/local site directory, and the wrapper that runs
    a command where that directory shows the copy."""
    site = _visible_site_dir()
    mine = tmp_path / "site"
    shutil.copytree(site, mine, symlinks=True)  # the host's site directory, as it is
    return mine, _over(site, mine)


def _install_dummy(site: Path) -> None:
    """pip's way of installing a distribution: its module, and its metadata in a *.dist-info
    directory."""
    info = site / "proctor_probe_dummy-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: proctor-probe-dummy\nVersion: 1.0\n"
    )
    (site / "proctor_probe_dummy.py").write_text("VALUE = 1\n")


def _code_item(k: int) -> dict[str, Any]:
    tests = {"stdio": [{"input": "2\n", "output": "4\n"}]}
    return {"id": f"c{k}", "domain": "code", "reference": {"language": "python", "tests": tests},
            "response": f"```python\nprint(int(input()) * 2)  # {k}\n```"}  # fmt: skip


def _metric(url: str, name: str) -> float:
    for line in httpx.get(url + "/metrics").text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"no {name} in /metrics")


@pytest.mark.slow
def test_a_package_installed_while_a_local_server_runs_stops_its_code_items(
    tmp_path: Path, processes: list[Worker]
) -> None:
    _needs_namespaces()
    mine, wrap = _own_site_dir(tmp_path)
    port = free_port()
    argv = [sys.executable, "-m", "service.cli", "serve", "--port", str(port),
            "--spec-dir", str(TEST_SPECS), "--log-level", "info"]  # fmt: skip
    log = tmp_path / "serve.log"
    process = _popen(wrap(argv), log, _env())
    processes.append(Worker(process, log))
    url = f"http://127.0.0.1:{port}"
    poll(lambda: status_of(url + "/readyz") == 200 or process.poll() is not None, WORKER_READY_S)
    assert process.poll() is None, log.read_text()[-2000:]
    before = httpx.get(url + "/v1/specs").json()
    scored = httpx.post(url + "/v1/score", json={"items": [_code_item(0)]}, timeout=120).json()
    assert scored["results"][0]["score"] == 1.0
    assert httpx.get(url + "/readyz").json()["components"]["code_environment"] is True
    assert _metric(url, "proctor_environment_changes_total") == 0

    _install_dummy(mine)
    poll(lambda: status_of(url + "/readyz") == 503, timeout=60)

    ready = httpx.get(url + "/readyz").json()["components"]
    assert ready["code_environment"] is False and ready["workers"] and ready["sandbox"]
    assert httpx.get(url + "/v1/specs").json() == before  # the digest it started with
    math = {"domain": "math", "response": "\\boxed{4}", "reference": {"answer": "4"}}
    body = httpx.post(url + "/v1/score", json={"items": [_code_item(0), math]}, timeout=120).json()
    code, served = body["results"]
    assert code["status"] == "infra_error" and code["error"]["code"] == "environment_changed"
    assert before["environments"]["code"] in code["error"]["message"]
    assert served["status"] == "ok" and served["score"] == 1.0
    assert body["spec"]["hash"] == scored["spec"]["hash"]
    assert _metric(url, "proctor_environment_changes_total") == 1
    text = log.read_text()
    assert "the code environment changed" in text and "+proctor-probe-dummy 1.0" in text

    # a restart (here: `proctor specs` where the server runs) probes the new environment
    now = _proctor("specs", "--spec-dir", str(TEST_SPECS), wrap=wrap)
    other = now.splitlines()[0].split()[3]
    assert other.startswith("sha256:") and other != before["environments"]["code"]
    hashes = {s["name"]: s["hash"] for s in before["specs"]}
    assert all(hashes[name] != h for name, h in _listed(now).items())


@dataclass
class MovingTag:
    """A tag of its own on the sandbox image, and another image to move it to: the sandbox
    image plus `/etc/proctor-retag`, which a program can read."""

    engine: Any
    repository: str
    tag: str
    base: Any
    other: Any

    @property
    def image(self) -> str:
        return f"{self.repository}:{self.tag}"

    def move(self) -> None:
        self.other.tag(self.repository, self.tag)


@pytest.fixture
def moving_tag() -> Iterator[MovingTag]:
    try:
        engine = docker.from_env(timeout=120)
        named = os.environ.get("PROCTOR_SANDBOX_IMAGE", DEFAULT_IMAGE)
        base = engine.images.get(named)
    except docker.errors.DockerException as exc:
        unavailable(f"docker: {exc}")
    repository, tag = "proctor-sandbox-retag", secrets.token_hex(4)
    # FROM a local image: the build pulls nothing
    dockerfile = f"FROM {named}\nUSER root\nRUN echo {tag} > /etc/proctor-retag\n"
    built: list[str] = []
    try:
        other, _ = engine.images.build(fileobj=io.BytesIO(dockerfile.encode()), rm=True)
        built.append(other.id)
        base.tag(repository, tag)
        assert other.id != base.id
        yield MovingTag(engine, repository, tag, base, other)
    finally:
        for leftover in (f"{repository}:{tag}", *built):  # the tag, then the image it left
            with contextlib.suppress(docker.errors.ImageNotFound):
                engine.images.remove(leftover, force=True)
        engine.close()


_READ_MARK = RunRequest(
    files={},
    executions=[Execution(("sh", "-c", "cat /etc/proctor-retag || echo none"))],
)


@pytest.mark.docker
def test_a_docker_backend_runs_the_image_it_opened_with_after_its_tag_moves(
    moving_tag: MovingTag,
) -> None:
    settings = sandbox_settings("docker", image=moving_tag.image, pool_size=1, recycle_after=1)
    backend = open_or_skip(settings)
    try:
        pinned = backend.same_environment(settings)
        assert pinned.image == moving_tag.base.id
        moving_tag.move()
        # started before the move, then after it: the image opened with, each time
        for _ in range(2):
            (run,) = backend.run(_READ_MARK).executions
            assert run.stdout == b"none\n"
        poll(lambda: backend.environment_changed() is not None, timeout=30)
        changed = backend.environment_changed()
        assert changed is not None and f"is {moving_tag.other.id} now" in changed
        # the checkers' pool, opened only now, runs it too; a backend of the tag, the new one
        checkers = open_or_skip(checker_settings(pinned))
        fresh = open_or_skip(settings)
        try:
            assert checkers.run(_READ_MARK).executions[0].stdout == b"none\n"
            assert checkers.environment_changed() is None
            assert fresh.run(_READ_MARK).executions[0].stdout == f"{moving_tag.tag}\n".encode()
        finally:
            checkers.close()
            fresh.close()
    finally:
        backend.close()


@pytest.mark.docker
@pytest.mark.slow
def test_another_image_under_the_tag_stops_a_docker_servers_code_items(
    make_server: Callable[..., Server], moving_tag: MovingTag
) -> None:
    image, base, other = moving_tag.image, moving_tag.base, moving_tag.other
    # one sandbox, replaced after every request: each request is followed by a start
    sandbox = sandbox_settings("docker", image=image, pool_size=1, recycle_after=1)
    server = make_server(workers=1, sandbox=sandbox)
    before = httpx.get(server.url + "/v1/specs").json()
    first = httpx.post(server.url + "/v1/score", json={"items": [_code_item(0)]}, timeout=120)
    assert first.json()["results"][0]["score"] == 1.0
    assert len(caches.registered()["code.verdicts"]) > 0

    moving_tag.move()
    # the next request's sandbox was started before; the start after it finds the change
    httpx.post(server.url + "/v1/score", json={"items": [_code_item(1)]}, timeout=120)
    poll(lambda: status_of(server.url + "/readyz") == 503, timeout=60)

    ready = httpx.get(server.url + "/readyz").json()["components"]
    assert ready["code_environment"] is False and ready["sandbox"] is True
    assert httpx.get(server.url + "/v1/specs").json() == before
    assert len(caches.registered()["code.verdicts"]) == 0
    body = httpx.post(server.url + "/v1/score", json={"items": [_code_item(0)]}, timeout=120)
    (result,) = body.json()["results"]
    assert (result["status"], result["error"]["code"]) == ("infra_error", "environment_changed")
    assert f"{image!r} is {other.id} now, not {base.id}" in result["error"]["message"]
    assert _metric(server.url, "proctor_environment_changes_total") == 1


@pytest.mark.redis
@pytest.mark.slow
def test_a_worker_whose_environment_changes_stops_saying_it_is_alive(
    redis_server: RedisServer, tmp_path: Path, processes: list[Worker]
) -> None:
    _needs_namespaces()
    mine, wrap = _own_site_dir(tmp_path)
    argv = [sys.executable, "-m", "service.cli", "worker", "--queue", redis_server.url,
            "--domains", "code", "--spec-dir", str(TEST_SPECS), "--log-level", "info"]  # fmt: skip
    log = tmp_path / "worker.log"
    worker = Worker(_popen(wrap(argv), log, _env()), log)
    processes.append(worker)
    worker.wait_alive(redis_server.url)
    digest = _report(redis_server, worker).environment("code")

    _install_dummy(mine)
    poll(lambda: not any(worker.named(n) for n in _live(redis_server)), timeout=60)
    assert worker.process.poll() is None  # alive, and saying it may not take code chunks
    text = log.read_text()
    assert digest is not None and "the code environment changed" in text
    assert "+proctor-probe-dummy 1.0" in text
