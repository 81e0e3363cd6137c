"""What a run can see of other runs, and of its own item's expected outputs (issue 37), on both
backends: nothing. sandboxes/README.md states the property; each test here tries to break it the
way a policy would, with responses that know none of the secrets (random 32-hex markers) and scan
their memory (/proc/self/mem over every readable region of /proc/self/maps, raw and base64
decoded), their files (work directory, /tmp, /var/tmp, /dev/shm) and every other process they
can open in /proc.

- Remnants: a correct sample of a problem (stdio, `fn_name`, asserts) then probes in the same
  sandbox (a pool of one), and a second API key probing after the first through the service.
- Its own item: a probe whose expected outputs are markers, once per test shape (stdio,
  `fn_name`, asserts, `program`, checker).

Every remnant test is run twice: as the service runs (nothing is found) and with the test-only
hook that forks programs from the supervisor, as before the template (`_fork_supervisor`,
`SupervisorPool._supervisor_extra`), where the same probe must find the earlier run's markers:
so each of these tests fails when that fork comes back.
"""

from __future__ import annotations

import re
import secrets
import textwrap
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from reward_specs import Item, ScoreContext, default_registry, load_specs, score_item
from reward_specs.code import clear_cache
from sandboxes import SandboxBackend
from sandboxes._pool import SupervisorPool
from sandboxes.checkers import open_checker_backend
from tests.helpers import running_server
from tests.sandbox_fixtures import open_or_skip, sandbox_settings

REGISTRY = default_registry()
SPEC = load_specs(REGISTRY)["prorl-v1"]
LABEL = "proctor-test-remnants"
MARKER = re.compile(r"mk[0-9a-f]{32}")

SCAN = textwrap.dedent(
    r"""
    import base64, os, re, sys

    MARK = re.compile(rb"mk[0-9a-f]{32}")
    B64 = re.compile(rb"[A-Za-z0-9+/]{24,}")

    def scan(blob, found):
        found.update(MARK.findall(blob))
        for run in B64.findall(blob):
            for shift in range(4):  # a base64 string need not start where the run does
                part = run[shift:]
                part = part[: len(part) - len(part) % 4]
                try:
                    found.update(MARK.findall(base64.b64decode(part)))
                except ValueError:
                    pass

    def memory(path, found):
        try:
            maps = open(path + "/maps").read().splitlines()
            mem = open(path + "/mem", "rb", 0)
        except OSError:
            return
        with mem:
            for line in maps:
                fields = line.split()
                if not fields[1].startswith("r") or fields[-1] in ("[vvar]", "[vsyscall]"):
                    continue
                lo, hi = (int(x, 16) for x in fields[0].split("-"))
                for at in range(lo, hi, 1 << 24):
                    try:
                        mem.seek(at)
                        scan(mem.read(min(hi - at, (1 << 24) + 64)), found)
                    except (OSError, ValueError, OverflowError):
                        break

    def files(found):
        roots = [os.getcwd(), os.path.dirname(os.getcwd()), "/tmp", "/var/tmp", "/dev/shm"]
        for root in roots:
            for folder, _, names in os.walk(root):
                for name in names:
                    try:
                        with open(os.path.join(folder, name), "rb") as f:
                            scan(f.read(1 << 24), found)
                    except OSError:
                        pass

    def others(found):
        for pid in os.listdir("/proc"):
            if pid.isdigit() and int(pid) != os.getpid():
                for part in ("cmdline", "environ"):
                    try:
                        with open(f"/proc/{pid}/{part}", "rb") as f:
                            scan(f.read(), found)
                    except OSError:
                        pass
                memory(f"/proc/{pid}", found)

    def hunt(own=frozenset()):
        found = set()
        memory("/proc/self", found)
        files(found)
        others(found)
        return " ".join(sorted(m.decode() for m in found - own)) or "none"
    """
)
"""A probe's search; `hunt(own)` returns the markers it found but `own`, or "none"."""

PROBE = (
    f"```python\n{SCAN}\n"
    "own = set(MARK.findall(sys.stdin.buffer.read()))  # its own input is its own\n"
    "print(hunt(own))\n```"
)
"""A stdio response printing what it found."""
PROBE_ITEM = {"language": "python", "tests": {"stdio": [{"input": "", "output": "none"}]}}
"""A probe as an item of its own: it scores 1 when it found nothing."""


def marker() -> str:
    return "mk" + secrets.token_hex(16)


def derived(mark: str) -> str:
    """The output marker a victim computes from its input marker (in neither its code nor its
    input, so it exists only as an output)."""
    return "mk" + mark[2:][::-1]


def victim(shape: str, times: int = 1) -> tuple[str, dict[str, Any], set[str]]:
    """(a correct response, its item's reference, the markers of its code, input and output);
    stdio's input and output hold their marker `times` times."""
    code_mark, in_mark = marker(), marker()
    out_mark = derived(in_mark)
    solve = f"def f(s):  # {code_mark}\n    return 'mk' + s[2:][::-1]\n"
    tests: dict[str, Any]
    if shape == "stdio":
        solve += "print(*map(f, input().split()))\n"
        line = " ".join([in_mark] * times), " ".join([out_mark] * times)
        tests = {"stdio": [{"input": line[0] + "\n", "output": line[1] + "\n"}]}
    elif shape == "fn_name":
        tests = {"fn_name": "f", "cases": [{"args": [in_mark], "expected": out_mark}]}
    else:
        tests = {"asserts": [f"assert f({in_mark!r}) == {out_mark!r}"]}
    response = f"```python\n{solve}```"
    return response, {"language": "python", "tests": tests}, {code_mark, in_mark, out_mark}


def judge(response: str, reference: dict[str, Any], sandbox: Any, checkers: Any = None) -> Any:
    clear_cache()
    item = Item("code", response, reference)
    return score_item(REGISTRY, SPEC, item, ScoreContext(sandbox, checkers))


def got(outcome: Any) -> str:
    """What the response answered on its (first) test, as the verdict's diff shows it."""
    return str(outcome.details["tests"][0].get("diff", {}).get("got", ""))


@pytest.fixture(params=["today", "fork_supervisor"])
def hook(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Off: the service as it runs. On: pools opened in this test fork programs from the
    supervisor, as before the template (a test-only hook: no setting, no environment)."""
    if request.param == "fork_supervisor":
        monkeypatch.setattr(SupervisorPool, "_supervisor_extra", {"_fork_supervisor": True})
        return True
    return False


@pytest.fixture(params=["local", pytest.param("docker", marks=pytest.mark.docker)])
def kind(request: pytest.FixtureRequest) -> str:
    request.getfixturevalue(f"{request.param}_backend")  # skips, or fails in CI, without one
    return str(request.param)


@pytest.fixture
def one_sandbox(kind: str, hook: bool) -> Iterator[SandboxBackend]:
    """A pool of one sandbox: every request of the test meets the same supervisor."""
    backend = open_or_skip(sandbox_settings(kind, pool_size=1, docker_label=LABEL))
    yield backend
    backend.close()


def assert_found_or_not(hook: bool, probes: list[Any], marks: set[str]) -> None:
    answers = [got(p) for p in probes]
    if not hook:
        # The probes ran, searched, and found nothing of the earlier run.
        assert [(p.status, p.score) for p in probes] == [("ok", 1.0)] * len(probes), answers
    else:
        # The same probes, forked from the supervisor, do find the earlier run's markers.
        assert any(set(MARKER.findall(a)) & marks for a in answers), answers


@pytest.mark.parametrize("shape", ["stdio", "fn_name", "asserts"])
def test_a_response_finds_nothing_of_an_earlier_response(
    one_sandbox: SandboxBackend, hook: bool, shape: str
) -> None:
    response, reference, marks = victim(shape)
    good = judge(response, reference, one_sandbox)
    assert (good.status, good.score) == ("ok", 1.0), good
    probes = [judge(PROBE, PROBE_ITEM, one_sandbox) for _ in range(2)]
    assert_found_or_not(hook, probes, marks)


def test_a_second_key_finds_nothing_of_the_first(kind: str, hook: bool) -> None:
    key_a, key_b = "proctor-remnant-key-a-0001", "proctor-remnant-key-b-0002"
    sandbox = sandbox_settings(kind, pool_size=1, docker_label=LABEL)
    # Through the service the old fork's leak depends on what the allocator reuses: a longer
    # output and input than one marker leave it more than one chance.
    response, reference, marks = victim("stdio", times=64)
    with (
        running_server(workers=1, api_keys=(key_a, key_b), sandbox=sandbox) as server,
        httpx.Client(base_url=server.url, timeout=300) as http,
    ):

        def post(key: str, response: str, reference: dict[str, Any]) -> dict[str, Any]:
            body = {"items": [{"domain": "code", "response": response, "reference": reference}]}
            answer = http.post("/v1/score", json=body, headers={"Authorization": f"Bearer {key}"})
            assert answer.status_code == 200, answer.text
            result: dict[str, Any] = answer.json()["results"][0]
            return result

        # a first item of key A, then two samples of its secret problem, as a trainer sends them
        warm = victim("stdio")[:2]
        samples = [warm, (response, reference), (response.replace("def f", "\ndef f"), reference)]
        for sample, problem in samples:
            first = post(key_a, sample, problem)
            assert (first["status"], first["score"]) == ("ok", 1.0), first
        # probes of their own, run, not answered by a cache from another test or each other
        unique = [PROBE.replace("own =", f"# {marker()[2:]}\nown =") for _ in range(3)]
        probes = [post(key_b, probe, PROBE_ITEM) for probe in unique]
    answers = [str(p["details"]["tests"][0].get("diff", {}).get("got", "")) for p in probes]
    if not hook:
        assert [(p["status"], p["score"]) for p in probes] == [("ok", 1.0)] * 3, answers
    else:
        assert any(set(MARKER.findall(a)) & marks for a in answers), answers


# ---------------------------------------------------------------- a response and its own item


def hunting(shape: str, secret: str) -> tuple[str, dict[str, Any]]:
    """(a probe, an item whose expected outputs are `secret`): the probe passes only by finding
    `secret`, which is nowhere but in its item's reference."""
    tests: dict[str, Any]
    if shape == "stdio":
        return PROBE, {"language": "python", "tests": {"stdio": [{"input": "", "output": secret}]}}
    if shape == "checker":
        judge_source = (
            "import sys\n"
            "sys.exit(open(sys.argv[2]).read().split() != open(sys.argv[3]).read().split())\n"
        )
        tests = {
            "stdio": [{"input": "", "output": secret}],
            "checker": {"language": "python", "source": judge_source},
        }
    elif shape == "fn_name":
        tests = {"fn_name": "hunt", "cases": [{"args": [], "expected": secret}]}
    elif shape == "asserts":
        tests = {"asserts": [f"assert hunt() == {secret!r}"]}
    else:
        program = f"from solution import hunt\n\ndef test_it():\n    assert hunt() == {secret!r}\n"
        tests = {"program": program}
    response = PROBE if shape == "checker" else f"```python\n{SCAN}```"
    return response, {"language": "python", "tests": tests}


@pytest.fixture
def both_pools(kind: str) -> Iterator[tuple[SandboxBackend, Any]]:
    settings = sandbox_settings(kind, pool_size=1, docker_label=LABEL)
    backend = open_or_skip(settings)
    checkers = open_checker_backend(settings)
    yield backend, checkers
    checkers.close()
    backend.close()


@pytest.mark.parametrize("shape", ["stdio", "fn_name", "asserts", "program", "checker"])
def test_a_response_cannot_find_its_own_expected_outputs(
    both_pools: tuple[SandboxBackend, Any], shape: str
) -> None:
    backend, checkers = both_pools
    secret = marker()
    response, reference = hunting(shape, secret)
    outcome = judge(response, reference, backend, checkers)
    assert (outcome.status, outcome.score) == ("ok", 0.0), outcome
    # The probe ran and searched (it passes where the expected output is what it finds).
    control = {**reference, "tests": hunting(shape, "none")[1]["tests"]}
    ran = judge(response, control, backend, checkers)
    assert (ran.status, ran.score) == ("ok", 1.0), ran


# ---------------------------------------------------------------- a program against the template


@pytest.fixture
def plain_sandbox(kind: str) -> Iterator[SandboxBackend]:
    backend = open_or_skip(sandbox_settings(kind, pool_size=1, docker_label=LABEL))
    yield backend
    backend.close()


@pytest.mark.parametrize("sig", ["SIGKILL", "SIGSTOP"])
def test_a_program_signalling_the_template_is_judged_as_without(
    plain_sandbox: SandboxBackend, sig: str, kind: str
) -> None:
    # kill(-1) reaches every process the program may signal: on docker (one uid for all) the
    # template too. Killed, the rest of the request runs exec'd and the sandbox is replaced;
    # stopped, the supervisor wakes it after the step.
    response = (
        "```python\nimport os, signal\n"
        f"if input() == 'first':\n    try:\n        os.kill(-1, signal.{sig})\n"
        "    except OSError:\n        pass\n"
        "print('done')\n```"
    )
    tests = [{"input": "first\n", "output": "done\n"}, {"input": "second\n", "output": "done\n"}]
    reference = {"language": "python", "tests": {"stdio": tests}}
    outcome = judge(response, reference, plain_sandbox)
    assert (outcome.status, outcome.score) == ("ok", 1.0), outcome
    good, reference, _ = victim("stdio")
    after = judge(good, reference, plain_sandbox)
    assert (after.status, after.score) == ("ok", 1.0), after
    if kind == "docker":  # elsewhere programs run as another uid: the template is out of reach
        replaced = plain_sandbox.stats().retired
        assert replaced == (1 if sig == "SIGKILL" else 0), plain_sandbox.stats()
