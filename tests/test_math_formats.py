"""A math reference's `format`: the dataset's own answer read first (GSM8K's `####`, DAPO's
`Answer:` line), the spec's extraction where the response does not use it, and nothing changed
for references without it."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from reward_specs import Item, ScoreContext, default_registry, load_specs, score_item
from reward_specs.engine import item_keyer
from reward_specs.math import math_answer_key
from tests.cases import CAREFUL, DEFAULT, PLAIN

REGISTRY = default_registry()
SPECS = load_specs(REGISTRY)

# (format, gold, response, success, extracted, source): each a comment on what it exercises.
FORMAT_CASES: list[tuple[str | None, str, str, bool, str | None, str]] = [
    # GSM8K: its solutions end in `#### <number>`; a policy trained on them writes the same.
    ("gsm8k", "72", "48 / 2 = 24 clips in May, 48 + 24 = 72.\n#### 72", True, "72", "gsm8k"),
    ("gsm8k", "1234", "The total is\n#### 1,234", True, "1234", "gsm8k"),  # commas removed
    ("gsm8k", "72", "#### 70", False, "70", "gsm8k"),
    ("gsm8k", "72", r"I box \boxed{72} but then #### 71", False, "71", "gsm8k"),  # `####` first
    ("gsm8k", "72", r"No marks: \boxed{72}", True, "72", "boxed"),  # the spec's extraction
    ("gsm8k", "72", "The answer is 72.", True, "72", "answer_is"),
    ("gsm8k", "72", "#### seventy-two", False, None, "none"),  # no number after the marks
    # Without `format`, `####` is not an answer: as before.
    (None, "72", "48 + 24 = 72.\n#### 72", False, None, "none"),
    (None, "72", r"\boxed{72} then #### 71", True, "72", "boxed"),
    # DAPO: its prompt asks for the last line to be `Answer: $Answer`.
    ("math_dapo", "34", "So m + n = 34.\nAnswer: 34", True, "34", "math_dapo"),
    ("math_dapo", r"\frac{1}{2}", "Answer: $0.5$", True, "0.5", "math_dapo"),
    ("math_dapo", "34", "Answer: 33\nWait, recheck.\nAnswer: 34", True, "34", "math_dapo"),
    ("math_dapo", "34", r"\boxed{34} Answer: 35", False, "35", "math_dapo"),  # the line first
    ("math_dapo", "34", r"Hence \boxed{34}.", True, "34", "boxed"),  # verl falls back to a box
    (None, "34", "Answer: 34", True, "34", "answer_is"),  # the spec's own fallback reads it
]


def _score(spec: str, fmt: str | None, gold: str, response: str) -> Any:
    reference: dict[str, Any] = {"answer": gold}
    if fmt is not None:
        reference["format"] = fmt
    return score_item(REGISTRY, SPECS[spec], Item("math", response, reference), ScoreContext())


@pytest.mark.parametrize("spec", [PLAIN, CAREFUL, DEFAULT])
@pytest.mark.parametrize(
    ("fmt", "gold", "response", "success", "extracted", "source"), FORMAT_CASES
)
def test_format_case(
    spec: str,
    fmt: str | None,
    gold: str,
    response: str,
    success: bool,
    extracted: str | None,
    source: str,
) -> None:
    outcome = _score(spec, fmt, gold, response)
    assert outcome.status == "ok", outcome.error
    assert outcome.success is success, outcome.details
    assert outcome.parsed is (extracted is not None)
    assert outcome.details.get("extracted") == extracted
    if extracted is not None:
        assert outcome.details["source"] == source


def test_an_unknown_format_is_an_invalid_reference_naming_the_field() -> None:
    outcome = _score(PLAIN, "gsm9k", "72", "#### 72")
    assert outcome.status == "invalid"
    assert outcome.error is not None
    assert outcome.error["code"] == "invalid_reference"
    assert "reference.format" in outcome.error["message"]
    assert "gsm8k" in outcome.error["message"] and "math_dapo" in outcome.error["message"]


def test_over_http_an_unknown_format_names_the_field(client: httpx.Client) -> None:
    """/v1/score judges each item apart: the item is `invalid`, its message naming the field;
    the routes that must refuse a whole request (OpenRLHF's) answer a 422 naming it."""
    items = [
        {"domain": "math", "response": "#### 72", "reference": {"answer": "72", "format": "gsm8k"}},
        {"domain": "math", "response": "#### 72", "reference": {"answer": "72", "format": "hash"}},
    ]
    ok, bad = client.post("/v1/score", json={"items": items}).json()["results"]
    assert (ok["status"], ok["reward"], ok["parsed"]) == ("ok", 1.0, True)
    assert (bad["status"], bad["error"]["code"]) == ("invalid", "invalid_reference")
    assert bad["error"]["message"].startswith("reference.format:")

    label = {"domain": "math", "reference": {"answer": "72", "format": "hash"}}
    answer = client.post(
        "/v1/openrlhf", json={"query": ["q #### 72"], "prompts": ["q"], "labels": [label]}
    )
    assert answer.status_code == 422
    (detail,) = answer.json()["detail"]
    assert detail["loc"] == ["body", "labels", 0]
    assert "reference.format" in detail["msg"]


def test_the_answer_key_holds_what_a_format_reads() -> None:
    """The key does not see the reference, so two responses with one box but different `####`
    answers must not share it: a gsm8k item would take the other's verdict."""
    config = SPECS[PLAIN].config("math")
    gsm8k = [r"\boxed{72} #### 72", r"\boxed{72} #### 71"]
    assert math_answer_key(gsm8k[0], config) != math_answer_key(gsm8k[1], config)
    dapo = [r"\boxed{34} Answer: 34", r"\boxed{34} Answer: 35"]
    assert math_answer_key(dapo[0], config) != math_answer_key(dapo[1], config)
    # Reasoning that differs around the same native answer still shares a key.
    assert math_answer_key("Thinking.\n#### 72", config) == math_answer_key("Hm.\n#### 72", config)

    key = item_keyer(SPECS[PLAIN], REGISTRY)
    ref = b'{"answer":"72","format":"gsm8k"}'
    first, second = (Item("math", r, {"answer": "72", "format": "gsm8k"}) for r in gsm8k)
    assert key(first, ref) != key(second, ref)
