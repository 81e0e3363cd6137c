"""`frames.encode_request` writes its frame piece by piece: byte for byte what `encode_frame`
(the general JSON encoder) writes for the request's object, whatever the names, argv and bytes."""

from __future__ import annotations

import base64
import random
from typing import Any

import pytest

from sandboxes import frames
from sandboxes.api import Execution, Limits, RunRequest


def _reference_object(request: RunRequest, shared: dict[str, Any] | None) -> dict[str, Any]:
    """The request's JSON object as the frame's reader sees it (the encoder's input before)."""

    def execution(ex: Execution) -> dict[str, Any]:
        return {"argv": list(ex.argv), "stdin": base64.b64encode(ex.stdin).decode()}

    files = {k: base64.b64encode(v).decode() for k, v in request.files.items()}
    if shared is None:
        files.update((k, base64.b64encode(v).decode()) for k, v in request.shared_files.items())
    return {
        "files": files,
        "shared": shared,
        "build": None if request.build is None else execution(request.build),
        "executions": [execution(e) for e in request.executions],
        "limits": {f: getattr(request.limits, f) for f in frames._LIMIT_FIELDS},
    }


_NAMES = ["solution.py", "job.marshal", "dir/ünï.txt", 'q"uote\\.py', "tab\there", "€/x"]
_ARGS = ["python3", "-I", "a b", "é", '"', "\\", "\n", "\u2028", "\U0001f600", ""]


def _request(rng: random.Random) -> RunRequest:
    names = rng.sample(_NAMES, rng.randint(0, len(_NAMES)))
    cut = rng.randint(0, len(names))

    def blob() -> bytes:
        return rng.randbytes(rng.randint(0, 40))

    def execution() -> Execution:
        argv = [rng.choice(_ARGS) for _ in range(rng.randint(1, 4))]
        return Execution(argv if rng.random() < 0.5 else tuple(argv), blob())

    limits = Limits(
        cpu_budget_s=rng.choice([5, 5.0, 0.1, 1e-7, 12345.678]),
        memory_bytes=rng.choice([1, 2**40]),
        stack_bytes=rng.choice([None, 8 << 20]),
    )
    return RunRequest(
        files={n: blob() for n in names[:cut]},
        shared_files={n: blob() for n in names[cut:]},
        executions=[execution() for _ in range(rng.randint(0, 3))],
        build=execution() if rng.random() < 0.3 else None,
        limits=limits,
    )


@pytest.mark.parametrize("with_blobs", [False, True])
def test_encode_request_is_the_general_encoders_frame(with_blobs: bool) -> None:
    rng = random.Random(7)
    blobs = frames.BlobCache() if with_blobs else None
    for _ in range(500):
        request = _request(rng)
        before = frames.BlobCache() if blobs is None else blobs
        # What the blob cache says for this request, from a copy in the same state.
        twin = frames.BlobCache()
        twin._keys, twin._bytes = dict(before._keys), before._bytes
        shared = twin.encode(request.shared_files) if blobs is not None else None
        expected = frames.encode_frame(_reference_object(request, shared))
        assert frames.encode_request(request, blobs) == expected


def test_equal_limits_of_other_types_are_written_as_they_are() -> None:
    """Limits are remembered by identity: 5 and 5.0 are equal, their JSON is not."""
    as_int = frames.encode_request(RunRequest({}, [], limits=Limits(cpu_budget_s=5)))
    as_float = frames.encode_request(RunRequest({}, [], limits=Limits(cpu_budget_s=5.0)))
    assert b'"cpu_budget_s":5,' in as_int
    assert b'"cpu_budget_s":5.0,' in as_float


def _old_harness_job_file(job: dict[str, Any], first: int, max_value_bytes: int) -> bytes:
    """The job file as `harness_request` wrote it before it kept it (the same steps)."""
    import marshal

    job = {**job, "first": first}
    job = {**job, "solution": "solution.py", "max_value_bytes": max_value_bytes}
    return marshal.dumps(job)


@pytest.mark.parametrize("first", [0, 3, 1000])
def test_the_kept_harness_job_file_is_the_one_written_before(first: int) -> None:
    from reward_specs.code import CodeConfig
    from reward_specs.code.harness import _job
    from reward_specs.code.reference import AssertTests
    from reward_specs.code.requests import harness_request, sandbox_limits

    config = CodeConfig()
    tests = AssertTests(asserts=["assert f(1) == 2", "assert g('é') in [1, (2, 3)]"])
    _, job = _job(tests)
    expected = _old_harness_job_file(job, first, config.max_value_bytes)
    for _ in range(2):  # written, then kept
        request = harness_request(b"x = 1\n", job, config, sandbox_limits(config), first)
        assert request.files["job.marshal"] == expected
