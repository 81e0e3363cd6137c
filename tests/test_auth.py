"""API keys on a real server: 401 without a key or with a wrong one, the probes open, /metrics
by its setting, keys from a file; and `proctor serve` refusing to listen beyond loopback with no
key unless told `--insecure-no-auth`."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from pydantic import ValidationError

from service.http.auth import ExposureError, check_exposure
from service.settings import Settings
from tests.helpers import Server, free_port

KEY = "proctor-test-key-0001"
OTHER = "proctor-test-key-0002"
ITEM = {"items": [{"domain": "math", "response": "\\boxed{2}", "reference": {"answer": "2"}}]}


def _bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def test_routes_need_a_known_key(make_server: Callable[..., Server]) -> None:
    srv = make_server(api_keys=(KEY, OTHER))
    with httpx.Client(base_url=srv.url, timeout=60) as http:
        missing = http.post("/v1/score", json=ITEM)
        assert missing.status_code == 401
        assert missing.headers["www-authenticate"].startswith("Bearer")
        assert http.post("/v1/score", json=ITEM, headers=_bearer("x" * 20)).status_code == 401
        assert http.post("/v1/score", json=ITEM, headers={"Authorization": KEY}).status_code == 401
        for key in (KEY, OTHER):
            ok = http.post("/v1/score", json=ITEM, headers=_bearer(key))
            assert ok.status_code == 200
            assert ok.json()["results"][0]["reward"] == 1.0
        assert http.get("/v1/specs").status_code == 401
        assert http.post("/v1/jobs", json=ITEM).status_code == 401
        assert http.get("/healthz").status_code == 200
        assert http.get("/readyz").status_code == 200
        assert http.get("/metrics").status_code == 401
        assert http.get("/metrics", headers=_bearer(KEY)).status_code == 200


def test_metrics_open_by_setting_and_keys_from_a_file(
    make_server: Callable[..., Server], tmp_path: Path
) -> None:
    keys = tmp_path / "keys"
    keys.write_text(f"# trainers\n{KEY}\n\n{OTHER}  # eval\n")
    srv = make_server(api_keys_file=keys, metrics_require_key=False)
    with httpx.Client(base_url=srv.url, timeout=60) as http:
        assert http.get("/metrics").status_code == 200
        assert http.post("/v1/score", json=ITEM).status_code == 401
        assert http.post("/v1/score", json=ITEM, headers=_bearer(OTHER)).status_code == 200


def test_no_key_configured_leaves_the_service_open(server: Server) -> None:
    assert httpx.post(server.url + "/v1/score", json=ITEM, timeout=60).status_code == 200


def test_keys_from_the_environment_are_comma_separated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROCTOR_API_KEYS", f"{KEY}, {OTHER}")
    assert Settings().api_keys == (KEY, OTHER)
    monkeypatch.setenv("PROCTOR_API_KEYS", "short")
    with pytest.raises(ValidationError, match="at least 16"):
        Settings()


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "localhost", "127.0.0.2"])
def test_loopback_needs_no_key(host: str) -> None:
    check_exposure(Settings(host=host))


def test_beyond_loopback_needs_a_key_or_the_explicit_flag() -> None:
    with pytest.raises(ExposureError, match="--insecure-no-auth"):
        check_exposure(Settings(host="0.0.0.0"))
    check_exposure(Settings(host="0.0.0.0", api_keys=(KEY,)))
    check_exposure(Settings(host="0.0.0.0", insecure_no_auth=True))


def _serve(host: str, *extra: str) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "service.cli", "serve", "--host", host]
    return subprocess.Popen(
        [*command, "--port", str(free_port()), "--workers", "1", *extra],
        stderr=subprocess.PIPE,
        text=True,
    )


def test_proctor_serve_refuses_an_open_public_address() -> None:
    refused = _serve("0.0.0.0")
    _, err = refused.communicate(timeout=120)
    assert refused.returncode == 2
    assert "refusing to serve on 0.0.0.0 with no API key" in err


def test_insecure_no_auth_starts_with_a_warning() -> None:
    # On loopback, so that the test listens nowhere else; the warning does not depend on it.
    server = _serve("127.0.0.1", "--insecure-no-auth")
    assert server.stderr is not None
    try:
        line = server.stderr.readline()
        assert "no API key configured: every route of this service is open" in line
    finally:
        server.terminate()
        server.communicate(timeout=60)


def test_a_key_in_the_url_stays_out_of_the_access_log() -> None:
    port = free_port()
    command = [sys.executable, "-m", "service.cli", "serve", "--host", "127.0.0.1"]
    server = subprocess.Popen(
        [*command, "--port", str(port), "--workers", "1", "--log-level", "info"],
        env={**os.environ, "PROCTOR_API_KEYS": KEY},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(url + "/readyz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)  # not listening yet
        body = {"query": ["q \\boxed{2}"], "prompts": ["q"], "labels": ["2"]}
        reply = httpx.post(f"{url}/v1/openrlhf?api_key={KEY}", json=body, timeout=60)
        assert reply.status_code == 200
    finally:
        server.terminate()
        log, _ = server.communicate(timeout=60)
    assert "/v1/openrlhf?api_key=REDACTED" in log
    assert KEY not in log


def test_the_schema_says_which_operations_need_a_key(make_server: Callable[..., Server]) -> None:
    # /docs's "Try it out" sends the key its Authorize button took: every operation but the
    # probes and (by the default setting) /metrics needs the bearer scheme.
    srv = make_server(api_keys=(KEY,), metrics_require_key=False)
    schema = httpx.get(srv.url + "/openapi.json", timeout=60).json()
    assert schema["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    assert schema["security"] == [{"bearer": []}]
    for path in ("/healthz", "/readyz", "/metrics"):
        assert schema["paths"][path]["get"]["security"] == [], path
    assert "security" not in schema["paths"]["/v1/score"]["post"]
    openrlhf = schema["paths"]["/v1/openrlhf"]["post"]["security"]
    assert openrlhf == [{"bearer": []}, {"query_key": []}]
