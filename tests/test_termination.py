"""Termination penalties: truncation, DAPO's soft overlong ramp, and the trailing-loop detector.

`score` stays the task's score; `reward` carries the shaping; `penalties` names each treatment that
fired with the change it made, so `reward == score + sum(penalties)`.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reward_specs import Item, Outcome, ScoreContext, default_registry, load_specs, score_item
from reward_specs.termination import (
    OverlongShaping,
    RepetitionPenalty,
    TerminationConfig,
    TruncationPenalty,
    apply_termination,
    trailing_loop,
)


def TerminationInput(
    response: str,
    finish_reason: str | None = None,
    response_tokens: int | None = None,
    max_response_tokens: int | None = None,
) -> Item:
    return Item("math", response, {}, finish_reason, response_tokens, max_response_tokens)


REGISTRY = default_registry()
SPECS = load_specs(REGISTRY)
LOOP = RepetitionPenalty()  # the defaults: units up to 64 words, 6 copies, 24 words in all
PROSE = (
    "We first expand the product, collect like terms, and check the constant term against the "
    "condition given in the statement; the remaining case follows by symmetry, so the answer is 4."
)


# ---------------------------------------------------------------- trailing loops


@pytest.mark.parametrize(
    ("text", "loop"),
    [
        (PROSE + " I am not sure." * 10, (5, 10)),  # "I am not sure ." x 10
        (PROSE + " wait" * 30, (1, 30)),  # one word, 30 times
        (PROSE + " a b c d" * 6, (4, 6)),  # 6 copies, exactly 24 words: the threshold
        (PROSE + " x y z" * 8, (3, 8)),  # 8 copies of 3 words = 24 words
        (
            " ".join(f"w{i}" for i in range(64)) * 1
            + (" " + " ".join(f"w{i}" for i in range(64))) * 5,
            (64, 6),
        ),  # the longest unit looked for
        ("Let me check again. " * 40, (5, 40)),  # nothing but the loop
        (
            PROSE + " so" * 24,
            (1, 24),
        ),
    ],
)
def test_trailing_loop_found(text: str, loop: tuple[int, int]) -> None:
    assert trailing_loop(text, LOOP) == loop


@pytest.mark.parametrize(
    "text",
    [
        PROSE,
        "",
        "ha ha ha",  # too short to be degenerate
        PROSE + " wait" * 10,  # 10 words in all: below min_loop_words
        PROSE + " a b c d e" * 5,  # 25 words but only 5 copies
        PROSE + " x y z" * 7,  # 7 copies of 3 words = 21 words
        PROSE
        + " I am not sure." * 10
        + " Therefore the answer is 4.",  # the loop is not at the end
        (" ".join(f"w{i}" for i in range(65)) + " ") * 6,  # a 65-word unit: beyond max_ngram
        "1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30",
        "\\boxed{4}" * 3,
    ],
)
def test_trailing_loop_not_found(text: str) -> None:
    assert trailing_loop(text, LOOP) is None


def test_trailing_loop_respects_its_parameters() -> None:
    text = PROSE + " again" * 4
    assert trailing_loop(text, RepetitionPenalty(min_repeats=4, min_loop_words=4)) == (1, 4)
    assert trailing_loop(text, RepetitionPenalty(min_repeats=5, min_loop_words=4)) is None
    assert trailing_loop(PROSE + " a b c" * 6, RepetitionPenalty(max_ngram=2)) is None


def test_trailing_loop_reads_only_the_tail() -> None:
    """A very long response costs no more than its tail: a loop far from the end is invisible."""
    varied = " ".join(f"step{i}" for i in range(5000))
    assert trailing_loop("loop " * 100_000 + varied, LOOP) is None
    assert trailing_loop(varied + " loop" * 100_000, LOOP) == (1, 448)  # counted within the tail


# ---------------------------------------------------------------- DAPO overlong ramp

DAPO = TerminationConfig(overlong=OverlongShaping(buffer_tokens=1024, penalty_factor=1.0))


def overlong(tokens: int, limit: int = 4096, config: TerminationConfig = DAPO) -> float:
    reward, penalties, _ = apply_termination(
        1.0, TerminationInput("x", response_tokens=tokens, max_response_tokens=limit), config
    )
    assert reward == 1.0 + penalties.get("overlong", 0.0)
    return penalties.get("overlong", 0.0)


@pytest.mark.parametrize(
    ("tokens", "delta"),
    [
        (0, 0.0),
        (3071, 0.0),  # before the buffer
        (3072, 0.0),  # at the buffer's start: (3072 - 3072) / 1024 = 0
        (3073, -1 / 1024),  # one token into the buffer
        (3328, -0.25),
        (3584, -0.5),  # the middle of the buffer
        (4095, -1023 / 1024),
        (4096, -1.0),  # at the limit: the full factor
        (4097, -1.0),  # beyond the limit
        (100_000, -1.0),
    ],
)
def test_overlong_ramp(tokens: int, delta: float) -> None:
    assert overlong(tokens) == pytest.approx(delta, abs=1e-12)


def test_overlong_ramp_scales_with_the_factor_and_buffer() -> None:
    half = TerminationConfig(overlong=OverlongShaping(buffer_tokens=1024, penalty_factor=0.5))
    assert overlong(3584, config=half) == pytest.approx(-0.25)
    assert overlong(5000, config=half) == pytest.approx(-0.5)
    short = TerminationConfig(overlong=OverlongShaping(buffer_tokens=10))
    assert overlong(90, limit=100, config=short) == 0.0
    assert overlong(95, limit=100, config=short) == pytest.approx(-0.5)


def test_overlong_needs_both_token_counts() -> None:
    for item in (
        TerminationInput("x", response_tokens=5000),
        TerminationInput("x", max_response_tokens=4096),
        TerminationInput("x"),
    ):
        assert apply_termination(1.0, item, DAPO) == (1.0, {}, {})


@given(st.integers(0, 8192), st.integers(0, 8192))
def test_overlong_ramp_is_monotone(a: int, b: int) -> None:
    lo, hi = sorted((a, b))
    assert -1.0 <= overlong(hi) <= overlong(lo) <= 0.0


# ---------------------------------------------------------------- truncation and combinations


@pytest.mark.parametrize(
    ("score", "finish_reason", "coefficient", "reward", "penalties"),
    [
        (1.0, "length", 0.0, 0.0, {"truncation": -1.0}),
        (1.0, "length", 0.5, 0.5, {"truncation": -0.5}),
        (0.0, "length", 0.0, 0.0, {"truncation": 0.0}),
        (0.75, "length", 0.0, 0.0, {"truncation": -0.75}),
        (1.0, "stop", 0.0, 1.0, {}),
        (1.0, None, 0.0, 1.0, {}),
    ],
)
def test_truncation(
    score: float,
    finish_reason: str | None,
    coefficient: float,
    reward: float,
    penalties: dict[str, float],
) -> None:
    config = TerminationConfig(truncation=TruncationPenalty(coefficient=coefficient))
    item = TerminationInput("fine", finish_reason=finish_reason)
    assert apply_termination(score, item, config)[:2] == (reward, penalties)


def test_nothing_configured_changes_nothing() -> None:
    item = TerminationInput(
        PROSE + " wait" * 100,
        finish_reason="length",
        response_tokens=10_000,
        max_response_tokens=4096,
    )
    assert apply_termination(1.0, item, TerminationConfig()) == (1.0, {}, {})


@settings(max_examples=300)
@given(
    score=st.sampled_from([0.0, 0.25, 0.5, 1.0]),
    finish_reason=st.sampled_from([None, "stop", "length"]),
    looping=st.booleans(),
    tokens=st.none() | st.integers(0, 6000),
    truncation=st.none() | st.floats(0.0, 1.0),
    repetition=st.none() | st.floats(0.0, 1.0),
    factor=st.none() | st.floats(0.0, 2.0),
)
def test_reward_is_score_plus_penalties(
    score: float,
    finish_reason: str | None,
    looping: bool,
    tokens: int | None,
    truncation: float | None,
    repetition: float | None,
    factor: float | None,
) -> None:
    config = TerminationConfig(
        truncation=None if truncation is None else TruncationPenalty(coefficient=truncation),
        repetition=None if repetition is None else RepetitionPenalty(coefficient=repetition),
        overlong=None
        if factor is None
        else OverlongShaping(buffer_tokens=1024, penalty_factor=factor),
    )
    text = PROSE + (" wait" * 30 if looping else "")
    item = TerminationInput(text, finish_reason, tokens, None if tokens is None else 4096)
    reward, penalties, diagnostics = apply_termination(score, item, config)
    assert reward == pytest.approx(score + sum(penalties.values()), abs=1e-12)
    assert all(delta <= 0.0 for delta in penalties.values())
    assert set(penalties) <= {"truncation", "repetition", "overlong"}
    assert ("repetition" in penalties) == (repetition is not None and looping)
    assert ("truncation" in penalties) == (truncation is not None and finish_reason == "length")
    assert ("repetition" in diagnostics) == ("repetition" in penalties)


# ---------------------------------------------------------------- through the engine and the specs

CORRECT = r"Expanding, the constant term is $\boxed{4}$."


def _score(
    spec: str,
    response: str,
    finish_reason: str | None = None,
    response_tokens: int | None = None,
    max_response_tokens: int | None = None,
) -> Outcome:
    item = Item(
        "math", response, {"answer": "4"}, finish_reason, response_tokens, max_response_tokens
    )
    return score_item(REGISTRY, SPECS[spec], item, ScoreContext())


def test_prorl_v1_applies_no_shaping() -> None:
    out = _score(
        "prorl-v1",
        CORRECT + " wait" * 50,
        finish_reason="length",
        response_tokens=9000,
        max_response_tokens=4096,
    )
    assert (out.score, out.reward, out.penalties) == (1.0, 1.0, {})


def test_prorl_v1_termination_zeroes_a_truncated_answer_but_keeps_its_score() -> None:
    out = _score("prorl-v1-termination", CORRECT, finish_reason="length")
    assert out.status == "ok"
    assert (out.score, out.success, out.reward) == (1.0, True, 0.0)
    assert out.penalties == {"truncation": -1.0}
    fine = _score("prorl-v1-termination", CORRECT, finish_reason="stop")
    assert (fine.reward, fine.penalties) == (1.0, {})


def test_prorl_v1_termination_zeroes_a_trailing_loop() -> None:
    out = _score("prorl-v1-termination", CORRECT + " I am not sure." * 10)
    assert (out.score, out.reward) == (1.0, 0.0)
    assert out.penalties == {"repetition": -1.0}
    assert out.details["termination"]["repetition"] == {
        "ngram_words": 5,
        "copies": 10,
    }


def test_dapo_overlong_spec_ramp_through_the_engine() -> None:
    for tokens, reward in ((3000, 1.0), (3072, 1.0), (3584, 0.5), (4096, 0.0), (5000, 0.0)):
        out = _score("dapo-overlong", CORRECT, response_tokens=tokens, max_response_tokens=4096)
        assert out.reward == pytest.approx(reward)
        assert out.score == 1.0
    wrong = score_item(
        REGISTRY,
        SPECS["dapo-overlong"],
        Item("math", CORRECT, {"answer": "5"}, response_tokens=5000, max_response_tokens=4096),
        ScoreContext(),
    )
    assert (wrong.score, wrong.reward) == (0.0, -1.0)
