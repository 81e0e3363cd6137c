"""The proctor-client distribution: a small declared surface, and requirements a GPU node can
take (httpx and pydantic; never the server's stack)."""

from __future__ import annotations

import email
import inspect
import json
import os
import shlex
import shutil
import site
import subprocess
import sys
import types
import zipfile
from pathlib import Path

import proctor_client
from proctor_client import AsyncProctorClient, ProctorClient
from proctor_client._async_client import AsyncJobs
from proctor_client._sync_client import Jobs
from tests.eval_synthetic import math_row

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


LEFT_BEHIND = (".git", "build", "dist", "*.egg-info", "__pycache__", ".*_cache", ".hypothesis")
"""What a copy of the checkout leaves out: version control, builds, caches."""


def test_the_documented_in_process_install_works_from_the_checkout(tmp_path: Path) -> None:
    # clients/README's in-process `proctor-eval` set-up, run exactly as written from the checkout's
    # root into a fresh venv. The venv sees this interpreter's site-packages (the dependencies, so
    # no index is needed) but must get `proctor` and `proctor-client` from the command itself: a
    # form whose `proctor` comes from an index, or from another checkout, fails here.
    from proctor_client.evaluation.cli import LOCAL_INSTALL

    assert f"`{LOCAL_INSTALL}`" in (CLIENTS / "README.md").read_text(encoding="utf-8")
    checkout = tmp_path / "checkout"  # a copy: the build leaves build/ and *.egg-info behind
    shutil.copytree(CLIENTS.parent, checkout, ignore=shutil.ignore_patterns(*LEFT_BEHIND))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    (packages,) = venv.glob("lib/python*/site-packages")
    parents = [p for p in [*site.getsitepackages(), site.getusersitepackages()] if Path(p).is_dir()]
    (packages / "zz_parent.pth").write_text("\n".join(parents) + "\n", encoding="utf-8")
    python = venv / "bin" / "python"
    command = shlex.split(LOCAL_INSTALL)
    assert command[:2] == ["pip", "install"]
    env = {**os.environ, "PIP_NO_INDEX": "1", "PIP_NO_BUILD_ISOLATION": "0"}
    env.pop("PYTHONPATH", None)
    subprocess.run([str(python), "-m", *command], check=True, timeout=600, cwd=checkout, env=env)
    generations = tmp_path / "generations.jsonl"
    rows = [
        math_row(f"p-{i}", s, "base", "correct" if s else "wrong")
        for i in range(2)
        for s in range(2)
    ]
    generations.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    probe = (
        "import service, proctor_client; print(service.__file__); print(proctor_client.__file__)"
    )
    where = subprocess.run(
        [str(python), "-c", probe],
        check=True,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
    ).stdout.split()
    assert all(Path(w).is_relative_to(packages) for w in where), where
    out = tmp_path / "out"
    evaluate = [str(venv / "bin" / "proctor-eval"), str(generations), "--out", str(out)]
    subprocess.run(
        [*evaluate, "--workers", "1", "--no-progress", "--bootstrap", "100"],
        check=True,
        timeout=300,
        cwd=tmp_path,
        env=env,
    )
    scored = (out / "scored.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["result"]["success"] for line in scored] == [False, True] * 2
