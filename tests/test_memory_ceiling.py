"""The API process stays under the memory ceiling of docs/operating.md (`service.core.memory`), at
the default settings: a real `proctor serve` whose finished jobs' store is filled past its byte
limit with distinct results (each job's items echo 60 KB of `meta` of their own, so a few jobs
reach the limit without scoring millions of items), with a running job holding a large request
besides. Its peak RSS, not only its RSS at the end, is compared."""

from __future__ import annotations

from collections.abc import Callable

import httpx

from service.core.memory import ceiling_bytes
from service.settings import Settings
from tests.test_job_limits import job, padded, run, serve_process, submit

__all__ = ["serve_process"]  # the fixture, for pytest

PAD = 60_000
ITEMS = 500
"""Each job's request and result: about 30 MB, within max_running_job_bytes."""


def _rss(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (the peak) of `pid`, in bytes."""
    with open(f"/proc/{pid}/status") as status:
        fields = dict(line.split(":", 1) for line in status)
    return {name: int(fields[name].split()[0]) * 1024 for name in ("VmRSS", "VmHWM")}


def test_full_job_stores_keep_the_api_under_the_documented_ceiling(
    serve_process: Callable[..., tuple[str, int]],
) -> None:
    defaults = Settings()
    url, pid = serve_process()
    jobs = [run(url, padded(ITEMS, PAD, f"j{n}")) for n in range(11)]  # ~330 MB of results
    kept = [job(url, job_id).status_code for job_id in jobs]
    assert kept[:3] == [404, 404, 404] and kept[-1] == 200, kept  # the bytes limit held
    sleepers = [
        {"domain": "sleep", "response": "ok", "reference": {"seconds": 30 + k / 1000}}
        | {"meta": item["meta"]}
        for k, item in enumerate(padded(ITEMS, PAD, "sleep"))
    ]
    running = submit(url, sleepers)
    reply = job(url, jobs[-1])  # the newest result, read while the other job runs
    assert len(reply.json()["result"]["results"]) == ITEMS
    used = _rss(pid)
    ceiling = ceiling_bytes(defaults)
    assert used["VmHWM"] <= ceiling, (used, ceiling)
    assert httpx.delete(f"{url}/v1/jobs/{running}", timeout=60).status_code == 200
    print(f"API RSS {used['VmRSS'] >> 20} MiB, peak {used['VmHWM'] >> 20} MiB, "
          f"ceiling {ceiling >> 20} MiB")  # fmt: skip


def test_the_ceiling_at_the_default_settings_is_at_most_2_gib() -> None:
    assert ceiling_bytes(Settings()) <= 2 * 1024**3
