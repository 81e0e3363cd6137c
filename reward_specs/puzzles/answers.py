"""Finding a puzzle's answer in a response, and the JSON inside an answer.

`extract_answer` mirrors Reasoning Gym's own `extract_answer`: the content of the last
`<answer>...</answer>` (one optional whitespace character trimmed inside each tag, then stripped),
so that the string we score is the string Reasoning Gym's tooling would have scored. Fallbacks are
tried in order only when no tag is found.

`locate_json` serves the JSON-answer tasks (Boxnet, graph colouring). It is deliberately
conservative: whatever `json.loads` accepts is taken as is (Reasoning Gym's scorer sees the same
value), and beyond that it recovers only JSON that is complete and well formed: the last fenced
block, or a value embedded in prose. It never rescues part of a malformed value (a truncated list
whose first element happens to be a complete object, a value followed by a stray bracket), so a
malformed answer still scores what Reasoning Gym gives it. Nothing here raises on any input.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, Literal

from reward_specs.extract import Fallback, answer_is, last_boxed

__all__ = ["JSON_BLOCK", "JsonSource", "extract_answer", "last_json_block", "locate_json"]

JsonSource = Literal["json", "fenced", "embedded"]


def _last_tagged(text: str, opening: str, closing: str) -> str | None:
    """The content of the last match of `<tag>\\s?(.*?)\\s?</tag>` (DOTALL) in a left-to-right
    scan, up to the single whitespace characters the pattern trims (the caller strips anyway).

    In linear time: a match runs from an opening tag to the first closing tag after it, and the
    next match starts after that; once an opening tag has no closing tag after it, no later one
    has either. The regex itself retries every opening tag against the rest of the text, which
    is quadratic in a response of unclosed tags.
    """
    found = None
    position = 0
    while True:
        start = text.find(opening, position)
        if start == -1:
            return found
        end = text.find(closing, start + len(opening))
        if end == -1:
            return found
        found = text[start + len(opening) : end]
        position = end + len(closing)


JSON_BLOCK = ("```json", "```")
"""The fence a JSON-block answer sits in, as Boxnet's question shows it."""


def last_json_block(text: str) -> str | None:
    """The content of the last ```json ... ``` block (stripped), in linear time; None if there is
    none or it is empty."""
    found = _last_tagged(text, *JSON_BLOCK)
    return (found.strip() or None) if found is not None else None


def extract_answer(
    text: str, tag: str = "answer", fallbacks: tuple[Fallback, ...] = ()
) -> tuple[str | None, str]:
    """(answer, where it came from): the last `<tag>...</tag>`, else the first fallback that finds
    something. An empty answer counts as none."""
    answer = _last_tagged(text, f"<{tag}>", f"</{tag}>")
    if answer is not None:
        return (answer.strip() or None), "tag"
    for fallback in fallbacks:
        found = _FINDERS[fallback](text)
        if found:
            return found, fallback
    return None, "none"


_FENCE = re.compile(r"```[ \t]*(?:json|JSON|javascript|js)?[ \t]*\n?(.*?)```", re.DOTALL)
_OPENERS = "[{"
_CLOSERS = {"[": "]", "{": "}"}
# After an embedded value, prose may follow but not JSON punctuation: "[...]]" or "{...}, {...}"
# are malformed JSON, not a value followed by prose.
_NOT_PROSE_START = frozenset('[]{},:"')

_decoder = json.JSONDecoder()


def _region_end(text: str, start: int) -> int | None:
    """Where the bracket group opening at `start` closes (brackets counted naively), or None."""
    depth = 0
    for i in range(start, len(text)):
        ch = text[i]
        if ch in _OPENERS:
            depth += 1
        elif ch in "]}":
            depth -= 1
            if depth == 0:
                return i + 1
    return None


def _embedded(text: str, accept: Callable[[Any], bool]) -> Any:
    """The first acceptable JSON value that stands complete in prose; `_NONE` if there is none."""
    i = 0
    while (start := _next_bracket(text, i)) is not None:
        try:
            value, end = _decoder.raw_decode(text, start)
        except ValueError:
            # Not JSON here. Skip the whole bracket group, so that nothing inside a malformed value
            # is ever taken for the answer; a group that never closes ends the search.
            region = _region_end(text, start)
            if region is None:
                return _NONE
            i = region
            continue
        if accept(value):
            rest = text[end:].lstrip()
            if rest and rest[0] in _NOT_PROSE_START:
                return _NONE
            return value
        i = end
    return _NONE


def _next_bracket(text: str, i: int) -> int | None:
    """Where the next JSON list or object may start at or after `i`, or None."""
    starts = [p for p in (text.find("[", i), text.find("{", i)) if p >= 0]
    return min(starts) if starts else None


class _NoneType:
    pass


_NONE: Any = _NoneType()


def locate_json(text: str, accept: Callable[[Any], bool]) -> tuple[Any, JsonSource] | None:
    """The JSON value an answer holds and how it was found, or None.

    `accept` says which values can be the answer (a list of plans, a map); it only steers the
    search in fenced blocks and prose, never overrides a text that is JSON as a whole.
    """
    try:
        return json.loads(text), "json"
    except (ValueError, RecursionError):
        pass
    fences = _FENCE.findall(text)
    if fences:
        try:
            value = json.loads(fences[-1])
        except (ValueError, RecursionError):
            return None
        return value, "fenced"
    try:
        value = _embedded(text, accept)
    except RecursionError:
        return None
    if value is _NONE:
        return None
    return value, "embedded"


def _last_json_text(text: str) -> str | None:
    """The last fenced block, else the last top-level JSON object or list in the text."""
    fences = _FENCE.findall(text)
    if fences:
        return str(fences[-1]).strip() or None
    found = None
    i = 0
    while (start := _next_bracket(text, i)) is not None:
        try:
            _, end = _decoder.raw_decode(text, start)
        except (ValueError, RecursionError):
            i = start + 1
            continue
        found = text[start:end]
        i = end
    return found


_FINDERS: dict[Fallback, Callable[[str], str | None]] = {
    "boxed": last_boxed,
    "answer_is": answer_is,
    "json": _last_json_text,
}
