"""The code environment's digest: probed in the sandbox, it enters the code domain's part of the
spec hash and no other; two environments (the `local` jail on this host, which sees the host's
pip packages and toolchains, and the docker image) get different code hashes."""

from __future__ import annotations

from typing import Any

import pytest

from reward_specs import default_registry, load_specs
from reward_specs.code.environment import environment_digest, probe_environment
from sandboxes.api import SandboxBackend

REGISTRY = default_registry()


@pytest.fixture(scope="module")
def reports(local_backend: SandboxBackend, docker_backend: SandboxBackend) -> dict[str, Any]:
    return {"local": probe_environment(local_backend), "docker": probe_environment(docker_backend)}


@pytest.mark.docker
def test_the_probe_sees_the_interpreter_packages_and_toolchains(reports: dict[str, Any]) -> None:
    for report in reports.values():
        packages = dict(report["packages"])
        assert "numpy" in packages and "sortedcontainers" in packages, report
        assert set(report["tools"]) == {"g++", "javac", "node", "go", "rustc"}
        assert all(report["tools"].values()), report  # every toolchain is there
    # both Debian 12's 3.11, yet builds of different dates here: the digest tells them apart
    assert all(r["python"].startswith("3.11.") for r in reports.values())


@pytest.mark.docker
def test_two_environments_get_two_code_hashes_and_one_of_every_other(
    reports: dict[str, Any],
) -> None:
    plain = load_specs(REGISTRY)["prorl-v1"]
    local, docker = (
        load_specs(REGISTRY, environments={"code": environment_digest(reports[n])})["prorl-v1"]
        for n in ("local", "docker")
    )
    assert local.environments["code"] != docker.environments["code"]
    assert local.hash != docker.hash and plain.hash not in (local.hash, docker.hash)
    assert local.domain_hashes["code"] != docker.domain_hashes["code"]
    assert local.domain_hashes["code"] != plain.domain_hashes["code"]
    for domain in set(plain.domains) - {"code"}:
        assert local.domain_hashes[domain] == docker.domain_hashes[domain]
        assert local.domain_hashes[domain] == plain.domain_hashes[domain]


def test_the_probe_is_deterministic(local_backend: SandboxBackend) -> None:
    first, second = probe_environment(local_backend), probe_environment(local_backend)
    assert environment_digest(first) == environment_digest(second)


def test_a_package_more_or_less_is_another_digest(local_backend: SandboxBackend) -> None:
    # the jail with and without numpy importable: the same report but for that distribution
    report = probe_environment(local_backend)
    without = {**report, "packages": [p for p in report["packages"] if p[0] != "numpy"]}
    assert len(without["packages"]) == len(report["packages"]) - 1
    assert environment_digest(report) != environment_digest(without)


def test_without_environments_every_hash_is_as_before() -> None:
    plain = load_specs(REGISTRY)
    for spec in plain.values():
        assert "environments" not in spec.parameters()
        assert set(spec.domain_hashes) == set(spec.domains)
