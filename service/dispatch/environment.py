"""The code sandbox's environment while a service runs: probed once at start, watched after.

A spec's code hash names the environment its verdicts come from (`reward_specs.code.
environment`), so a service must notice when that environment is no longer the one it probed.
`EnvironmentWatch.check`, called every second by the embedded dispatcher, finds a change three
ways: the backend says so (docker: the image's tag names another image, checked before each
sandbox start), the host's stamp changed (the sandbox interpreter's path directories and the
package database, as `local` sees the host's /usr) and a new probe disagrees, or a probe
`environment_probe_interval_s` after the last one disagrees. A change is for good: the service
keeps the digest it started with, and its dispatcher makes the domain's items `infra_error`
(`environment_changed`) until a restart probes the new environment.

`probe_digests` is the probe a service runs at start, for `proctor specs` as well, so that every
command of one host and environment reports the same hashes.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from reward_specs import Registry
from reward_specs.code.environment import environment_digest, probe_environment, stamp, stamp_paths
from sandboxes import SandboxBackend, SandboxError, SandboxSettings, open_backend
from service.dispatch.base import sandboxed_domains

__all__ = ["EnvironmentWatch", "changed_packages", "probe_configured", "probe_digests"]

log = logging.getLogger(__name__)


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


def changed_packages(before: Mapping[str, Any], after: Mapping[str, Any]) -> str:
    """What differs between two probe reports, in a few words for a log line."""
    old, new = dict(before.get("packages", ())), dict(after.get("packages", ()))
    parts = [f"+{n} {new[n]}" for n in sorted(new.keys() - old.keys())]
    parts += [f"-{n} {old[n]}" for n in sorted(old.keys() - new.keys())]
    parts += [
        f"{n} {old[n]} -> {new[n]}" for n in sorted(old.keys() & new.keys()) if old[n] != new[n]
    ]
    for key in ("python", "tools"):
        if before.get(key) != after.get(key):
            parts.append(f"{key} differs")
    return ", ".join(parts[:20]) + (f" (and {len(parts) - 20} more)" if len(parts) > 20 else "")


class EnvironmentWatch:
    """Whether `sandbox`'s environment is still the one probed in `report` (digest `digest`);
    `others` are backends of the same environment that can only say so themselves (the code
    domain's checkers).

    `check` may be called from any thread; `changed` (why, once changed, else None) and
    `changes` may be read from any. `on_change` is called once, before `changed` is set."""

    def __init__(
        self,
        sandbox: SandboxBackend,
        report: Mapping[str, Any],
        interval_s: float,
        on_change: Callable[[], None],
        others: Sequence[SandboxBackend] = (),
    ) -> None:
        self.digest = environment_digest(dict(report))
        self.changed: str | None = None
        self._sandbox = sandbox
        self._backends = (sandbox, *others)
        self._report = report
        self._interval_s = interval_s
        self._on_change = on_change
        self._paths = stamp_paths(dict(report))
        self._stamp = stamp(self._paths)
        self._probed_at = time.monotonic()
        self._lock = threading.Lock()

    @property
    def changes(self) -> int:
        """Changes found (0 or 1: the first is kept until a restart)."""
        return int(self.changed is not None)

    def check(self) -> None:
        """Look for a change now (blocking: it may run a probe in the sandbox)."""
        with self._lock:
            if self.changed is not None:
                return
            why = next(filter(None, (b.environment_changed() for b in self._backends)), None)
            if why is None:
                why = self._probe_if_due()
            if why is None:
                return
            self._on_change()  # first: once `changed` is seen, what it empties is empty
            self.changed = why
        log.error(
            "the code environment changed: %s; code items are infra_error (environment_changed) "
            "until a restart, which probes the new environment",
            why,
        )

    def _probe_if_due(self) -> str | None:
        now, current = time.monotonic(), stamp(self._paths)
        if current == self._stamp and now - self._probed_at < self._interval_s:
            return None
        # Whatever the probe says, the next one waits for another change or interval: a probe
        # that fails (a package half installed) is not retried every second.
        self._stamp, self._probed_at = current, now
        try:
            report = probe_environment(self._sandbox)
        except SandboxError as exc:
            log.warning("probing the code environment again failed: %s", exc)
            return None
        digest = environment_digest(report)
        if digest == self.digest:
            return None
        return (
            f"the sandbox's environment is {digest} now, not {self.digest} "
            f"({changed_packages(self._report, report)})"
        )
