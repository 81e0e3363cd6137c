"""The NeMo-Gym resource server at /compat/nemo-gym on real servers: its four routes, the
Responses object read as NeMo-Gym's servers read it, the failure contract (503 and 422, never a
reward Proctor did not judge), the key in the path, and Prime Intellect's verifiers 0.4.0
NeMo-Gym taskset rewarding rows through it (in the venv tests/run builds)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import subprocess
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from starlette.exceptions import HTTPException

from service.core.tenancy import tenant_of_key
from service.http.compat import path_keys as keys
from service.http.compat.nemo_gym import ResponsesObject, answer_text, finish_reason, summarize
from service.main import create_app
from service.settings import Settings
from tests.helpers import TEST_SPECS, Server, free_port, poll

ROOT = Path(__file__).parent.parent
VERIFIERS_PYTHON = Path(
    os.environ.get("PROCTOR_VERIFIERS_PYTHON", "/opt/proctor-verifiers/bin/python")
)
NG = "/compat/nemo-gym"
KEY = "nemo-gym-key-0123456789"
OTHER = "nemo-gym-key-9876543210"
PARAMS = {"input": [{"role": "user", "content": "What is 1 plus 1?"}], "max_output_tokens": 4096}


def message(*parts: dict[str, Any]) -> dict[str, Any]:
    return {"type": "message", "role": "assistant", "status": "completed", "content": list(parts)}


def text(value: str) -> dict[str, Any]:
    return {"type": "output_text", "text": value, "annotations": []}


def reasoning(value: str) -> dict[str, Any]:
    return {"type": "reasoning", "summary": [{"type": "summary_text", "text": value}]}


def response(*output: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """A Responses object as NeMo-Gym's model servers write one."""
    return {"id": "resp_1", "created_at": 0.0, "model": "m", "object": "response",
            "output": list(output), "parallel_tool_calls": True, "tool_choice": "auto",
            "tools": [], "status": "completed", **fields}  # fmt: skip


def row(answer: str = "2", **extra: Any) -> dict[str, Any]:
    return {"responses_create_params": PARAMS, "domain": "math", "reference": {"answer": answer},
            "question": "What is 1 plus 1?", **extra}  # fmt: skip


def verify(client: httpx.Client, body: dict[str, Any], prefix: str = NG) -> httpx.Response:
    return client.post(f"{prefix}/verify", json=body)


@pytest.fixture(scope="module")
def keyed() -> Iterator[Server]:
    server = Server(Settings(workers=1, spec_dirs=(TEST_SPECS,), api_keys=(KEY, OTHER)))
    server.start()
    yield server
    server.stop()


# --- the routes --------------------------------------------------------------------------------


def test_seed_session_and_reverify_mode(client: httpx.Client) -> None:
    assert client.post(f"{NG}/seed_session", json=row()).json() == {}
    assert client.get(f"{NG}/reverify_mode").json() == "stateless"


def test_verify_judges_the_last_message_and_echoes_the_request(client: httpx.Client) -> None:
    body = row(_ng_task_index=3) | {
        "response": response(
            message(text("first I thought \\boxed{3}")),
            reasoning("maybe \\boxed{5}"),  # never the answer
            {"type": "function_call", "call_id": "c", "name": "calc", "arguments": "{}"},
            message(text("so the answer is "), text("\\boxed{2}")),  # parts joined
        )
    }
    reply = verify(client, body)
    assert reply.status_code == 200, reply.text
    answer = reply.json()
    assert answer["reward"] == 1.0
    assert (answer["score"], answer["success"], answer["parsed"]) == (1.0, True, True)
    for field, value in body.items():  # the request echoed, NeMo-Gym's and the row's fields
        assert answer[field] == value
    assert answer["proctor"]["status"] == "ok"
    assert answer["proctor"]["spec"]["name"] == client.get("/v1/specs").json()["default"]


@pytest.mark.parametrize(
    ("output", "reward", "parsed"),
    [
        ([message(text("\\boxed{3}"))], 0.0, True),  # wrong
        ([message(text("\\boxed{2}")), message(text("\\boxed{3}"))], 0.0, True),  # the last counts
        ([message({"type": "refusal", "refusal": "\\boxed{2}"})], 0.0, False),  # a refusal: empty
        ([reasoning("\\boxed{2}")], 0.0, False),  # no message: an empty answer
    ],
)
def test_what_is_judged(
    client: httpx.Client, output: list[dict[str, Any]], reward: float, parsed: bool
) -> None:
    reply = verify(client, row() | {"response": response(*output)})
    assert reply.status_code == 200, reply.text
    assert (reply.json()["reward"], reply.json()["parsed"]) == (reward, parsed)


def test_a_response_cut_at_max_output_tokens_is_penalised(client: httpx.Client) -> None:
    cut = response(
        message(text("\\boxed{2}")),
        status="incomplete",
        incomplete_details={"reason": "max_output_tokens"},
        usage={"input_tokens": 10, "output_tokens": 4096, "total_tokens": 4106},
    )
    reply = verify(client, row(spec="prorl-v1-termination") | {"response": cut})
    assert reply.status_code == 200, reply.text
    answer = reply.json()
    assert (answer["reward"], answer["score"], answer["penalty"]) == (0.0, 1.0, -1.0)
    # The same answer, finished: no penalty.
    done = verify(client, row(spec="prorl-v1-termination") | {"response": response(*cut["output"])})
    assert (done.json()["reward"], done.json()["penalty"]) == (1.0, 0.0)


def test_output_tokens_and_their_limit_drive_overlong_shaping(client: httpx.Client) -> None:
    # dapo-overlong-2: over the last 1024 tokens before the limit the reward falls linearly.
    long = response(message(text("\\boxed{2}")), usage={"output_tokens": 1536})
    body = row(spec="dapo-overlong-2") | {
        "responses_create_params": {**PARAMS, "max_output_tokens": 2048},
        "response": long,
    }
    answer = verify(client, body).json()
    assert answer["reward"] == pytest.approx(0.5)
    assert answer["penalty_overlong"] == pytest.approx(-0.5)


def test_aggregate_metrics(client: httpx.Client) -> None:
    answers = []
    for task, said in [(0, "\\boxed{2}"), (0, "\\boxed{3}"), (1, "\\boxed{2}")]:
        reply = verify(
            client, row(_ng_task_index=task) | {"response": response(message(text(said)))}
        )
        answers.append({k: v for k, v in reply.json().items() if k != "response"})
    reply = client.post(f"{NG}/aggregate_metrics", json={"verify_responses": answers})
    assert reply.status_code == 200, reply.text
    metrics = reply.json()
    agent = metrics["agent_metrics"]
    assert agent["count"] == 3
    assert agent["mean/reward"] == pytest.approx(2 / 3)
    assert agent["mean/success"] == pytest.approx(2 / 3)
    assert agent["count/status/ok"] == 3
    assert metrics["key_metrics"]["mean/reward"] == agent["mean/reward"]
    groups = {g["_ng_task_index"]: g for g in metrics["group_level_metrics"]}
    assert (groups[0]["count"], groups[0]["mean/reward"]) == (2, 0.5)
    assert (groups[1]["count"], groups[1]["mean/reward"]) == (1, 1.0)
    empty = client.post(f"{NG}/aggregate_metrics", json={"verify_responses": []}).json()
    assert empty["agent_metrics"] == {"count": 0}


# --- failures: never a reward Proctor did not judge --------------------------------------------


def test_an_unjudged_item_is_a_503_with_retry_after(make_server: Callable[..., Server]) -> None:
    # One worker, two 1.5 s items at once, a 2 s deadline: the second is not reached in time.
    srv = make_server(
        registry="tests.pool_scorers:registry", workers=1, chunk_size=1, item_timeout_s=2.0,
        request_deadline_s=2.0,
    )  # fmt: skip
    body = {"responses_create_params": PARAMS, "domain": "sleep", "reference": {"seconds": 1.5},
            "response": response(message(text("ok")))}  # fmt: skip

    def post(n: int) -> httpx.Response:
        return httpx.post(srv.url + f"{NG}/verify", json=body | {"n": n}, timeout=60)

    with ThreadPoolExecutor(2) as pool:
        replies = sorted(pool.map(post, range(2)), key=lambda r: r.status_code)
    assert [r.status_code for r in replies] == [200, 503], [r.text for r in replies]
    assert replies[0].json()["reward"] == 1.0
    assert replies[1].headers["retry-after"] == "1"
    assert replies[1].json()["error"]["code"] == "not_judged"
    assert "deadline" in replies[1].json()["error"]["message"]


@pytest.mark.parametrize(
    ("change", "code"),
    [
        ({"domain": "no_such_domain"}, "unknown_domain"),
        ({"reference": {"answer": ["not", "text"]}}, "invalid_reference"),
    ],
)
def test_an_invalid_item_is_a_422_with_its_error(
    client: httpx.Client, change: dict[str, Any], code: str
) -> None:
    reply = verify(client, row() | change | {"response": response(message(text("2")))})
    assert reply.status_code == 422, reply.text
    assert reply.json()["detail"][0]["type"] == code


@pytest.mark.parametrize(
    ("body", "loc"),
    [
        ({"responses_create_params": PARAMS, "reference": {"answer": "2"}}, ["body", "domain"]),
        ({"responses_create_params": PARAMS, "domain": "math"}, ["body", "reference"]),
        ({"domain": "math", "reference": {"answer": "2"}}, ["body", "responses_create_params"]),
        (row() | {"response": {"output": "not a list"}}, ["body", "response", "output"]),
        (row() | {"response": response(usage={"output_tokens": -1})},
         ["body", "response", "usage", "output_tokens"]),
        (row(spec="no-such-spec"), ["body", "spec"]),
    ],
)  # fmt: skip
def test_malformed_requests_are_422_naming_the_field(
    client: httpx.Client, body: dict[str, Any], loc: list[str]
) -> None:
    body.setdefault("response", response(message(text("2"))))
    reply = verify(client, body)
    assert reply.status_code == 422, reply.text
    assert reply.json()["detail"][0]["loc"] == loc


def test_bodies_that_are_not_json(client: httpx.Client) -> None:
    for route in ("verify", "seed_session", "aggregate_metrics"):
        bad = client.post(f"{NG}/{route}", content=b"{not json",
                          headers={"content-type": "application/json"})  # fmt: skip
        assert bad.status_code == 422, bad.text
    # Python's JSON reader admits NaN; the echo cannot carry it, so it is refused, not a 500.
    raw = json.dumps(row() | {"response": response(message(text("\\boxed{2}")))})
    nan = raw.replace('"question": "What is 1 plus 1?"', '"question": NaN')
    reply = client.post(f"{NG}/verify", content=nan, headers={"content-type": "application/json"})
    assert reply.status_code == 422, reply.text
    missing = client.post(f"{NG}/aggregate_metrics", json={"verify_responses": [{"x": 1}]})
    assert missing.status_code == 422
    assert missing.json()["detail"][0]["loc"] == ["body", "verify_responses", 0, "reward"]


def test_rows_nested_near_the_readers_limit_never_crash(client: httpx.Client) -> None:
    # Python's JSON reader takes nesting a little deeper than its writer can give back.
    raw = json.dumps(row() | {"response": response(message(text("\\boxed{2}")))})
    for depth in range(900, 1010, 2):
        deep = raw[:-1] + ', "deep": ' + "[" * depth + "]" * depth + "}"
        reply = client.post(
            f"{NG}/verify", content=deep, headers={"content-type": "application/json"}
        )
        assert reply.status_code in (200, 422), (depth, reply.text)
        assert reply.status_code == 422 or reply.json()["reward"] == 1.0


# --- the key in the path -----------------------------------------------------------------------


def _every_route(client: httpx.Client, prefix: str, **kw: Any) -> list[int]:
    body = row() | {"response": response(message(text("\\boxed{2}")))}
    return [
        client.post(f"{prefix}/seed_session", json=row(), **kw).status_code,
        client.get(f"{prefix}/reverify_mode", **kw).status_code,
        client.post(f"{prefix}/verify", json=body, **kw).status_code,
        client.post(f"{prefix}/aggregate_metrics", json={"verify_responses": []}, **kw).status_code,
    ]


def test_the_key_in_the_path_authenticates_the_compat_routes(keyed: Server) -> None:
    with httpx.Client(base_url=keyed.url, timeout=60) as c:
        assert _every_route(c, f"{NG}/k/{KEY}") == [200] * 4
        assert _every_route(c, f"{NG}/k/{OTHER}") == [200] * 4
        assert _every_route(c, f"{NG}/k/not-{KEY}") == [401] * 4
        assert _every_route(c, f"{NG}/k/") == [401] * 4  # an empty key
        # Checked before the body is read or a route matched.
        assert c.post(f"{NG}/k/wrong/verify", content=b"{").status_code == 401
        assert c.get(f"{NG}/k/wrong/no_such_route").status_code == 401
        assert c.post(f"{NG}/k/{KEY}/verify", content=b"{").status_code == 422
        # A wrong key in the path is not rescued by a right one in the header.
        bearer = {"Authorization": f"Bearer {KEY}"}
        assert _every_route(c, f"{NG}/k/wrong", headers=bearer) == [401] * 4
        # Without a key segment, the header as everywhere.
        assert _every_route(c, NG) == [401] * 4
        assert _every_route(c, NG, headers=bearer) == [200] * 4


def test_a_path_key_holds_that_keys_limits(make_server: Callable[..., Server]) -> None:
    # A verify in flight under the key in the path is that key's: the same key in a header sees
    # it in flight, and its one request slot is taken; another key counts only its own.
    srv = make_server(
        registry="tests.pool_scorers:registry", workers=1, api_keys=(KEY, OTHER),
        max_inflight_requests_per_key=1,
    )  # fmt: skip
    body = {"responses_create_params": PARAMS, "domain": "sleep", "reference": {"seconds": 3},
            "response": response(message(text("ok")))}  # fmt: skip
    mine = {"Authorization": f"Bearer {KEY}"}

    def in_flight(headers: dict[str, str]) -> Any:
        return httpx.get(srv.url + "/v1/limits", headers=headers, timeout=60).json()["in_flight"]

    with ThreadPoolExecutor(1) as pool:
        slow = pool.submit(httpx.post, f"{srv.url}{NG}/k/{KEY}/verify", json=body, timeout=60)
        poll(lambda: in_flight(mine)["items"] == 1, 30)
        assert in_flight(mine) == {"requests": 1, "items": 1}
        refused = httpx.post(f"{srv.url}{NG}/verify", json=body, headers=mine, timeout=60)
        assert refused.status_code == 429, refused.text
        assert in_flight({"Authorization": f"Bearer {OTHER}"}) == {"requests": 0, "items": 0}
        assert slow.result().json()["reward"] == 1.0


def test_a_key_in_the_path_on_a_server_without_keys_is_refused(client: httpx.Client) -> None:
    assert _every_route(client, f"{NG}/k/{KEY}") == [401] * 4
    assert "no API keys" in client.get(f"{NG}/k/{KEY}/reverify_mode").json()["detail"]


def test_the_path_key_is_the_header_keys_tenant() -> None:
    digests = [hashlib.sha256(k.encode()).digest() for k in (KEY, OTHER)]
    assert keys.check_path_key(KEY, digests) == tenant_of_key(KEY)
    with pytest.raises(HTTPException) as refused:
        keys.check_path_key(KEY[:-1], digests)
    assert refused.value.status_code == 401


@contextmanager
def _logging_server(settings: Settings) -> Iterator[str]:
    """A real server whose uvicorn logs (access lines included) reach the root logger."""
    port = free_port()
    config = uvicorn.Config(create_app(settings), host="127.0.0.1", port=port, log_config=None,
                            log_level="info")  # fmt: skip
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    poll(lambda: server.started, 120)
    try:
        yield url
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def test_no_key_reaches_a_log_a_metric_or_the_openapi_document(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    # uvicorn's loggers may not propagate (a server started with uvicorn's own log config
    # earlier in the session gave them handlers of their own): capture them where they are.
    uvicorn_loggers = [logging.getLogger(n) for n in ("uvicorn.access", "uvicorn.error")]
    for logger in uvicorn_loggers:
        logger.addHandler(caplog.handler)
    try:
        _serve_and_check(caplog)
    finally:
        for logger in uvicorn_loggers:
            logger.removeHandler(caplog.handler)


def _serve_and_check(caplog: pytest.LogCaptureFixture) -> None:
    settings = Settings(workers=1, spec_dirs=(TEST_SPECS,), api_keys=(KEY,))
    with _logging_server(settings) as url, httpx.Client(base_url=url, timeout=60) as c:
        assert _every_route(c, f"{NG}/k/{KEY}") == [200] * 4
        assert _every_route(c, f"{NG}/k/{OTHER}") == [401] * 4
        assert c.post(f"{NG}/k/{KEY}/verify", content=b"{").status_code == 422
        assert c.get(f"{NG}/k/{KEY}/nowhere").status_code == 404
        metrics = c.get("/metrics", headers={"Authorization": f"Bearer {KEY}"}).text
        document = c.get("/openapi.json", headers={"Authorization": f"Bearer {KEY}"}).text
    # What the server logged (the test's own client, httpx, logs the URLs it was given).
    logged = "\n".join(
        caplog.handler.format(r) for r in caplog.records if not r.name.startswith("httpx")
    )
    assert caplog.records, "nothing was logged"
    assert f"{NG}/k/REDACTED/verify" in logged  # the access log
    assert f'route="{NG}/k/REDACTED/verify"' in metrics
    assert f"{NG}/k/REDACTED/verify" in document
    for secret in (KEY, OTHER):
        assert secret not in logged
        assert secret not in metrics
        assert secret not in document


def test_path_keys_leave_the_scope_before_the_app_sees_it() -> None:
    seen: list[dict[str, Any]] = []
    sent: list[dict[str, Any]] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen.append(dict(scope))

    async def send(message: Any) -> None:
        sent.append(message)

    def serve(path: str) -> dict[str, Any]:
        scope = {"type": "http", "path": path, "raw_path": path.encode()}
        asyncio.run(keys.PathKeys(app, known=[KEY])(scope, None, send))  # type: ignore[arg-type]
        return scope

    scope = serve(f"{NG}/k/{KEY}/verify")
    assert scope["path"] == seen[-1]["path"] == f"{NG}/k/REDACTED/verify"
    assert scope["raw_path"] == f"{NG}/k/REDACTED/verify".encode()  # uvicorn's access log reads it
    assert keys.path_tenant(scope) == tenant_of_key(KEY)
    # A wrong key never reaches the app, whatever the route; its path is redacted all the same.
    refused = serve(f"{NG}/k/{OTHER}/anything")
    assert len(seen) == 1 and sent[0]["status"] == 401
    assert refused["raw_path"] == f"{NG}/k/REDACTED/anything".encode()
    assert keys.path_tenant(refused) is None
    other = serve(f"/v1/k/{KEY}")  # only the compat prefixes have a key segment
    assert keys.path_tenant(other) is None and other["path"] == f"/v1/k/{KEY}"


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (f'"POST {NG}/k/{KEY}/verify HTTP/1.1" 200', f'"POST {NG}/k/REDACTED/verify HTTP/1.1" 200'),
        (f"http://h/compat/sandbox-fusion/k/{KEY}", "http://h/compat/sandbox-fusion/k/REDACTED"),
        (f"/v1/openrlhf?api_key={KEY}", "/v1/openrlhf?api_key=REDACTED"),
        ("/k/not-a-compat-url", "/k/not-a-compat-url"),
    ],
)
def test_log_lines_are_redacted(line: str, expected: str) -> None:
    from service.core.logs import redact_query_secrets

    assert redact_query_secrets(line) == expected


# --- reading the Responses object ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ([], ""),
        ([message(text("a"), text("b"))], "ab"),
        ([message(text("a")), reasoning("r"), message(text("b"))], "b"),
        ([message(text("a")), reasoning("r")], "a"),  # reasoning after the message
        ([message({"type": "refusal", "refusal": "no"})], ""),
        ([message(text("a"), {"type": "refusal", "refusal": "no"})], "a"),
        ([{"type": "message", "role": "assistant", "content": "plain"}], "plain"),
    ],
)
def test_answer_text(output: list[dict[str, Any]], expected: str) -> None:
    assert answer_text(output) == expected


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"status": "completed"}, "stop"),
        ({"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}}, "length"),
        ({"status": "incomplete", "incomplete_details": {"reason": "content_filter"}}, None),
        ({"status": "failed"}, None),
        ({}, None),
    ],
)
def test_finish_reason(fields: dict[str, Any], expected: str | None) -> None:
    assert finish_reason(ResponsesObject.model_validate({"output": [], **fields})) == expected


def test_summarize_counts_statuses_and_skips_indices() -> None:
    metrics = summarize([
        {"reward": 1.0, "score": 1.0, "_ng_task_index": 2, "_ng_rollout_index": 7,
         "proctor": {"status": "ok"}},
        {"reward": 0.0, "parsed": False},
    ])  # fmt: skip
    agent = metrics.agent_metrics
    assert agent["count/status/ok"] == 1 and agent["count/status/unknown"] == 1
    assert agent["mean/score"] == 1.0 and agent["mean/parsed"] == 0.0
    assert "mean/_ng_task_index" not in agent and "mean/_ng_rollout_index" not in agent
    assert [g["_ng_task_index"] for g in metrics.group_level_metrics] == [0, 2]


# --- the real client: verifiers 0.4.0's NeMo-Gym taskset ----------------------------------------


def _verifiers(url: str, rows: list[dict[str, Any]], completions: list[dict[str, Any]],
               headers: dict[str, str] | None = None) -> list[dict[str, Any]]:  # fmt: skip
    if not VERIFIERS_PYTHON.exists():
        pytest.skip(f"no verifiers environment at {VERIFIERS_PYTHON} (tests/run builds it)")
    spec = {"resources_url": url, "headers": headers or {}, "rows": rows,
            "completions": completions}  # fmt: skip
    done = subprocess.run(
        [str(VERIFIERS_PYTHON), str(ROOT / "tests" / "verifiers_nemo_gym.py"), json.dumps(spec)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert len(lines) == len(rows), done.stdout + done.stderr[-3000:]
    return lines


def test_verifiers_nemo_gym_taskset_rewards_rows_through_proctor(keyed: Server) -> None:
    rows = [
        row(),
        row(),
        {"responses_create_params": {"input": [{"role": "user", "content": "Pick one."}]},
         "domain": "stem", "reference": {"answer": "B", "choices": ["x", "y"]}},
        row() | {"domain": "no_such_domain"},
    ]  # fmt: skip
    completions = [
        {"content": "so \\boxed{2}", "reasoning": "maybe \\boxed{3}"},
        {"content": "so \\boxed{3}", "reasoning": "surely \\boxed{2}"},
        {"content": "the answer is B"},
        {"content": "\\boxed{2}"},
    ]
    outcomes = _verifiers(f"{keyed.url}{NG}/k/{KEY}", rows, completions)
    assert [o.get("reward") for o in outcomes[:3]] == [1.0, 0.0, 1.0]
    first = outcomes[0]
    assert first["metrics"]["success"] == 1.0 and first["metrics"]["parsed"] == 1.0
    assert first["metrics"]["score"] == 1.0
    assert first["info"]["proctor"]["status"] == "ok"
    assert "response" not in first["info"] and "responses_create_params" not in first["info"]
    # An item Proctor cannot judge: the taskset raises on the 422, it records no reward.
    assert outcomes[3]["status"] == 422 and "reward" not in outcomes[3]
    # The unkeyed prefix with the key in the header (the taskset's `headers`), and a wrong key.
    header = _verifiers(f"{keyed.url}{NG}", rows[:1], completions[:1],
                        {"Authorization": f"Bearer {KEY}"})  # fmt: skip
    assert header[0]["reward"] == 1.0
    wrong = _verifiers(f"{keyed.url}{NG}/k/{KEY}x", rows[:1], completions[:1])
    assert wrong[0]["status"] == 401 and "reward" not in wrong[0]
