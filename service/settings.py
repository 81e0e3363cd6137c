"""Every setting of the service, documented, in one place.

Read from the environment with the `PROCTOR_` prefix (nested fields use `__`, e.g.
`PROCTOR_SANDBOX__BACKEND=docker`) or passed explicitly by the CLI and the tests. Validators refuse
values that would make the service unsafe or unable to keep its promises (every item answered).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from sandboxes.settings import SandboxSettings

__all__ = ["Settings"]


def _cpu_count() -> int:
    return max(1, len(os.sched_getaffinity(0)))


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="PROCTOR_", env_nested_delimiter="__", extra="forbid", frozen=True
    )

    host: str = "127.0.0.1"
    """Interface `proctor serve` binds to."""
    port: int = Field(8000, ge=1, le=65535)

    default_spec: str = "prorl-v1-careful"
    """Spec used when a request names none."""
    spec_dirs: tuple[Path, ...] = ()
    """Extra directories of `*.toml` specs, loaded after the built-in ones."""
    registry: str = "reward_specs.domains:default_registry"
    """`module:function` returning the scorer registry; a seam for operators' own scorers."""

    queue: Literal["local"] = "local"
    """`local`: the embedded worker pool in this process (the only dispatcher so far)."""

    workers: int = Field(default_factory=_cpu_count, ge=1, le=512)
    """Worker processes for CPU-bound scorers (math, STEM, puzzles, IFEval); one per core."""
    thread_workers: int = Field(32, ge=1, le=1024)
    """Threads for scorers that wait on a sandbox (code)."""
    chunk_size: int = Field(0, ge=0, le=4096)
    """Items sent to a worker at a time; 0 picks one from the batch size and the pool size."""
    item_timeout_s: float = Field(30.0, gt=0, le=3600)
    """Hard limit on one item in a worker (a backstop behind the verifiers' own timeouts): the
    worker is killed and replaced, and the item is judged 0 with reason `timeout`."""
    worker_memory_mb: int = Field(4096, ge=256)
    """Address-space limit of each worker process, so a pathological expression raises
    MemoryError (judged 0) instead of exhausting the machine."""
    request_deadline_s: float = Field(300.0, gt=0, le=86400)
    """Items not scored within this time after a request arrives come back `infra_error`."""

    max_items_per_request: int = Field(16384, ge=1)
    max_response_bytes: int = Field(256 * 1024, ge=1)
    """Per item, UTF-8 bytes of `response`; a larger item is `invalid` (the batch goes on)."""
    max_request_bytes: int = Field(256 * 1024 * 1024, ge=1024)
    """Whole request body; a larger one is refused with 413 before it is parsed."""

    job_ttl_s: float = Field(3600.0, gt=0)
    """How long a finished job's results stay available at GET /v1/jobs/{id}."""
    max_jobs: int = Field(64, ge=1)
    """Jobs kept at once (running or finished); a new job beyond this is refused with 429."""

    sandbox: SandboxSettings = SandboxSettings()

    @model_validator(mode="after")
    def _deadline_covers_an_item(self) -> Settings:
        if self.request_deadline_s < self.item_timeout_s:
            raise ValueError("request_deadline_s must be at least item_timeout_s")
        return self
