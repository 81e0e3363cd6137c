"""Proctor's client SDK: score RL responses on a Proctor server, with the same reward semantics
an evaluator gets. Depends on httpx and pydantic only, so it installs on a trainer's GPU node.

Trainer integrations live in submodules imported on their own: `proctor_client.trl`,
`proctor_client.verl`, `proctor_client.skyrl` (needs skyrl-gym), `proctor_client.verifiers`
(needs verifiers); the error codes in `proctor_client.codes`.
"""

from proctor_client._async_client import AsyncJobs, AsyncProctorClient
from proctor_client._errors import ProctorError, ProctorUnreachable, ProctorValidationError
from proctor_client._models import (
    ErrorInfo,
    JobStatus,
    RunResult,
    ScoreItem,
    ScoreResult,
    SpecSummary,
)
from proctor_client._retry import Backoff
from proctor_client._sync_client import Jobs, ProctorClient

__all__ = [
    "AsyncJobs",
    "AsyncProctorClient",
    "Backoff",
    "ErrorInfo",
    "JobStatus",
    "Jobs",
    "ProctorClient",
    "ProctorError",
    "ProctorUnreachable",
    "ProctorValidationError",
    "RunResult",
    "ScoreItem",
    "ScoreResult",
    "SpecSummary",
]
