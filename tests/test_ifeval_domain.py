"""The ifeval domain through the engine: score, success, modes, details, and invalid references."""

from __future__ import annotations

from typing import Any

import pytest

from reward_specs import Item, ScoreContext, default_registry, load_specs, score_item
from reward_specs.ifeval import IFEvalConfig, IFEvalReference, score_ifeval

REGISTRY = default_registry()
SPEC = load_specs(REGISTRY)["prorl-v1"]

THREE = {
    "instruction_id_list": [
        "punctuation:no_comma",
        "startend:end_checker",
        "length_constraints:number_words",
    ],
    "kwargs": [
        {},
        {"end_phrase": "Any other questions?"},
        {"num_words": 5, "relation": "at least"},
    ],
}


def _score(response: str, reference: dict[str, Any]) -> Any:
    return score_item(REGISTRY, SPEC, Item("ifeval", response, reference), ScoreContext())


def test_score_is_the_fraction_followed_and_success_needs_all() -> None:
    outcome = _score("One, two, three, four, five. Any other questions?", THREE)
    assert outcome.status == "ok"
    assert outcome.score == pytest.approx(2 / 3)
    assert outcome.success is False
    assert outcome.parsed is True
    assert outcome.details["instructions"][0] == {
        "id": "punctuation:no_comma",
        "strict": False,
        "loose": False,
    }
    assert outcome.details["strict"] == {"followed": 2, "total": 3}

    outcome = _score("One two three four five. Any other questions?", THREE)
    assert (outcome.score, outcome.success) == (1.0, True)


def test_details_carry_strict_and_loose_and_the_mode_chooses() -> None:
    reference = IFEvalReference.model_validate(
        {"instruction_id_list": ["startend:end_checker"], "kwargs": [{"end_phrase": "Bye."}]}
    )
    response = "Hello there.\n**Bye.**"
    strict = score_ifeval(response, reference, IFEvalConfig(mode="strict"), ScoreContext())
    loose = score_ifeval(response, reference, IFEvalConfig(mode="loose"), ScoreContext())
    assert strict.details["instructions"] == loose.details["instructions"]
    assert strict.details["instructions"][0]["strict"] is False
    assert strict.details["instructions"][0]["loose"] is True
    assert (strict.score, loose.score) == (0.0, 1.0)
    assert (strict.details["mode"], loose.details["mode"]) == ("strict", "loose")


def test_binary_reward() -> None:
    reference = IFEvalReference.model_validate(THREE)
    response = "One, two, three, four, five. Any other questions?"
    judgement = score_ifeval(response, reference, IFEvalConfig(reward="binary"), ScoreContext())
    assert (judgement.score, judgement.success) == (0.0, False)
    judgement = score_ifeval(
        "One two three four five. Any other questions?",
        reference,
        IFEvalConfig(reward="binary"),
        ScoreContext(),
    )
    assert (judgement.score, judgement.success) == (1.0, True)


def test_reasoning_is_stripped_by_the_engine() -> None:
    response = (
        "<think>Commas, commas, everywhere.</think>One two three four five. Any other questions?"
    )
    assert _score(response, THREE).score == 1.0


def test_blank_response_follows_nothing() -> None:
    outcome = _score("   ", {"instruction_id_list": ["punctuation:no_comma"]})
    assert (outcome.status, outcome.score) == ("ok", 0.0)


def test_hugging_face_rows_with_every_key_set_to_none_are_accepted() -> None:
    kwargs = {"num_highlights": None, "relation": "less than", "num_words": 10, "keyword": None}
    outcome = _score(
        "Short answer.",
        {"instruction_id_list": ["length_constraints:number_words"], "kwargs": [kwargs]},
    )
    assert (outcome.status, outcome.score) == ("ok", 1.0)


@pytest.mark.parametrize(
    ("reference", "names"),
    [
        ({"instruction_id_list": ["punctuation:no_comma", "x:unknown"]}, ["x:unknown"]),
        (
            {"instruction_id_list": ["punctuation:no_comma"], "kwargs": [{}, {}]},
            ["kwargs has 2 entries"],
        ),
        (
            {"instruction_id_list": ["punctuation:no_comma"], "kwargs": [{"bogus": 1}]},
            ["unknown kwargs", "bogus"],
        ),
        (
            {"instruction_id_list": ["length_constraints:number_words"], "kwargs": [{}]},
            ["missing kwargs", "num_words", "relation"],
        ),
        (
            {
                "instruction_id_list": ["length_constraints:number_words"],
                "kwargs": [{"num_words": 5, "relation": "at most"}],
            },
            ["relation", "at most"],
        ),
        (
            {
                "instruction_id_list": ["length_constraints:number_words"],
                "kwargs": [{"num_words": -1, "relation": "at least"}],
            },
            ["num_words", "non-negative"],
        ),
        (
            {"instruction_id_list": ["keywords:existence"], "kwargs": [{"keywords": ["(x"]}]},
            ["regular expression"],
        ),
        (
            {"instruction_id_list": ["language:response_language"], "kwargs": [{"language": "xx"}]},
            ["'xx'"],
        ),
        (
            {
                "instruction_id_list": ["length_constraints:nth_paragraph_first_word"],
                "kwargs": [{"num_paragraphs": 2, "nth_paragraph": 3, "first_word": "so"}],
            },
            ["nth_paragraph 3"],
        ),
        ({"instruction_id_list": []}, ["instruction_id_list"]),
        ({"instruction_id_list": "punctuation:no_comma"}, ["instruction_id_list"]),
    ],
)
def test_unusable_references_are_invalid_and_named(
    reference: dict[str, Any], names: list[str]
) -> None:
    outcome = _score("Some response.", reference)
    assert outcome.status == "invalid"
    assert outcome.error is not None
    for name in names:
        assert name in outcome.error["message"]
