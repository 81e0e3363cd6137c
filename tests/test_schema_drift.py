"""The client's copies of the wire models and error codes equal the server's.

The client package never imports the server, so it declares the models again; this test fails
on any drift between the two (field names, types, required or optional, defaults, enum values),
comparing pydantic's JSON schemas with titles and descriptions left out. The differences that
are meant are listed in `_SERVER_ONLY`, each with its reason, and removed from the server's side
before comparing; anything else that differs fails.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from pydantic import BaseModel

import proctor_client._models as client
import proctor_client.codes as client_codes
import reward_specs.codes as server_codes
import service.schemas as server
from service.http.routes.run import RunResponse

_PAIRS: dict[str, tuple[type[BaseModel], type[BaseModel]]] = {
    "ScoreItem": (client.ScoreItem, server.ScoreItem),
    "ScoreResult": (client.ScoreResult, server.ScoreResult),
    "ScoreResponse": (client.ScoreResponse, server.ScoreResponse),
    "SpecSummary": (client.SpecSummary, server.SpecSummary),
    "JobStatus": (client.JobStatus, server.JobStatus),
    "ErrorInfo": (client.ErrorInfo, server.ErrorInfo),
    "RunResult": (client.RunResult, RunResponse),
}

# (model, JSON path inside its schema) -> why the client's copy leaves it out.
_SERVER_ONLY: dict[tuple[str, tuple[str, ...]], str] = {
    ("ScoreItem", ("properties", "reference_index")): "the client builds the table itself",
    ("ScoreItem", ("properties", "id", "anyOf", "0", "maxLength")): "bounded by the server",
    ("ScoreItem", ("properties", "domain", "maxLength")): "bounded by the server",
    ("ScoreItem", ("properties", "domain", "minLength")): "bounded by the server",
}

# (model, field) the server always sends, that the client reads with a default.
_CLIENT_DEFAULTS = {
    ("RunResult", "stdout"),
    ("RunResult", "stderr"),
    ("RunResult", "exit_code"),
    ("RunResult", "cpu_s"),
    ("RunResult", "wall_s"),
}


def _normal(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {k: _normal(v) for k, v in schema.items() if k not in ("title", "description")}
    if isinstance(schema, list):
        return [_normal(v) for v in schema]
    return schema


def _server_view(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    """The server's schema minus what is meant to differ (`_SERVER_ONLY`)."""
    schema = copy.deepcopy(schema)
    for (model, path), _why in _SERVER_ONLY.items():
        if model != name:
            continue
        node: Any = schema
        for key in path[:-1]:
            node = node[int(key)] if isinstance(node, list) else node[key]
        del node[path[-1]]
    return schema


def _client_view(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    """The client's schema with its lenient defaults made required again (`_CLIENT_DEFAULTS`)."""
    schema = copy.deepcopy(schema)
    for model, field in sorted(_CLIENT_DEFAULTS):
        if model == name:
            schema["properties"][field].pop("default")
            schema.setdefault("required", []).append(field)
    if "required" in schema:
        order = list(schema["properties"])
        schema["required"] = sorted(schema["required"], key=order.index)
    return schema


def _drift(name: str, ours: dict[str, Any], theirs: dict[str, Any]) -> bool:
    return _client_view(name, _normal(ours)) != _server_view(name, _normal(theirs))


@pytest.mark.parametrize("name", sorted(_PAIRS))
def test_client_model_matches_server(name: str) -> None:
    mine, theirs = _PAIRS[name]
    assert not _drift(name, mine.model_json_schema(), theirs.model_json_schema())


@pytest.mark.parametrize(
    "mutate",
    [
        lambda s: s["properties"].pop("meta"),  # a field gone
        lambda s: s["properties"]["response"].update(type="integer"),  # a type
        lambda s: s["required"].remove("response"),  # required -> optional
        lambda s: s["properties"]["id"].update(default="x"),  # a default
        lambda s: s["properties"]["finish_reason"]["anyOf"][0]["enum"].append("eos"),  # an enum
    ],
)
def test_drift_is_caught(mutate: Any) -> None:
    schema = client.ScoreItem.model_json_schema()
    mutate(schema)
    assert _drift("ScoreItem", schema, server.ScoreItem.model_json_schema())


def test_status_literals_match() -> None:
    run = client.RunResult.model_json_schema()["properties"]["status"]["enum"]
    assert run == RunResponse.model_json_schema()["properties"]["status"]["enum"]


def test_error_codes_match() -> None:
    assert client_codes.SERVER_CODES == server_codes.SERVER_CODES
    for code in server_codes.SERVER_CODES:
        assert getattr(client_codes, code.upper()) == getattr(server_codes, code.upper())
    assert not client_codes.UNANSWERED_CODES & server_codes.SERVER_CODES
