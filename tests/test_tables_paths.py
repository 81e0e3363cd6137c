"""The math and STEM regression tables through both public paths: the HTTP service and
`proctor score` (library mode, no server). Verdicts must match the tables, and the two paths must
give the same bytes for every result (all fields but `elapsed_ms`, a measurement)."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import httpx
import pytest

from service.cli import result_line
from service.schemas import ScoreResult
from tests.cases.math_cases import MATH_CASES
from tests.cases.stem_cases import STEM_CASES
from tests.helpers import TEST_SPECS, score

ITEMS: list[dict[str, Any]] = [
    {"id": f"math-{i}", "domain": "math", "response": c.response, "reference": c.reference}
    for i, c in enumerate(MATH_CASES)
] + [
    {"id": f"stem-{i}", "domain": "stem", "response": c.response, "reference": c.reference}
    for i, c in enumerate(STEM_CASES)
]
EXPECTED = [c.expected for c in MATH_CASES] + [c.expected for c in STEM_CASES]
KNOWN = [bool(c.known_issue) for c in MATH_CASES] + [bool(c.known_issue) for c in STEM_CASES]
COMMENTS = [c.comment for c in MATH_CASES] + [c.comment for c in STEM_CASES]


def test_the_tables_are_big_enough() -> None:
    assert len(MATH_CASES) >= 150
    assert len(STEM_CASES) >= 50


@pytest.fixture(scope="module")
def http_results(client: httpx.Client) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = score(client, ITEMS)
    return results


@pytest.fixture(scope="module")
def cli_lines(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    folder = tmp_path_factory.mktemp("cli")
    source, target = folder / "items.jsonl", folder / "results.jsonl"
    source.write_text("".join(json.dumps(item) + "\n" for item in ITEMS), encoding="utf-8")
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
        ],
        check=True,
        timeout=900,
    )
    return target.read_text(encoding="utf-8").splitlines()


def test_http_verdicts_match_the_tables(http_results: list[dict[str, Any]]) -> None:
    wrong = [
        f"{item['id']} ({comment}): expected {expected}, got {result['success']}"
        for item, result, expected, known, comment in zip(
            ITEMS, http_results, EXPECTED, KNOWN, COMMENTS, strict=True
        )
        if not known and (result["status"] != "ok" or result["success"] is not expected)
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
