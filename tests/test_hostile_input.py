"""Hostile request bodies: each is refused cheaply (a 422 naming the body or field, or a per-item
`invalid` naming the bound) or judged, never a 5xx; every reply comes by the request deadline; the
good items of a mixed batch are scored normally and the service answers a plain item right after.
`proctor score` (library mode) gives the same result for every one of these items.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from service.settings import Settings
from tests.helpers import TEST_SPECS, Server

DEADLINE_S = 60.0
"""The private server's request deadline; a reply later than this (plus transport slack) fails
the test through the client's timeout."""
LIMITS = {
    "request_deadline_s": DEADLINE_S,
    "item_timeout_s": 20.0,
    "max_reference_bytes": 64 * 1024,
    "max_meta_bytes": 4 * 1024,
}

PROCTOR = [sys.executable, "-m", "service.cli"]
GOOD = b'{"id":"good","domain":"math","response":"\\\\boxed{7}","reference":{"answer":"7"}}'

PLACES = {
    # Where a reference (or `meta`) can hold a nested value; %s is the value's raw JSON.
    "math reference": b'{"domain":"math","response":"\\\\boxed{1}",'
    b'"reference":{"answer":"1","x":%s}}',
    "meta": b'{"domain":"math","response":"\\\\boxed{1}","reference":{"answer":"1"},'
    b'"meta":{"m":%s}}',
    "fn_name expected": b'{"domain":"code","response":"```python\\ndef f(x):\\n    return x\\n```",'
    b'"reference":{"language":"python","tests":{"fn_name":"f",'
    b'"cases":[{"args":[1],"expected":%s}]}}}',
    "fn_name args": b'{"domain":"code","response":"```python\\ndef f(x):\\n    return 1\\n```",'
    b'"reference":{"language":"python","tests":{"fn_name":"f","cases":[{"args":[%s],'
    b'"expected":1}]}}}',
    "stdio tests": b'{"domain":"code","response":"```python\\nprint(1)\\n```",'
    b'"reference":{"language":"python","tests":{"stdio":%s}}}',
    "puzzle entry": b'{"domain":"puzzle","response":"<answer>1</answer>",'
    b'"reference":{"task":"basic_arithmetic","entry":{"question":"1","answer":"1",'
    b'"metadata":{"m":%s}}}}',
    "puzzle config": b'{"domain":"puzzle","response":"<answer>1</answer>",'
    b'"reference":{"task":"basic_arithmetic","config":{"x":%s},"seed":1,"index":0}}',
    "ifeval kwargs": b'{"domain":"ifeval","response":"hello",'
    b'"reference":{"instruction_id_list":["punctuation:no_comma"],"kwargs":[%s]}}',
    "stem choices": b'{"domain":"stem","response":"Answer: A","reference":{"answer":"A",'
    b'"choices":%s}}',
}
DEPTHS = [65, 500, 900, 5000, 100_000]


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def huge_int(digits: int) -> bytes:
    return b"9" * digits


HOSTILE_VALUES: dict[str, bytes] = {
    **{f"nested {d}": nested(d) for d in DEPTHS},
    "nested objects 300": b'{"a":' * 300 + b"1" + b"}" * 300,
    "integer of 4,000 digits": huge_int(4000),
    "integer of 5,000 digits": huge_int(5000),
    "integer of 100,000 digits": huge_int(100_000),
    "NaN": b"NaN",
    "Infinity": b"Infinity",
    "-Infinity": b"-Infinity",
    "1e400": b"1e400",
    "string of 100 KB": json.dumps("x" * 100_000).encode(),
    "100,000 keys": json.dumps({f"k{n}": n for n in range(100_000)}).encode(),
    "100,000 elements": json.dumps(list(range(100_000))).encode(),
}

PATHOLOGICAL_RESPONSES = [
    # LaTeX and expressions that are expensive or impossible to parse or evaluate.
    "\\boxed{" + "\\frac{1}{" * 300 + "2" + "}" * 300 + "}",
    "\\boxed{9^{9^{9^{9^{9^{9}}}}}}",
    "\\boxed{" * 5000,
    "\\boxed{x" + "+x" * 20_000 + "}",
    "\\boxed{" + "(" * 3000 + "1" + ")" * 3000 + "}",
    "\\boxed{10^{10^{10^{10}}}!}",
    "\\boxed{\\sum_{n=1}^{10^{100}} n^{n^{n}}}",
    "\\boxed{\\int_0^{\\infty} e^{e^{e^{x}}} dx}",
    "\\boxed{" + "\\sqrt{" * 500 + "2" + "}" * 500 + "}",
    "\\boxed{\\begin{pmatrix}" + "1&" * 5000 + "1\\end{pmatrix}}",
]
PATHOLOGICAL_GOLDS = ["9^{9^{9^{9}}}", "\\frac{1}{" * 200 + "2" + "}" * 200, "(" * 500 + ")" * 500]


def _body(*items: bytes) -> bytes:
    return b'{"items":[' + b",".join(items) + b"]}"


def _post(server: Server, body: bytes) -> httpx.Response:
    return httpx.post(
        server.url + "/v1/score",
        content=body,
        headers={"content-type": "application/json"},
        timeout=DEADLINE_S + 30,
    )


@pytest.fixture(scope="module")
def hostile_server() -> Iterator[Server]:
    server = Server(Settings(workers=2, spec_dirs=(TEST_SPECS,), **LIMITS))
    server.start()
    yield server
    server.stop()


def _still_answers(server: Server) -> None:
    response = _post(server, _body(GOOD))
    assert response.status_code == 200, response.text
    (result,) = response.json()["results"]
    assert result["status"] == "ok" and result["score"] == 1.0


def _check_mixed(server: Server, hostile: bytes) -> httpx.Response:
    """POST good, hostile, good: a 422 naming the body or field, or 200 with both good items
    scored 1; never a 5xx."""
    response = _post(server, _body(GOOD, hostile, GOOD))
    assert response.status_code in (200, 422), response.text[:500]
    if response.status_code == 422:
        assert all(d["loc"][0] == "body" for d in response.json()["detail"])
    else:
        results = response.json()["results"]
        assert len(results) == 3
        for good in (results[0], results[2]):
            assert (good["status"], good["score"]) == ("ok", 1.0)
    return response


CASES = [
    pytest.param(place, value, id=f"{place}: {name}")
    for place in PLACES
    for name, value in HOSTILE_VALUES.items()
]


@pytest.mark.parametrize(("place", "value"), CASES)
def test_a_hostile_value_anywhere_in_an_item_is_refused_or_judged(
    hostile_server: Server, place: str, value: bytes
) -> None:
    response = _check_mixed(hostile_server, PLACES[place] % value)
    if response.status_code == 200:
        bad = response.json()["results"][1]
        # Out of bounds or unusable: the reference's (or meta's) fault, never ours.
        assert bad["status"] in ("invalid", "ok"), bad
        if bad["status"] == "invalid":
            assert bad["error"]["code"] and bad["error"]["message"], bad


@pytest.mark.parametrize("depth", [65, 500, 900])
def test_a_deep_reference_is_invalid_naming_the_bound(hostile_server: Server, depth: int) -> None:
    response = _check_mixed(hostile_server, PLACES["math reference"] % nested(depth))
    assert response.status_code == 200
    bad = response.json()["results"][1]
    assert bad["status"] == "invalid"
    assert bad["error"] == {
        "code": "reference_out_of_bounds",
        "message": "`reference` nested deeper than 64 levels",
    }
    _still_answers(hostile_server)


def test_a_deep_value_in_the_references_table_spoils_only_its_items(
    hostile_server: Server,
) -> None:
    body = (
        b'{"references":[{"answer":"7"},{"answer":"1","x":' + nested(500) + b'}],"items":['
        b'{"id":"a","domain":"math","response":"\\\\boxed{7}","reference_index":0},'
        b'{"id":"b","domain":"math","response":"\\\\boxed{1}","reference_index":1},'
        b'{"id":"c","domain":"math","response":"\\\\boxed{1}","reference_index":1}]}'
    )
    results = _post(hostile_server, body).json()["results"]
    assert [r["status"] for r in results] == ["ok", "invalid", "invalid"]
    assert results[0]["score"] == 1.0


def test_bodies_too_deep_or_too_wide_to_decode_are_422_naming_the_body(
    hostile_server: Server,
) -> None:
    for raw in (
        PLACES["math reference"] % nested(100_000),
        PLACES["math reference"] % huge_int(100_000),
        b'{"items":' + nested(50_000) + b"}",
    ):
        response = _post(hostile_server, _body(GOOD, raw))
        assert response.status_code == 422, response.text[:300]
        assert response.json()["detail"][0]["loc"] == ["body"]
    _still_answers(hostile_server)


@pytest.mark.parametrize("literal", [b"NaN", b"Infinity", b"1e400"])
def test_non_finite_numbers_in_a_length_field_make_the_item_invalid_naming_it(
    hostile_server: Server, literal: bytes
) -> None:
    item = (
        b'{"domain":"math","response":"\\\\boxed{1}","reference":{"answer":"1"},'
        b'"response_tokens":' + literal + b"}"
    )
    response = _post(hostile_server, _body(GOOD, item))
    assert response.status_code == 200, response.text[:300]
    good, bad = response.json()["results"]
    assert good["status"] == "ok"
    assert bad["status"] == "invalid" and bad["error"]["message"].startswith("`response_tokens`")


def test_values_within_bounds_are_kept_and_meta_is_echoed_untouched(
    hostile_server: Server,
) -> None:
    meta = {"prompt": "p3", "sample": 7, "big": int("9" * 4000), "nested": [[[{"a": None}]]]}
    item = {"domain": "math", "response": "\\boxed{1}", "reference": {"answer": "1"}, "meta": meta}
    body = _body(json.dumps(item).encode())
    (result,) = _post(hostile_server, body).json()["results"]
    assert result["status"] == "ok" and result["meta"] == meta


@pytest.mark.parametrize("response", PATHOLOGICAL_RESPONSES)
def test_pathological_math_responses_are_judged(hostile_server: Server, response: str) -> None:
    item = json.dumps({"domain": "math", "response": response, "reference": {"answer": "1"}})
    results = _check_mixed(hostile_server, item.encode()).json()["results"]
    assert results[1]["status"] == "ok" and results[1]["score"] == 0.0, results[1]


@pytest.mark.parametrize("gold", PATHOLOGICAL_GOLDS)
def test_pathological_golds_resolve_without_harm(hostile_server: Server, gold: str) -> None:
    item = json.dumps({"domain": "math", "response": "\\boxed{1}", "reference": {"answer": gold}})
    results = _check_mixed(hostile_server, item.encode()).json()["results"]
    assert results[1]["status"] in ("ok", "invalid"), results[1]


def test_a_mixed_batch_of_every_hostile_item_scores_its_good_items(hostile_server: Server) -> None:
    hostile = [
        PLACES[place] % value
        for place in ("math reference", "meta", "fn_name expected", "puzzle entry")
        for name, value in HOSTILE_VALUES.items()
        if not name.endswith(("100,000 digits", "5,000 digits", "nested 100000", "nested 5000"))
    ]
    hostile += [
        json.dumps({"domain": "math", "response": r, "reference": {"answer": "1"}}).encode()
        for r in PATHOLOGICAL_RESPONSES
    ]
    body = _body(*[part for h in hostile for part in (GOOD, h)])
    response = _post(hostile_server, body)
    assert response.status_code == 200
    results = response.json()["results"]
    assert len(results) == 2 * len(hostile)
    assert all((r["status"], r["score"]) == ("ok", 1.0) for r in results[0::2])
    assert all(r["status"] in ("ok", "invalid") for r in results[1::2])
    _still_answers(hostile_server)


def _library_mode(lines: list[bytes], tmp_path: Path) -> list[dict[str, Any]]:
    source = tmp_path / "items.jsonl"
    source.write_bytes(b"\n".join(lines) + b"\n")
    env = {
        **os.environ,
        **{f"PROCTOR_{k.upper()}": str(v) for k, v in LIMITS.items()},
        "PROCTOR_WORKERS": "2",
    }
    done = subprocess.run(
        [*PROCTOR, "score", str(source), "--omit-timing", "--no-progress"],
        capture_output=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    header, *results = done.stdout.splitlines()  # the first line names the spec
    assert "hash" in json.loads(header)["spec"]
    return [json.loads(line) for line in results]


def _over_http(server: Server, line: bytes) -> dict[str, Any]:
    """A line's result over HTTP: the item alone in a request; a 422 is the `invalid` result
    library mode gives (its message names the line instead of the body)."""
    response = _post(server, _body(line))
    if response.status_code == 422:
        return {"status": "invalid", "code": "malformed_item"}
    (result,) = response.json()["results"]
    return _unmeasured(result)


def _unmeasured(result: dict[str, Any]) -> dict[str, Any]:
    """A result without its measurements (elapsed time, a code run's CPU time)."""
    result = {k: v for k, v in result.items() if k != "elapsed_ms"}
    result["details"] = {k: v for k, v in result.get("details", {}).items() if k != "cpu_s"}
    return result


def test_library_mode_gives_the_same_result_for_every_hostile_item(
    hostile_server: Server, tmp_path: Path
) -> None:
    lines = [PLACES[place] % value for place, value in [c.values for c in CASES][::3]]
    lines += [
        json.dumps({"domain": "math", "response": r, "reference": {"answer": "1"}}).encode()
        for r in PATHOLOGICAL_RESPONSES[:4]
    ]
    lines.append(
        b'{"domain":"math","response":"\\\\boxed{1}","reference":{"answer":"1"},"bogus":1}'
    )
    offline = _library_mode(lines, tmp_path)
    assert len(offline) == len(lines)
    for number, (line, result) in enumerate(zip(lines, offline, strict=True), 1):
        online = _over_http(hostile_server, line)
        if online.get("code") == "malformed_item" and "error" not in online:
            assert result["status"] == "invalid", (number, result)
            assert result["error"]["code"] == "malformed_item"
            assert result["error"]["message"].startswith(f"line {number}")
        else:
            error = online.get("error") or {}
            if online["status"] == "invalid" and error.get("code") == "malformed_item":
                # a field the reader refused: library mode names the line before the reason
                named = {**error, "message": f"line {number}: {error['message']}"}
                online = {**online, "error": named}
            assert _unmeasured(result) == online, (number, line[:200])
