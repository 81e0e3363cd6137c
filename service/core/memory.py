"""The API process's memory ceiling as a formula of the settings (docs/operating.md, "Memory"): what
each bounded store may hold, plus the process itself. The constants are measured
(tests/test_memory_ceiling.py holds a real `proctor serve` under the result)."""

from __future__ import annotations

from service.settings import Settings
from service.work.sampling import MAX_SAMPLE_BYTES

__all__ = [
    "BASELINE_BYTES",
    "DECODED_FACTOR",
    "JOB_BYTES",
    "RESULT_BYTES",
    "SAMPLE_COPIES",
    "ceiling_bytes",
]

MiB = 1024 * 1024

BASELINE_BYTES = 448 * MiB
"""An idle API process with every domain loaded, with room to spare."""
DECODED_FACTOR = 8
"""Bytes of a decoded request per byte of its JSON: about 1 for long text, up to this for items
made of many small numbers (a body of nothing but empty containers decodes larger)."""
RESULT_BYTES = 2048
"""One item's result as objects, while its job or request runs."""
JOB_BYTES = 2048
"""A finished job's record beside its encoded result."""
SAMPLE_COPIES = 4
"""Copies of a sampling call's entries the API holds at once: the child's bytes, the decoded
entries, the response model and its encoded body."""


def ceiling_bytes(settings: Settings) -> int:
    """The most the API process should hold: its baseline, the request bodies read and decoded
    at once, the running jobs (their decoded requests and results), the finished jobs (their
    encoded results) and the puzzle sampling calls' entries on their way back from their child
    processes."""
    running = DECODED_FACTOR * settings.max_running_job_bytes
    running += settings.max_jobs * settings.max_items_per_request * RESULT_BYTES
    finished = settings.max_finished_job_bytes + settings.max_finished_jobs * JOB_BYTES
    sampling = settings.sample_processes * SAMPLE_COPIES * MAX_SAMPLE_BYTES
    inflight = DECODED_FACTOR * settings.max_inflight_request_bytes
    return BASELINE_BYTES + running + finished + sampling + inflight
