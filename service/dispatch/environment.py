"""The code sandbox's environment as a service probes it when it starts.

A spec's code hash names the environment its verdicts come from (`reward_specs.code.
environment`). `probe_digests` is the probe the embedded dispatcher runs when its sandbox opens;
`probe_configured` runs the same probe in a backend opened for it alone, for `proctor specs`, so
that every command of one host and environment reports the same hashes.
"""

from __future__ import annotations

from typing import Any

from reward_specs import Registry
from reward_specs.code.environment import environment_digest, probe_environment
from sandboxes import SandboxBackend, SandboxSettings, open_backend
from service.dispatch.base import sandboxed_domains

__all__ = ["probe_configured", "probe_digests"]


def probe_digests(sandbox: SandboxBackend, registry: Registry) -> tuple[dict[str, str], Any]:
    """The sandbox's environment digest for each domain of `registry` that runs in it (its
    `Dispatcher.environments`), and the probe's report. Raises SandboxError."""
    report = probe_environment(sandbox)
    digest = environment_digest(report)
    return {domain: digest for domain in sandboxed_domains(registry)}, report


def probe_configured(settings: SandboxSettings, registry: Registry) -> dict[str, str]:
    """`probe_digests` in a backend of `settings` opened for it alone (one sandbox), for a
    command that scores nothing (`proctor specs`); {} when no domain of `registry` runs in a
    sandbox. Raises SandboxError (SandboxUnavailable where the backend cannot run here) and
    ImportError (docker: the SDK is not installed)."""
    if not sandboxed_domains(registry):
        return {}
    sandbox = open_backend(settings.model_copy(update={"pool_size": 1}))
    try:
        return probe_digests(sandbox, registry)[0]
    finally:
        sandbox.close()
