"""The wire contract of docs/api.md, end to end against a real server."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

import httpx

from tests.helpers import Server, score

MATH_OK = {
    "id": "m1",
    "domain": "math",
    "response": "<think>maybe \\boxed{3}</think>so the answer is \\boxed{\\frac{1}{2}}",
    "reference": {"answer": "0.5"},
}


def test_health_and_readiness(client: httpx.Client) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz")
    assert ready.status_code == 200
    assert ready.json()["components"]["workers"] is True


def test_a_scored_item_carries_every_field(client: httpx.Client) -> None:
    response = client.post("/v1/score", json={"items": [MATH_OK]})
    assert response.status_code == 200
    body = response.json()
    assert body["spec"]["name"] == "prorl-v1-careful-2"  # the default: no spec named
    assert body["spec"]["hash"].startswith("sha256:")
    (result,) = body["results"]
    assert result["id"] == "m1"
    assert result["status"] == "ok"
    assert (result["reward"], result["score"], result["success"], result["parsed"]) == (
        1.0,
        1.0,
        True,
        True,
    )
    assert result["penalties"] == {}
    assert result["details"]["extracted"] == "\\frac{1}{2}"  # not the 3 inside <think>
    assert result["error"] is None
    assert result["elapsed_ms"] >= 0


def test_results_come_back_in_order_one_per_item(client: httpx.Client) -> None:
    items = [
        {
            "id": str(i),
            "domain": "math",
            "response": f"\\boxed{{{i % 7}}}",
            "reference": {"answer": "3"},
        }
        for i in range(300)
    ]
    results = score(client, items)
    assert [r["id"] for r in results] == [str(i) for i in range(300)]
    assert [r["success"] for r in results] == [i % 7 == 3 for i in range(300)]


def test_duplicates_in_a_batch_get_identical_results(client: httpx.Client) -> None:
    item = {"domain": "math", "response": "\\boxed{2}", "reference": {"answer": "2"}}
    results = score(client, [{**item, "id": "a"}, {**item, "id": "b"}, {**item, "id": None}])
    assert [r["id"] for r in results] == ["a", "b", None]
    stripped = [{k: v for k, v in r.items() if k != "id"} for r in results]
    assert stripped[0] == stripped[1] == stripped[2]


def test_one_bad_item_does_not_spoil_the_batch(client: httpx.Client) -> None:
    items = [
        MATH_OK,
        {"id": "unknown-domain", "domain": "alchemy", "response": "gold", "reference": {}},
        {
            "id": "no-answer-key",
            "domain": "math",
            "response": "\\boxed{1}",
            "reference": {"gold": 1},
        },
        {
            "id": "bad-choices",
            "domain": "stem",
            "response": "A",
            "reference": {"answer": "A", "choices": "AB"},
        },
        {**MATH_OK, "id": "m2"},
    ]
    results = score(client, items)
    assert [r["status"] for r in results] == ["ok", "invalid", "invalid", "invalid", "ok"]
    assert results[1]["error"]["code"] == "unknown_domain"
    assert "reference.answer" in results[2]["error"]["message"]
    assert "reference.choices" in results[3]["error"]["message"]
    for bad in results[1:4]:
        assert bad["reward"] is None and bad["score"] is None
        assert bad["success"] is None and bad["parsed"] is None


def test_numbers_as_gold_answers_are_accepted(client: httpx.Client) -> None:
    (result,) = score(
        client, [{"domain": "math", "response": "\\boxed{42}", "reference": {"answer": 42}}]
    )
    assert result["success"] is True


def _detail_locs(response: httpx.Response) -> list[list[Any]]:
    return [d["loc"] for d in response.json()["detail"]]


def test_malformed_requests_are_422_naming_the_field(client: httpx.Client) -> None:
    cases: list[tuple[Any, list[Any]]] = [
        ({}, ["body", "items"]),
        ({"items": "nope"}, ["body", "items"]),
        ({"items": [MATH_OK, 7]}, ["body", "items", 1]),
        ({"spec": "no-such-spec", "items": []}, ["body", "spec"]),
        ({"items": [], "colour": "red"}, ["body", "colour"]),
    ]
    for body, loc in cases:
        response = client.post("/v1/score", json=body)
        assert response.status_code == 422, body
        assert loc in _detail_locs(response), (body, response.json())


def test_an_item_of_the_wrong_types_is_invalid_naming_the_field(client: httpx.Client) -> None:
    # One bad item does not sink a batch: each is `invalid` naming its field, the rest scored.
    wrong: list[tuple[dict[str, Any], str]] = [
        ({"response": 3}, "`response`: "),
        ({"reference": []}, "`reference`: "),
        ({"reference": "1"}, "`reference`: "),
        ({"finish_reason": "eos"}, "`finish_reason`: "),
        ({"response_tokens": -1}, "`response_tokens`: "),
        ({"id": "x" * 513}, "`id`: "),
    ]
    items = [MATH_OK] + [{**MATH_OK, "id": f"w{i}", **fault} for i, (fault, _) in enumerate(wrong)]
    results = score(client, items)
    assert results[0]["status"] == "ok" and results[0]["success"] is True
    for result, (_, named) in zip(results[1:], wrong, strict=True):
        assert result["status"] == "invalid", result
        assert result["error"]["code"] == "malformed_item"
        assert result["error"]["message"].startswith(named), result


def test_invalid_json_is_422(client: httpx.Client) -> None:
    response = client.post(
        "/v1/score", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert response.status_code == 422


def test_limits_are_reported_and_enforced(make_server: Callable[..., Server]) -> None:
    server = make_server(
        workers=1,
        max_items_per_request=3,
        max_response_bytes=100,
        max_request_bytes=4096,
        max_running_job_bytes=2048,
        max_finished_job_bytes=8192,
    )
    with httpx.Client(base_url=server.url, timeout=60) as client:
        limits = client.get("/v1/limits").json()
        assert limits["max_items_per_request"] == 3
        assert limits["max_response_bytes"] == 100
        assert limits["max_request_bytes"] == 4096
        assert (limits["max_running_job_bytes"], limits["max_finished_job_bytes"]) == (2048, 8192)

        too_many = client.post("/v1/score", json={"items": [MATH_OK] * 4})
        assert too_many.status_code == 422
        assert _detail_locs(too_many) == [["body", "items"]]

        # A response over the limit is the response's fault: a judged 0, not a masked item,
        # even where the same text within the limit would have earned credit.
        big = {**MATH_OK, "id": "big", "response": "\\boxed{4}" + "x" * 101}
        results = score(client, [MATH_OK, big])
        assert results[0]["status"] == "ok"
        assert results[1]["status"] == "ok"
        assert (results[1]["score"], results[1]["reward"], results[1]["parsed"]) == (0, 0, False)
        assert results[1]["details"] == {
            "reason": "response_too_large",
            "bytes": 110,
            "limit_bytes": 100,
        }

        huge = client.post("/v1/score", json={"items": [{**MATH_OK, "response": "y" * 5000}]})
        assert huge.status_code == 413

        def chunks() -> Any:
            yield b'{"items": ['
            for _ in range(100):
                yield b'{"domain": "math", "response": "' + b"z" * 90 + b'", "reference": {}},'
            yield b"]}"

        streamed = client.post(
            "/v1/score", content=chunks(), headers={"content-type": "application/json"}
        )
        assert streamed.status_code == 413


def test_specs_are_listed_with_hashes_and_parameters(client: httpx.Client) -> None:
    body = client.get("/v1/specs").json()
    assert body["default"] == "prorl-v1-careful-2"
    by_name = {s["name"]: s for s in body["specs"]}
    shipped = {"prorl-v1", "prorl-v1-careful", "prorl-v1-careful-eval", "prorl-v1-termination"}
    assert shipped | {"dapo-overlong"} <= set(by_name)
    assert by_name["prorl-v1-careful-2"]["default"] is True
    assert [s["name"] for s in body["specs"] if s["default"]] == ["prorl-v1-careful-2"]
    careful = by_name["prorl-v1-careful"]["parameters"]["domains"]
    assert careful["math"]["careful"] is True and careful["stem"]["careful"] is True
    assert "prose_answer" not in careful["math"]  # off: an added parameter at its default
    assert by_name["prorl-v1-careful-eval"]["parameters"]["domains"]["math"]["prose_answer"]
    # prorl-v1 predates the careful grader: its parameters do not name it, so its hash is as it was.
    assert "careful" not in by_name["prorl-v1"]["parameters"]["domains"]["math"]
    assert by_name["prorl-v1-termination"]["parameters"]["termination"]["truncation"] == {
        "coefficient": 0.0
    }
    assert len({s["hash"] for s in body["specs"]}) == len(body["specs"])
    assert "math-verify" in by_name["prorl-v1"]["parameters"]["libraries"]


def test_termination_penalties_shape_reward_not_score(client: httpx.Client) -> None:
    truncated = {**MATH_OK, "finish_reason": "length"}
    loop = {**MATH_OK, "response": MATH_OK["response"] + " and so on" * 40}
    plain, cut, looped = score(client, [MATH_OK, truncated, loop], spec="prorl-v1-termination")
    assert plain["reward"] == 1.0 and plain["penalties"] == {}
    assert cut["score"] == 1.0 and cut["reward"] == 0.0
    assert cut["penalties"] == {"truncation": -1.0}
    assert looped["reward"] == 0.0 and looped["penalties"] == {"repetition": -1.0}
    assert looped["details"]["termination"]["repetition"]["copies"] >= 6
    # Without the termination spec, the same truncated item keeps its reward.
    (unshaped,) = score(client, [truncated], spec="prorl-v1")
    assert unshaped["reward"] == 1.0


def test_dapo_overlong_ramp(client: httpx.Client) -> None:
    def item(tokens: int) -> dict[str, Any]:
        return {**MATH_OK, "response_tokens": tokens, "max_response_tokens": 8192}

    short, mid, over = score(client, [item(7000), item(7680), item(9000)], spec="dapo-overlong")
    assert short["reward"] == 1.0 and short["penalties"] == {}
    assert mid["penalties"] == {"overlong": -0.5} and mid["reward"] == 0.5
    assert over["penalties"] == {"overlong": -1.0} and over["reward"] == 0.0


def test_jobs_report_progress_and_the_same_results(client: httpx.Client) -> None:
    items = [
        {
            "id": str(i),
            "domain": "math",
            "response": f"\\boxed{{{i}}}",
            "reference": {"answer": "4"},
        }
        for i in range(50)
    ]
    accepted = client.post("/v1/jobs", json={"items": items})
    assert accepted.status_code == 202
    job_id = accepted.json()["job_id"]
    deadline = time.monotonic() + 120
    while True:
        status = client.get(f"/v1/jobs/{job_id}").json()
        if status["status"] in ("done", "failed"):
            break
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert status["status"] == "done"
    assert status["completed"] == status["total"] == 50
    direct = score(client, items)
    strip = lambda rs: [{k: v for k, v in r.items() if k != "elapsed_ms"} for r in rs]  # noqa: E731
    assert strip(status["result"]["results"]) == strip(direct)
    assert client.get("/v1/jobs/does-not-exist").status_code == 404


def test_metrics_count_items_by_domain_and_status(client: httpx.Client) -> None:
    score(client, [MATH_OK, {"domain": "alchemy", "response": "", "reference": {}}])
    text = client.get("/metrics").text
    assert 'proctor_items_total{domain="math",status="ok"}' in text
    # A domain the server does not have is `unknown`: clients cannot make new series.
    assert 'proctor_items_total{domain="unknown",status="invalid"}' in text
    assert "alchemy" not in text
    assert "proctor_pool_ready_workers 2.0" in text


def test_openapi_describes_the_contract(client: httpx.Client) -> None:
    schema = client.get("/openapi.json").json()
    for path in (
        "/v1/score",
        "/healthz",
        "/readyz",
        "/v1/specs",
        "/v1/limits",
        "/v1/jobs",
        "/metrics",
    ):
        assert path in schema["paths"], path
    # /docs's Authorize button: a bearer scheme, required of no operation on this keyless server.
    schemes = schema["components"]["securitySchemes"]
    assert schemes["bearer"] == {"type": "http", "scheme": "bearer", "description": "an API key"}
    assert "security" not in schema
    result = schema["components"]["schemas"]["ScoreResult"]["properties"]
    assert set(result) == {
        "id",
        "status",
        "reward",
        "score",
        "success",
        "parsed",
        "penalties",
        "details",
        "error",
        "elapsed_ms",
        "meta",
    }


def test_items_can_share_a_reference_from_the_request_table(client: httpx.Client) -> None:
    body = {
        "references": [{"answer": "0.5"}, {"answer": "7"}],
        "items": [
            {"id": "a", "domain": "math", "response": "\\boxed{\\frac12}", "reference_index": 0},
            {"id": "b", "domain": "math", "response": "\\boxed{7}", "reference_index": 1},
            {"id": "c", "domain": "math", "response": "\\boxed{7}", "reference_index": 0},
            {"id": "d", "domain": "math", "response": "\\boxed{7}", "reference_index": 2},
            {"id": "e", "domain": "math", "response": "\\boxed{7}"},
            {
                "id": "f",
                "domain": "math",
                "response": "\\boxed{7}",
                "reference_index": 1,
                "reference": {"answer": "7"},
            },
            {"id": "g", "domain": "math", "response": "\\boxed{7}", "reference": {"answer": "7"}},
        ],
    }
    response = client.post("/v1/score", json=body)
    assert response.status_code == 200, response.text
    results = response.json()["results"]
    assert [r["success"] for r in results[:3]] == [True, True, False]
    assert [r["status"] for r in results[3:]] == ["invalid", "invalid", "invalid", "ok"]
    assert [r["error"]["code"] for r in results[3:6]] == [
        "unknown_reference_index",
        "missing_reference",
        "ambiguous_reference",
    ]
    # An inline reference equal to a table entry scores identically (same key, same memo).
    assert {k: v for k, v in results[6].items() if k not in ("id", "elapsed_ms")} == {
        k: v for k, v in results[1].items() if k not in ("id", "elapsed_ms")
    }
    bad_index = client.post(
        "/v1/score", json={"items": [{**body["items"][0], "reference_index": -1}]}
    )
    # A negative index is that item's fault: the item is invalid, naming the field.
    assert bad_index.status_code == 200, bad_index.text
    (refused,) = bad_index.json()["results"]
    assert refused["status"] == "invalid"
    assert refused["error"]["code"] == "malformed_item"
    assert "reference_index" in refused["error"]["message"]


def test_docs_pages_load_their_assets_from_this_server(client: httpx.Client) -> None:
    # An offline cluster cannot reach a CDN: every script, style and icon is served here.
    for page in ("/docs", "/redoc"):
        html = client.get(page)
        assert html.status_code == 200
        sources = re.findall(r'(?:src|href)="([^"]+)"', html.text)
        assets = [s for s in sources if not s.startswith("/openapi")]
        assert assets, html.text
        for asset in assets:
            assert asset.startswith("/docs-assets/"), asset
            fetched = client.get(asset)
            assert fetched.status_code == 200 and len(fetched.content) > 1000, asset


def test_http_responses_are_counted_by_route_template_and_status_class(
    client: httpx.Client,
) -> None:
    client.get("/v1/jobs/no-such-job")
    client.post("/v1/score", content=b"{", headers={"content-type": "application/json"})
    client.get("/no/such/path/at/all")
    for page in ("/docs", "/redoc", "/openapi.json"):  # plain routes: counted by their path
        assert client.get(page).status_code == 200
    text = client.get("/metrics").text
    for page in ("/docs", "/redoc", "/openapi.json"):
        assert f'proctor_http_responses_total{{route="{page}",status="2xx"}}' in text
    assert 'proctor_http_responses_total{route="/v1/jobs/{job_id}",status="4xx"}' in text
    assert 'proctor_http_responses_total{route="/v1/score",status="4xx"}' in text
    assert 'proctor_http_responses_total{route="unmatched",status="4xx"}' in text
    assert "no-such-job" not in text and "/no/such/path" not in text


def test_an_unknown_field_spoils_only_its_item_and_meta_is_echoed(client: httpx.Client) -> None:
    items = [
        {**MATH_OK, "id": "a", "meta": {"prompt": 3, "sample": [0, 1]}},
        {**MATH_OK, "id": "b", "scroe": 1, "extra": None},
        {**MATH_OK, "id": "c"},
    ]
    a, b, c = score(client, items)
    assert (a["status"], a["meta"]) == ("ok", {"prompt": 3, "sample": [0, 1]})
    assert b["status"] == "invalid" and b["id"] == "b" and b["meta"] is None
    assert b["error"] == {"code": "malformed_item", "message": "unknown fields `scroe`, `extra`"}
    assert c["status"] == "ok" and c["meta"] is None
    # Anywhere else an unknown field is the request's fault, as before.
    whole = client.post("/v1/score", json={"items": [MATH_OK], "spce": "x"})
    assert whole.status_code == 422 and _detail_locs(whole) == [["body", "spce"]]
