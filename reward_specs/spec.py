"""Versioned reward specs: every parameter that can change a reward, pinned in a TOML file.

A spec file names itself, carries a version, and configures the response pre-processing, the
termination penalties and each domain's scorer; domains it does not mention get their defaults,
written out in full in the resolved spec so that the hash covers them. The hash also covers the
versions of Proctor and of every verifier library a registered scorer declares, so the same hash
means the same reward for the same input.
"""

from __future__ import annotations

import hashlib
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from importlib import metadata
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from reward_specs.canonical import canonical_text
from reward_specs.registry import Registry
from reward_specs.scorer import DomainConfig
from reward_specs.termination import TerminationConfig

__all__ = [
    "BUILTIN_SPEC_DIR",
    "ResponseConfig",
    "Spec",
    "SpecError",
    "load_spec_file",
    "load_specs",
]

BUILTIN_SPEC_DIR = Path(__file__).parent / "specs"


class SpecError(ValueError):
    """A spec file is unreadable or inconsistent; raised at load time, never while scoring."""


class ResponseConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    strip_reasoning: bool = True
    """Judge only the text after the last `</think>`; a response whose `<think>` never closes has
    no answer at all."""


class _SpecFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(..., pattern=r"^[a-z0-9][a-z0-9._-]*$")
    version: str = Field(..., pattern=r"^\d+\.\d+\.\d+$")
    description: str = ""
    response: ResponseConfig = ResponseConfig()
    termination: TerminationConfig = TerminationConfig()
    domains: dict[str, dict[str, Any]] = {}


@dataclass(frozen=True)
class Spec:
    name: str
    version: str
    description: str
    response: ResponseConfig
    termination: TerminationConfig
    domains: Mapping[str, DomainConfig]
    libraries: Mapping[str, str]
    hash: str = field(default="")
    environments: Mapping[str, str] = field(default_factory=dict)
    """Content digests of the environments domains run in (`{"code": "sha256:..."}`, see
    `reward_specs.code.environment`), given to `load_specs`; each enters the spec hash and its
    domain's hash only."""
    domain_hashes: Mapping[str, str] = field(default_factory=dict)
    """Per domain, a hash of everything that can change that domain's rewards: the response and
    termination settings, its config, the libraries, and its environment's digest if any."""

    def config(self, domain: str) -> DomainConfig:
        return self.domains[domain]

    def parameters(self) -> dict[str, Any]:
        """Everything that can change a reward, as plain JSON data."""
        return {
            "response": self.response.model_dump(mode="json"),
            "termination": self.termination.model_dump(mode="json"),
            "domains": {d: c.model_dump(mode="json") for d, c in sorted(self.domains.items())},
            "libraries": dict(sorted(self.libraries.items())),
            # only when given, and only its own domains' (an opt-in domain's environment
            # leaves the specs that do not name it alone), so that such a spec keeps its hash
            **({"environments": own} if (own := self._own_environments()) else {}),
        }

    def _own_environments(self) -> dict[str, str]:
        return {d: e for d, e in sorted(self.environments.items()) if self._runs_in(d)}

    def _runs_in(self, environment: str) -> bool:
        """Whether some domain of this spec depends on `environment`: its own domain's, or the
        judge's for a domain with a judge stage (math's `judge`)."""
        return environment in self.domains or (
            environment == "judge"
            and any(getattr(c, "judge", None) is not None for c in self.domains.values())
        )

    def domain_parameters(self, domain: str) -> dict[str, Any]:
        """What can change `domain`'s rewards, as plain JSON data (its part of the spec hash)."""
        part: dict[str, Any] = {
            "response": self.response.model_dump(mode="json"),
            "termination": self.termination.model_dump(mode="json"),
            "domain": {domain: self.domains[domain].model_dump(mode="json")},
            "libraries": dict(sorted(self.libraries.items())),
        }
        if domain in self.environments:
            part["environment"] = self.environments[domain]
        if (
            getattr(self.domains[domain], "judge", None) is not None
            and "judge" in self.environments
        ):
            part["judge_environment"] = self.environments["judge"]  # a judge stage's models
        return part

    def summary(self) -> dict[str, str]:
        return {"name": self.name, "version": self.version, "hash": self.hash}


def _library_versions(registry: Registry) -> dict[str, str]:
    names = {"proctor"} | {lib for scorer in registry for lib in scorer.libraries}
    versions = {}
    for name in sorted(names):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not-installed"
    return versions


def _spec_hash(parameters: Mapping[str, Any]) -> str:
    return "sha256:" + hashlib.sha256(canonical_text(parameters).encode()).hexdigest()


def _resolve(
    raw: _SpecFile, registry: Registry, source: str, environments: Mapping[str, str] | None = None
) -> Spec:
    unknown = sorted(set(raw.domains) - set(registry.domains()))
    if unknown:
        raise SpecError(f"{source}: unknown domain(s) {', '.join(unknown)}")
    domains: dict[str, DomainConfig] = {}
    for scorer in registry:
        if scorer.opt_in and scorer.domain not in raw.domains:
            continue
        try:
            domains[scorer.domain] = scorer.config_type.model_validate(
                raw.domains.get(scorer.domain, {})
            )
        except ValidationError as exc:
            raise SpecError(f"{source}: domains.{scorer.domain}: {exc}") from exc
    spec = Spec(
        **{
            **dict(raw),  # the file's fields, with its raw domain tables replaced by their configs
            "domains": domains,
            "libraries": _library_versions(registry),
            "environments": dict(environments or {}),
        }
    )
    domain_hashes = {d: _spec_hash(spec.domain_parameters(d)) for d in sorted(domains)}
    return replace(spec, hash=_spec_hash(spec.parameters()), domain_hashes=domain_hashes)


def load_spec_file(
    path: Path, registry: Registry, environments: Mapping[str, str] | None = None
) -> Spec:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        raw = _SpecFile.model_validate(data)
    except (OSError, tomllib.TOMLDecodeError, ValidationError) as exc:
        raise SpecError(f"{path}: {exc}") from exc
    if raw.name != path.stem:
        raise SpecError(f"{path}: the spec is named {raw.name!r} but the file is {path.name!r}")
    return _resolve(raw, registry, str(path), environments)


def load_specs(
    registry: Registry,
    directories: tuple[Path, ...] = (BUILTIN_SPEC_DIR,),
    environments: Mapping[str, str] | None = None,
) -> dict[str, Spec]:
    """Load every `*.toml` spec in `directories`; a name defined twice is an error.
    `environments`: digests of the environments domains run in (see `Spec.environments`)."""
    specs: dict[str, Spec] = {}
    for directory in directories:
        for path in sorted(directory.glob("*.toml")):
            spec = load_spec_file(path, registry, environments)
            if spec.name in specs:
                raise SpecError(f"{path}: spec {spec.name!r} is defined twice")
            specs[spec.name] = spec
    return specs
