"""The proctor-client distribution: a small declared surface, and requirements a GPU node can
take (httpx and pydantic; never the server's stack)."""

from __future__ import annotations

import email
import inspect
import subprocess
import sys
import types
import zipfile
from pathlib import Path

import proctor_client
from proctor_client import AsyncProctorClient, ProctorClient
from proctor_client._async_client import AsyncJobs
from proctor_client._sync_client import Jobs

CLIENTS = Path(__file__).parent.parent / "clients"


def test_all_is_exactly_the_public_surface() -> None:
    public = {
        name
        for name, value in vars(proctor_client).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert public == set(proctor_client.__all__)
    assert sorted(proctor_client.__all__) == proctor_client.__all__
    for name in proctor_client.__all__:
        assert getattr(proctor_client, name).__module__.startswith("proctor_client._")
    assert (CLIENTS / "proctor_client" / "py.typed").exists()


def test_the_built_wheel_requires_httpx_and_pydantic_only(tmp_path: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "-q",
            "-w",
            str(tmp_path),
            str(CLIENTS),
        ],
        check=True,
        timeout=300,
    )
    (wheel,) = tmp_path.glob("proctor_client-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        metadata = email.message_from_bytes(archive.read(name))
        files = archive.namelist()
    required = [r for r in metadata.get_all("Requires-Dist") or [] if "extra ==" not in r]
    names = {
        r.split(";")[0].split(">")[0].split("=")[0].split("<")[0].strip().lower() for r in required
    }
    assert names == {"httpx", "pydantic"}
    everything = " ".join(metadata.get_all("Requires-Dist") or []).lower()
    assert "fastapi" not in everything and "sympy" not in everything
    assert "proctor_client/py.typed" in files
    assert not any(f.startswith(("service/", "reward_specs/", "sandboxes/")) for f in files)


def test_importing_the_sdk_and_its_integrations_loads_no_server_code() -> None:
    probe = (
        "import sys, proctor_client, proctor_client.trl, proctor_client.verl\n"
        "loaded = {m.split('.')[0] for m in sys.modules}\n"
        "bad = loaded & {'fastapi', 'sympy', 'math_verify', 'service', 'reward_specs', 'trl',"
        " 'torch', 'verl'}\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", probe], check=True, timeout=120, cwd=CLIENTS)


def test_the_blocking_faces_say_what_the_async_classes_say() -> None:
    # help(ProctorClient) must not send its reader to another class for the details.
    for face, inner in ((ProctorClient, AsyncProctorClient), (Jobs, AsyncJobs)):
        assert inner.__doc__ and inner.__doc__ in (face.__doc__ or "")
        coroutines = [
            name
            for name, member in vars(inner).items()
            if inspect.iscoroutinefunction(member) and not name.startswith("_")
        ]
        for name in coroutines:
            if name == "aclose":  # the blocking `close` also stops the client's loop
                assert ProctorClient.close.__doc__
                continue
            method, original = getattr(face, name), getattr(inner, name)
            assert not inspect.iscoroutinefunction(method)
            assert method.__doc__ and method.__doc__ == original.__doc__
            assert inspect.signature(method) == inspect.signature(original)
            assert method.__qualname__ == f"{face.__qualname__}.{name}"
    assert ProctorClient.reached.__doc__
