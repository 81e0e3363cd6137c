"""The math and STEM regression tables through both public paths: the HTTP service and
`proctor score` (library mode, no server), under the default spec (prorl-v1-careful-2: the
careful grader, sent without a spec name), prorl-v1 (math-verify alone) and the evaluation spec
(prose answers). Verdicts must match the tables' columns, and the two paths must give the same
bytes for every result (all fields but `elapsed_ms`, a measurement)."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import httpx
import pytest

from service.cli import result_line
from service.schemas import ScoreResult
from tests.cases import DEFAULT, EVALUATION, PLAIN
from tests.cases.math_cases import MATH_CASES
from tests.cases.stem_cases import STEM_CASES
from tests.helpers import TEST_SPECS, score

SPECS = [None, PLAIN, EVALUATION]
"""None: the request names no spec, so the server's default (DEFAULT) judges."""

ITEMS: list[dict[str, Any]] = [
    {"id": f"math-{i}", "domain": "math", "response": c.response, "reference": c.reference}
    for i, c in enumerate(MATH_CASES)
] + [
    {"id": f"stem-{i}", "domain": "stem", "response": c.response, "reference": c.reference}
    for i, c in enumerate(STEM_CASES)
]


def expected(spec: str | None) -> list[bool]:
    name = spec or DEFAULT
    return [c.verdict(name) for c in MATH_CASES] + [c.verdict(name) for c in STEM_CASES]


KNOWN = [bool(c.known_issue) for c in MATH_CASES] + [bool(c.known_issue) for c in STEM_CASES]
COMMENTS = [c.comment for c in MATH_CASES] + [c.comment for c in STEM_CASES]


def test_the_tables_are_big_enough() -> None:
    assert len(MATH_CASES) >= 300
    assert len(STEM_CASES) >= 130


@pytest.fixture(scope="module", params=SPECS, ids=lambda s: s or "default")
def spec(request: pytest.FixtureRequest) -> str | None:
    name: str | None = request.param
    return name


@pytest.fixture(scope="module")
def http_results(client: httpx.Client, spec: str | None) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = score(client, ITEMS, spec=spec)
    return results


@pytest.fixture(scope="module")
def cli_lines(tmp_path_factory: pytest.TempPathFactory, spec: str | None) -> list[str]:
    folder = tmp_path_factory.mktemp("cli")
    source, target = folder / "items.jsonl", folder / "results.jsonl"
    source.write_text("".join(json.dumps(item) + "\n" for item in ITEMS), encoding="utf-8")
    named = ["--spec", spec] if spec else []
    subprocess.run(
        [
            sys.executable,
            "-m",
            "service.cli",
            "score",
            str(source),
            "-o",
            str(target),
            "--omit-timing",
            "--no-progress",
            "--workers",
            "2",
            "--spec-dir",
            str(TEST_SPECS),
            *named,
        ],
        check=True,
        timeout=900,
    )
    header, *results = target.read_text(encoding="utf-8").splitlines()
    assert json.loads(header)["spec"]["hash"].startswith("sha256:")  # line 1 names the spec
    return results


def test_http_verdicts_match_the_tables(
    http_results: list[dict[str, Any]], spec: str | None
) -> None:
    wrong = [
        f"{item['id']} ({comment}): expected {verdict}, got {result['success']}"
        for item, result, verdict, known, comment in zip(
            ITEMS, http_results, expected(spec), KNOWN, COMMENTS, strict=True
        )
        if not known and (result["status"] != "ok" or result["success"] is not verdict)
    ]
    assert not wrong, "\n".join(wrong)
    assert [r["id"] for r in http_results] == [i["id"] for i in ITEMS]


def test_proctor_score_gives_the_same_bytes_as_http(
    http_results: list[dict[str, Any]], cli_lines: list[str]
) -> None:
    assert len(cli_lines) == len(ITEMS)
    for http, line in zip(http_results, cli_lines, strict=True):
        # Through the one serializer both paths use, every field but the measurement.
        received = ScoreResult.model_validate(http)
        assert result_line(received, omit_timing=True) == line
        assert json.loads(line) == {k: v for k, v in http.items() if k != "elapsed_ms"}
