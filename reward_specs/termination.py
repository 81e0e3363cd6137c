"""Termination penalties, applied after any domain's scorer.

Three independent treatments, each off unless the spec turns it on:

- `truncation` (ProRL stages 4-5): a response cut off by the length limit (`finish_reason ==
  "length"`) has its reward multiplied by `coefficient` (0 by default: it earns nothing).
- `overlong` (DAPO's soft overlong punishment): over the last `buffer_tokens` before
  `max_response_tokens` the reward falls linearly by up to `penalty_factor`; a response longer than
  the limit loses the full factor.
- `repetition`: a response that *ends* in a loop (the same n-gram of words repeated at least
  `min_repeats` times back to back) has its reward multiplied by `coefficient`.

`penalties` in a result maps each treatment that fired to the change it made to the reward (zero or
negative), so `reward == score + sum(penalties.values())` always holds.
"""

from __future__ import annotations

import re
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "OverlongShaping",
    "RepetitionPenalty",
    "TerminationConfig",
    "TerminationFields",
    "TruncationPenalty",
    "apply_termination",
    "trailing_loop",
]


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TruncationPenalty(_Frozen):
    coefficient: float = Field(0.0, ge=0.0, le=1.0)
    """The reward of a length-truncated response is multiplied by this."""


class OverlongShaping(_Frozen):
    buffer_tokens: int = Field(..., gt=0)
    """L: the penalty ramps up over the last L tokens before `max_response_tokens`."""
    penalty_factor: float = Field(1.0, ge=0.0)
    """The largest amount subtracted from the reward."""


class RepetitionPenalty(_Frozen):
    coefficient: float = Field(0.0, ge=0.0, le=1.0)
    """The reward of a response ending in a loop is multiplied by this."""
    max_ngram: int = Field(64, ge=1)
    """The longest repeating unit looked for, in words (punctuation marks count as words)."""
    min_repeats: int = Field(6, ge=2)
    """How many back-to-back copies of the unit at the end make a loop."""
    min_loop_words: int = Field(24, ge=2)
    """A loop must cover at least this many words in all (so "ha ha ha" is not degenerate)."""


class TerminationConfig(_Frozen):
    truncation: TruncationPenalty | None = None
    overlong: OverlongShaping | None = None
    repetition: RepetitionPenalty | None = None


class TerminationFields(Protocol):
    """What the treatments read of an item (`reward_specs.Item`, or any item with these
    fields): the response, and how it ended."""

    @property
    def response(self) -> str: ...
    @property
    def finish_reason(self) -> str | None: ...
    @property
    def response_tokens(self) -> int | None: ...
    @property
    def max_response_tokens(self) -> int | None: ...


_WORD = re.compile(r"\w+|[^\w\s]")


def trailing_loop(text: str, config: RepetitionPenalty) -> tuple[int, int] | None:
    """Return (unit length in words, copies) of the loop `text` ends in, or None.

    Only the tail is examined: `max_ngram * min_repeats` words suffice to see any qualifying loop,
    so the cost does not grow with the length of the response.
    """
    window = config.max_ngram * max(config.min_repeats, 2) + config.max_ngram
    tail = text[-window * 16 :]  # words are rarely longer than 16 characters
    words = _WORD.findall(tail)[-window:]
    for n in range(1, config.max_ngram + 1):
        if n * config.min_repeats > len(words):
            break
        unit = words[-n:]
        copies = 1
        while (copies + 1) * n <= len(words) and words[-(copies + 1) * n : -copies * n] == unit:
            copies += 1
        if copies >= config.min_repeats and copies * n >= config.min_loop_words:
            return n, copies
    return None


def _overlong_delta(shaping: OverlongShaping, tokens: int, limit: int) -> float:
    expected = limit - shaping.buffer_tokens
    if tokens <= expected:
        return 0.0
    if tokens > limit:
        return -shaping.penalty_factor
    return (expected - tokens) / shaping.buffer_tokens * shaping.penalty_factor


def apply_termination(
    score: float, item: TerminationFields, config: TerminationConfig
) -> tuple[float, dict[str, float], dict[str, object]]:
    """Return (reward, penalties, diagnostics) for a judged score."""
    reward = score
    penalties: dict[str, float] = {}
    diagnostics: dict[str, object] = {}
    if config.truncation is not None and item.finish_reason == "length":
        shaped = reward * config.truncation.coefficient
        penalties["truncation"] = shaped - reward
        reward = shaped
    if config.repetition is not None:
        loop = trailing_loop(item.response, config.repetition)
        if loop is not None:
            shaped = reward * config.repetition.coefficient
            penalties["repetition"] = shaped - reward
            diagnostics["repetition"] = {"ngram_words": loop[0], "copies": loop[1]}
            reward = shaped
    if (
        config.overlong is not None
        and item.response_tokens is not None
        and item.max_response_tokens is not None
    ):
        delta = _overlong_delta(config.overlong, item.response_tokens, item.max_response_tokens)
        if delta != 0.0:
            penalties["overlong"] = delta
            reward += delta
    return reward, penalties, diagnostics
