"""A judge endpoint as the server's settings name it (`judge_endpoints`), kept apart from the
client so that the settings read it without importing the domain or httpx."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["DEFAULT_CACHE_BYTES", "Endpoint"]

DEFAULT_CACHE_BYTES = 64 * 1024 * 1024
"""`judge_cache_bytes`'s default: replies kept per process, in bytes of their text."""


class Endpoint(BaseModel):
    """One judge endpoint of the server's `judge_endpoints` (by name)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str = Field(..., pattern=r"^https?://")
    """The OpenAI base URL, with its `/v1`: calls go to `{url}/chat/completions`."""
    api_key_file: Path | None = None
    """A file holding the endpoint's key (its first line), read at start."""
    api_key_env: str | None = None
    """An environment variable holding the key. Neither: no Authorization header is sent."""
    timeout_s: float = Field(60.0, gt=0, le=3600)
    """A call not answered within this is `infra_error` `judge_timeout`."""
    max_concurrency: int = Field(64, ge=1, le=4096)
    """Calls in flight at once to this endpoint from one process."""
    requests_per_minute: int | None = Field(None, ge=1)
    """Calls started per minute from one process; None: no limit."""

    @model_validator(mode="after")
    def _one_key_source(self) -> Endpoint:
        if self.api_key_file is not None and self.api_key_env is not None:
            raise ValueError("give api_key_file or api_key_env, not both")
        return self

    def api_key(self) -> str | None:
        """The key, from its file or variable; None when neither is set. Raises ValueError
        when the one named is missing or empty."""
        if self.api_key_file is not None:
            lines = self.api_key_file.read_text(encoding="utf-8").splitlines()
            key = lines[0].strip() if lines else ""
        elif self.api_key_env is not None:
            key = os.environ.get(self.api_key_env, "").strip()
        else:
            return None
        if not key:
            raise ValueError("the judge endpoint's API key is empty")
        return key
