"""Finding the final answer in a response: the last `\\boxed{}` and the "answer is" fallbacks.

Shared by the math and STEM scorers. Braces are matched, so `\\boxed{\\frac{1}{2}}` yields
`\\frac{1}{2}`; `\\fbox{}` and `\\boxed x` (no braces) are recognised too. Nothing here raises on
any input.
"""

from __future__ import annotations

import re
from typing import Literal

__all__ = ["Fallback", "answer_is", "extract_answer", "last_boxed"]

Fallback = Literal["answer_is"]

_BOX = re.compile(r"\\(?:boxed|fbox)\s*")
_TOKEN = re.compile(r"[^\s$]+")


def _balanced(text: str, start: int, stop: int) -> str | None:
    """The content of the brace group opening at text[start] == '{', or None if it never closes.

    Escaped braces (`\\{`, `\\}`) do not count. `stop` is the opening brace of a later group
    known never to close: reaching it still open means this group cannot close either (its depth
    there is at least 1 and the later group never returns to it), so the scan ends there and
    `last_boxed` stays linear in the length of the text, however many boxes are left open.
    """
    depth = 0
    i = start
    while i < len(text):
        if i >= stop:
            return None
        ch = text[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return text[start + 1 : i]
        i += 1
    return None


def last_boxed(text: str) -> str | None:
    """The content of the last complete `\\boxed{...}` (or `\\fbox{...}`, or `\\boxed x`)."""
    unclosed = len(text)
    for match in reversed(list(_BOX.finditer(text))):
        end = match.end()
        if end < len(text) and text[end] == "{":
            content = _balanced(text, end, unclosed)
            if content is not None:
                return content.strip()
            unclosed = end
        elif end < len(text) and match.group(0).endswith(" "):
            token = _TOKEN.match(text, end)  # from `end`, not a copy of the rest of the text
            if token:
                return token.group(0).strip()
    return None


_ANSWER_IS = re.compile(
    r"(?:final\s+answer|the\s+answer|answer)\s*(?:is|:|=)\s*:?\s*",
    re.IGNORECASE,
)
_SENTENCE_END = re.compile(r"\.\s")


def answer_is(text: str) -> str | None:
    """The rest of the sentence after the last "the answer is" / "final answer:" / "Answer:".

    The last anchor counts even when an earlier one is on the same line ("I thought the answer is
    6, but the answer is 8"), and the answer ends at the end of its line or sentence (". ").
    """
    matches = list(_ANSWER_IS.finditer(text))
    if not matches:
        return None
    answer = text[matches[-1].end() :].split("\n", 1)[0]
    answer = _SENTENCE_END.split(answer, maxsplit=1)[0].strip()
    # Trailing dots and spaces, then dollar signs at either end. Not `[.\s]+$` and `\$+$`: a
    # regex retries those at every character of a long run that does not reach the end, which is
    # quadratic in a hostile line.
    end = len(answer)
    while end and (answer[end - 1] == "." or answer[end - 1].isspace()):
        end -= 1
    return answer[:end].lstrip("$").rstrip("$").strip() or None


def extract_answer(text: str, fallbacks: tuple[Fallback, ...]) -> tuple[str | None, str]:
    """(answer, how it was found); the last `\\boxed{}` first, then each fallback in order."""
    boxed = last_boxed(text)
    if boxed:
        return boxed, "boxed"
    for fallback in fallbacks:
        if fallback == "answer_is":
            found = answer_is(text)
            if found:
                return found, fallback
    return None, "none"
