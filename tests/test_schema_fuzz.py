"""Fuzz every endpoint from the service's own OpenAPI schema: no 500s, and every response
conforms to the schema the service publishes (schemathesis, against a real server)."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import Case
from schemathesis.schemas import BaseSchema
from schemathesis.specs.openapi.checks import (
    negative_data_rejection,
    positive_data_acceptance,
    unsupported_method,
)

from service.http.compat import nemo_gym, sandbox_fusion_routes
from service.http.compat.path_keys import prefixes
from tests.helpers import Server, running_server

EXAMPLES = 30 if os.environ.get("PROCTOR_SHORT") == "1" else 150


@pytest.fixture(scope="module")
def fuzzed_server() -> Iterator[Server]:
    """A server of its own: the fuzzer starts jobs by the dozen and would fill the shared one's."""
    with running_server() as server:
        yield server


@pytest.fixture(scope="module")
def api_schema(fuzzed_server: Server) -> BaseSchema:
    schema = schemathesis.openapi.from_url(fuzzed_server.url + "/openapi.json")
    schema.config.base_url = fuzzed_server.url
    return schema


schema = schemathesis.pytest.from_fixture("api_schema")

_SCHEMA_SILENT = (
    "/v1/openrlhf",
    "/v1/run",
    "/v1/puzzles/{task}/sample",
    *(f"{prefix}/{route}" for prefix in prefixes(nemo_gym.PREFIX) for route in nemo_gym.ROUTES),
    *(
        f"{prefixes(sandbox_fusion_routes.PREFIX)[1]}{route}"
        for route in sandbox_fusion_routes.ROUTES
    ),
)
"""Routes that may refuse a schema-valid body with a documented 422 (see the test), or 401 (a
compat prefix's keyed form on this open server)."""


@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
def test_no_request_makes_the_service_fail(case: Case) -> None:
    response = case.call(timeout=120)
    assert response.status_code < 500, (case.path, case.body, response.text[:500])
    # /v1/openrlhf's three lists must be of equal length and its labels usable, which JSON
    # Schema cannot say: a schema-valid body may be refused there with a documented 422.
    # /v1/run's file paths must be relative and each text within run.max_file_bytes of UTF-8,
    # which the schema does not say either (its limits and file count it does). A puzzle
    # sample's `spec` must name a spec this server loaded and its `config` one the task's
    # dataset accepts: both documented 422s no static schema states. A NeMo-Gym row's domain,
    # reference and spec must be ones this server judges (a documented 422 with the item's
    # error), and a verify response in `aggregate_metrics` must carry a numeric `reward`.
    lenient = [positive_data_acceptance] if case.path in _SCHEMA_SILENT else None
    # A score item's faulty field (a wrong type, a bound, a field missing) makes that item
    # `invalid`, not the request a 422: such a body is answered 200 by design.
    if case.path in ("/v1/score", "/v1/jobs"):
        lenient = [negative_data_rejection]
    # A key in a compat URL is checked before the route is matched: a wrong one (here, any) is a
    # 401 whatever the method, so no method of a keyed prefix is told to an unknown caller.
    if "/k/REDACTED/" in case.path:
        lenient = [*(lenient or []), unsupported_method]
    case.validate_response(response, excluded_checks=lenient)


def test_random_json_bodies_never_crash_score(client: httpx.Client) -> None:
    odd_bodies = [
        b"",
        b"null",
        b"[]",
        b'{"items": null}',
        b'{"items": [null]}',
        b'{"items": [{"domain": "math", "response": "\\ud800", "reference": {"answer": "1"}}]}',
        b'{"items": [{"domain": "math", "response": "x", "reference": {"answer": {"deep": [1]}}}]}',
        b'{"items": [{"domain": "stem", "response": "x", '
        b'"reference": {"answer": "A", "choices": []}}]}',
        b'{"items": [{"domain": "math", "response": "x", '
        b'"reference": {"answer": "1"}, "response_tokens": 1e400}]}',
        b"\xff\xfe\x00",
    ]
    for body in odd_bodies:
        response = client.post(
            "/v1/score", content=body, headers={"content-type": "application/json"}
        )
        assert response.status_code in (200, 422), (body, response.status_code, response.text)
        if response.status_code == 200:
            assert len(response.json()["results"]) == 1


def _wrapped(leaf: bytes, depth: int, kinds: list[str]) -> bytes:
    """`leaf` inside `depth` arrays and objects (written as text: json.dumps recurses)."""
    head, tail = [], []
    for n in range(depth):
        if kinds[n % len(kinds)] == "list":
            head.append(b"[")
            tail.append(b"]")
        else:
            head.append(b'{"k":')
            tail.append(b"}")
    return b"".join(head) + leaf + b"".join(reversed(tail))


@dataclass(frozen=True)
class _Literal:
    """JSON text written as it is (an integer too long for Python to print)."""

    text: bytes


_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=4000, max_value=4400).map(lambda digits: _Literal(b"9" * digits)),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=50),
    st.text(min_size=20_000, max_size=20_001, alphabet="ab"),
)
_values = st.recursive(
    _leaves,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=12,
)


def _raw(value: Any) -> bytes:
    """JSON text of `value`, with what JSON writers refuse written as the literal anyway
    (NaN, Infinity, integers of thousands of digits): the bodies a hostile client sends."""
    if isinstance(value, _Literal):
        return value.text
    if isinstance(value, bool | int | str) or value is None:
        return json.dumps(value).encode()
    if isinstance(value, float):
        return (
            {math.inf: b"Infinity", -math.inf: b"-Infinity"}.get(value, b"NaN")
            if not (math.isfinite(value))
            else json.dumps(value).encode()
        )
    if isinstance(value, list):
        return b"[" + b",".join(_raw(v) for v in value) + b"]"
    return (
        b"{" + b",".join(json.dumps(k).encode() + b":" + _raw(v) for k, v in value.items()) + b"}"
    )


_hostile_json = st.builds(
    _wrapped,
    st.builds(_raw, _values),
    st.one_of(st.integers(0, 70), st.integers(70, 1200), st.just(3000)),
    st.lists(st.sampled_from(["list", "dict"]), min_size=1, max_size=3),
)

_PLACES = [
    b'{"domain":"math","response":"\\\\boxed{1}","reference":{"answer":"1","x":%s}}',
    b'{"domain":"math","response":"\\\\boxed{1}","reference":%s}',
    b'{"domain":"math","response":"\\\\boxed{1}","reference":{"answer":"1"},"meta":{"m":%s}}',
    b'{"domain":"code","response":"```python\\ndef f(x):\\n    return x\\n```","reference":'
    b'{"language":"python","tests":{"fn_name":"f","cases":[{"args":[1],"expected":%s}]}}}',
    b'{"domain":"puzzle","response":"<answer>1</answer>","reference":{"task":"gcd",'
    b'"entry":{"question":"q","answer":"1","metadata":%s}}}',
    b'{"domain":"ifeval","response":"x","reference":{"instruction_id_list":'
    b'["punctuation:no_comma"],"kwargs":[%s]}}',
    b'{"domain":"stem","response":"A","reference":{"answer":"A","choices":%s}}',
]
_GOOD = b'{"id":"good","domain":"math","response":"\\\\boxed{7}","reference":{"answer":"7"}}'


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(value=_hostile_json, place=st.sampled_from(_PLACES), in_table=st.booleans())
def test_deep_and_huge_json_values_never_make_the_service_fail(
    fuzzed_server: Server, value: bytes, place: bytes, in_table: bool
) -> None:
    hostile = place % value
    if in_table:
        body = b'{"references":[' + value + b'],"items":[' + _GOOD + b","
        body += b'{"domain":"math","response":"\\\\boxed{1}","reference_index":0}]}'
    else:
        body = b'{"items":[' + _GOOD + b"," + hostile + b"]}"
    response = httpx.post(
        fuzzed_server.url + "/v1/score",
        content=body,
        headers={"content-type": "application/json"},
        timeout=300,
    )
    assert response.status_code in (200, 422), (body[:300], response.text[:500])
    if response.status_code == 200:
        good, bad = response.json()["results"]
        assert (good["status"], good["score"]) == ("ok", 1.0)
        assert bad["status"] in ("ok", "invalid"), bad
