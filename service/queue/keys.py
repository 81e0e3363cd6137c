"""Queue mode's Redis key names, in one place: the chunks' (the API side and the workers) and the
jobs' (`service.queue.job_store`), and the RQ job function's import path.

Keys (all under `proctor:`), besides RQ's own (`rq:queue:proctor-<domain>`, and
`rq:queue:proctor-code@<digest>` for code, one per environment; jobs, registries):

- `proctor:alive:<worker>`: a worker's `WorkerReport` (the domains it serves, its sandbox's
  environment digest, its pool's counts), while it is alive and warm (expires `ALIVE_TTL_S`
  after its last refresh), and `proctor:workers`, the set of workers that have said so (the
  API side drops those whose key has expired);
- `proctor:claim:<job>`: the worker that took a chunk's job (kept until the batch is over);
- `proctor:lease:<job>`: held while that worker scores the chunk (expires `LEASE_TTL_S` after its
  last refresh): a claim without a lease is a chunk whose worker is gone;
- `proctor:results:<batch>`: the list a batch's outcomes are pushed on, one entry per chunk;
- `proctor:run-results:<api>`: the list an API process's runs' answers are pushed on (runs go on
  RQ's `rq:queue:proctor-run`; their claims and leases are named by their job ids, as chunks');
- `proctor:inflight`: batch -> "<items> <expiry>", the items waiting for a result (the queue
  depth `max_queue_depth` bounds), across API replicas.

Jobs (`service.queue.job_store`): `proctor:job:<id>` (its hash), `proctor:job-lease:<id>`,
`proctor:job-body:<id>`, `proctor:jobs:running`, `proctor:jobs:finished` and
`proctor:jobs:finished-bytes`.
"""

from __future__ import annotations

__all__ = [
    "FINISHED_BYTES_KEY",
    "FINISHED_JOBS_KEY",
    "INFLIGHT_KEY",
    "JOB_FUNCTION",
    "JOB_PREFIX",
    "RUNNING_JOBS_KEY",
    "RUN_FUNCTION",
    "RUN_QUEUE",
    "WORKERS_KEY",
    "alive_key",
    "claim_key",
    "job_body_key",
    "job_key",
    "job_lease_key",
    "lease_key",
    "queue_name",
    "results_key",
    "run_results_key",
]

JOB_FUNCTION = "service.queue.worker.score_chunk"
"""What RQ imports to run a chunk's job: API side and workers must agree on it."""
RUN_FUNCTION = "service.queue.worker.run_program"
"""What RQ imports to run a run's job (`service.queue.run_queue`)."""
RUN_QUEUE = "proctor-run"
"""The RQ queue of runs (`POST /v1/run`, the compatibility routes' programs)."""

INFLIGHT_KEY = "proctor:inflight"
WORKERS_KEY = "proctor:workers"
RUNNING_JOBS_KEY = "proctor:jobs:running"
FINISHED_JOBS_KEY = "proctor:jobs:finished"
FINISHED_BYTES_KEY = "proctor:jobs:finished-bytes"
JOB_PREFIX = "proctor:job:"


def queue_name(domain: str, environment: str | None = None) -> str:
    """The RQ queue of a domain's chunks (one queue per domain, so workers can pick domains);
    a sandboxed domain's chunks go on one queue per environment digest, so that only workers
    whose sandbox has that digest take them."""
    if environment is None:
        return f"proctor-{domain}"
    return f"proctor-{domain}@{environment}"


def _key(kind: str, name: str) -> str:
    return f"proctor:{kind}:{name}"


def alive_key(worker: str) -> str:
    return _key("alive", worker)


def claim_key(job_id: str) -> str:
    return _key("claim", job_id)


def lease_key(job_id: str) -> str:
    return _key("lease", job_id)


def results_key(batch_id: str) -> str:
    return _key("results", batch_id)


def run_results_key(api: str) -> str:
    """The list the workers push an API process's runs' answers on."""
    return _key("run-results", api)


def job_key(job_id: str) -> str:
    return f"{JOB_PREFIX}{job_id}"


def job_lease_key(job_id: str) -> str:
    return _key("job-lease", job_id)


def job_body_key(job_id: str) -> str:
    return _key("job-body", job_id)
