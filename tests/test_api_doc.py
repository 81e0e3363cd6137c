"""docs/api.md stays true: every field of the published schema is named in it, every example in
it scores as its comment says, and nothing in the repository points outside it for the contract."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers import check_documented, documented_examples

ROOT = Path(__file__).resolve().parent.parent
DOC = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")


def _examples() -> list[Any]:
    found = [
        pytest.param(expect, item, id=f"{n}: {' '.join(expect)}")
        for n, (expect, item) in enumerate(documented_examples())
    ]
    assert len(found) >= 10
    return found


@pytest.mark.parametrize(("expect", "item"), _examples())
def test_every_example_scores_as_the_doc_says(
    client: httpx.Client, expect: list[str], item: dict[str, Any]
) -> None:
    (result,) = client.post("/v1/score", json={"items": [item]}).json()["results"]
    check_documented(expect, result)


def test_the_published_examples_are_the_docs_examples(client: httpx.Client) -> None:
    schema = client.get("/openapi.json").json()
    published = schema["components"]["schemas"]["ScoreRequest"]["examples"]
    documented = [p.values[1] for p in _examples()]
    domains = set()
    for request in published:
        (item,) = request["items"]
        item = {k: v for k, v in item.items() if k != "id"}
        assert item in documented, item
        domains.add(item["domain"])
    assert domains == {"math", "stem", "code", "puzzle", "ifeval"}


def _fields(schema: dict[str, Any]) -> set[str]:
    names: set[str] = set()
    for component in schema["components"]["schemas"].values():
        names.update(component.get("properties", {}))
    return names


def test_every_field_of_the_published_schema_is_named_in_the_doc(client: httpx.Client) -> None:
    schema = client.get("/openapi.json").json()
    missing = sorted(n for n in _fields(schema) if f"`{n}`" not in DOC)
    assert not missing, f"docs/api.md does not name: {missing}"
    for path in schema["paths"]:
        assert re.sub(r"\{[^}]+\}", "{", path).split("{")[0] in DOC, path


def test_nothing_points_outside_the_repository() -> None:
    assert "docs/api.md" in (ROOT / "README.md").read_text(encoding="utf-8")
    # the first draft of the contract and the project's seed documents, which a user lacks
    outside = ("shared/" + "API.md", "../" + "shared/")
    for path in ROOT.rglob("*"):
        if ".git" in path.parts or not path.is_file() or path.suffix not in {".md", ".py", ".toml"}:
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        assert not [mark for mark in outside if mark in text], path


_RUN_EXAMPLE = re.compile(
    r"<!-- run-example -->\s*```json\n(?P<request>.*?)\n```\s*answers[^\n]*\s*```json\n"
    r"(?P<response>.*?)\n```",
    re.S,
)


def _run_examples() -> list[Any]:
    found = [
        pytest.param(json.loads(m["request"]), json.loads(m["response"]), id=f"run {n}")
        for n, m in enumerate(_RUN_EXAMPLE.finditer(DOC))
    ]
    assert len(found) >= 3
    return found


@pytest.mark.parametrize(("request_body", "documented"), _run_examples())
def test_every_run_example_runs_as_the_doc_says(
    client: httpx.Client, request_body: dict[str, Any], documented: dict[str, Any]
) -> None:
    answer = client.post("/v1/run", json=request_body)
    assert answer.status_code == 200, answer.text
    got = answer.json()
    assert set(got) == set(documented)
    for field in ("status", "exit_code", "error"):
        assert got[field] == documented[field], (field, got)
    for field in ("stdout", "stderr"):
        text = documented[field]
        if "..." in text:  # abridged: what it shows must be there
            parts = [part.strip() for part in text.split("...")]
            assert all(part in got[field] for part in parts), (field, got)
        else:
            assert got[field] == text, (field, got)
