"""Finding the final answer in a response: the last `\\boxed{}` and the "answer is" fallbacks.

Shared by the math and STEM scorers. Braces are matched, so `\\boxed{\\frac{1}{2}}` yields
`\\frac{1}{2}`; `\\fbox{}` and `\\boxed x` (no braces) are recognised too. `final_boxes` gives
the boxes that end a response together (`\\boxed{2} and \\boxed{3}`), `final_sentence` the last
sentence, for graders that read more than the last box. `hashes_answer` and `answer_line` read
the answers of datasets with a format of their own (GSM8K's `#### 72`, DAPO's `Answer: 72`).
Nothing here raises on any input.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Literal

__all__ = [
    "BoxedFallback",
    "Fallback",
    "answer_is",
    "answer_line",
    "extract_answer",
    "final_boxes",
    "final_sentence",
    "hashes_answer",
    "last_boxed",
    "stated_sentence",
]

Fallback = Literal["boxed", "answer_is", "json"]
"""Where to look for an answer when a domain's own format is missing, with one meaning in every
domain: `boxed` the last `\\boxed{}`, `answer_is` "the answer is X" on its line,
`json` the last fenced JSON block or JSON value of the response (puzzles, `locate_json`). Each
domain's config takes the subset that makes sense for it."""

BoxedFallback = Literal["answer_is"]
"""The `Fallback`s of the domains whose own format is the last `\\boxed{}` (math, STEM)."""

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


def _boxes_from_the_end(text: str) -> Iterator[tuple[int, int, str]]:
    """(start, end, content) of each complete box, the last first; linear in the text however
    many boxes are left open (see `_balanced`). A caller that stops early pays only for what it
    read: `last_boxed` takes one."""
    unclosed = len(text)
    for match in reversed(list(_BOX.finditer(text))):
        end = match.end()
        if end < len(text) and text[end] == "{":
            content = _balanced(text, end, unclosed)
            if content is not None:
                yield match.start(), end + len(content) + 2, content.strip()
            else:
                unclosed = end
        elif end < len(text) and match.group(0).endswith(" "):
            token = _TOKEN.match(text, end)  # from `end`, not a copy of the rest of the text
            if token:
                yield match.start(), token.end(), token.group(0).strip()


def last_boxed(text: str) -> str | None:
    """The content of the last complete `\\boxed{...}` (or `\\fbox{...}`, or `\\boxed x`)."""
    for _, _, content in _boxes_from_the_end(text):
        return content
    return None


_BETWEEN_BOXES = re.compile(
    r"(?:[ \t\n,;$&]|\\[,;: ]|\\q?quad\b|\\\\|\band\b|\bor\b"
    r"|\\(?:text|mbox|mathrm|textrm)\s*\{\s*(?:and|or|,)?\s*\})*"
)
"""What may stand between boxes that form one answer: commas, "and", "or", `\\quad`, line breaks
(LaTeX's `\\\\` too), dollars and spaces; never a blank line (`final_boxes` checks)."""


def final_boxes(text: str) -> list[str]:
    """The boxes that end the response as one answer, in order: the last box and those before it
    joined to it only by `_BETWEEN_BOXES`, within its paragraph. One box (or none) is the usual
    case; boxes of intermediate results, with prose between them, are not included."""
    run: list[str] = []
    previous_start = -1
    for start, end, content in _boxes_from_the_end(text):
        if run:
            gap = text[end:previous_start]
            if end > previous_start or "\n\n" in gap.replace(" ", "").replace("\t", ""):
                break
            if not _BETWEEN_BOXES.fullmatch(gap):
                break
        run.append(content)
        previous_start = start
    run.reverse()
    return run


_SENTENCE_BREAK = re.compile(r"[.!?](?:\s|$)|\n")


def final_sentence(text: str, limit: int = 2000) -> str:
    """The last non-empty sentence of `text` (ending at ". ", "!", "?" or a line break), at most
    `limit` characters of it (a decimal point, "3.5", is followed by a digit, not a space)."""
    tail = text[-limit:].rstrip()
    while tail and tail[-1] in ".!?":
        tail = tail[:-1].rstrip()
    last = 0
    for match in _SENTENCE_BREAK.finditer(tail):
        if tail[match.end() :].strip():
            last = match.end()
    return tail[last:].strip()


_ANSWER_IS = re.compile(
    r"(?:final\s+answer|the\s+answer|answer)\s*(?:is|:|=)\s*:?\s*",
    re.IGNORECASE,
)
_SENTENCE_END = re.compile(r"\.\s")


def stated_sentence(text: str) -> str | None:
    """The rest of the sentence after the last "the answer is" / "final answer:" / "Answer:",
    as written (dollars kept), or None without such an anchor.

    The last anchor counts even when an earlier one is on the same line ("I thought the answer is
    6, but the answer is 8"), and the sentence ends at the end of its line or at ". ".
    """
    matches = list(_ANSWER_IS.finditer(text))
    if not matches:
        return None
    sentence = text[matches[-1].end() :].split("\n", 1)[0]
    return _SENTENCE_END.split(sentence, maxsplit=1)[0]


def answer_is(text: str) -> str | None:
    """The answer a `stated_sentence` gives: trailing dots and the dollars around it removed."""
    answer = stated_sentence(text)
    return None if answer is None else _bare(answer)


def _bare(answer: str) -> str | None:
    r"""`answer` without trailing dots and spaces, then without dollar signs at either end. Not
    `[.\s]+$` and `\$+$`: a regex retries those at every character of a long run that does not
    reach the end, which is quadratic in a hostile line."""
    answer = answer.strip()
    end = len(answer)
    while end and (answer[end - 1] == "." or answer[end - 1].isspace()):
        end -= 1
    return answer[:end].lstrip("$").rstrip("$").strip() or None


_HASHES = re.compile(r"####[ \t]*\$?[ \t]*(-?(?:[0-9][0-9,]*(?:\.[0-9]+)?|\.[0-9]+))")
_ANSWER_LINE = re.compile(r"Answer\s*:\s*([^\n]+)", re.IGNORECASE)


def _last(pattern: re.Pattern[str], text: str) -> re.Match[str] | None:
    found = None
    for match in pattern.finditer(text):
        found = match
    return found


def hashes_answer(text: str) -> str | None:
    """GSM8K's answer: the number after the last `####` that one follows, commas removed, as
    verl's `gsm8k.py` reads it. verl wants exactly one space after the marks and reads only the
    last 300 characters; this takes any spaces (or none) and a dollar sign, reads the whole
    text, and leaves a trailing dot out of the number."""
    found = _last(_HASHES, text)
    return None if found is None else found.group(1).replace(",", "")


def answer_line(text: str) -> str | None:
    """DAPO's answer: the last `Answer:` line (any case), as verl's `math_dapo.py` finds it; of
    that line, its last `\\boxed{}`, else what `answer_is` reads of it (the sentence after its
    last anchor, so "Answer: The final answer is $5$. I hope it is correct." gives `5`, as verl's
    normalisation does)."""
    found = _last(_ANSWER_LINE, text)
    if found is None:
        return None
    return last_boxed(found.group(1)) or answer_is(found.group(0))


_FINDERS: dict[BoxedFallback, Callable[[str], str | None]] = {"answer_is": answer_is}


def extract_answer(text: str, fallbacks: tuple[BoxedFallback, ...]) -> tuple[str | None, str]:
    """(answer, how it was found); the last `\\boxed{}` first, then each fallback in order."""
    boxed = last_boxed(text)
    if boxed:
        return boxed, "boxed"
    for fallback in fallbacks:
        found = _FINDERS[fallback](text)
        if found:
            return found, fallback
    return None, "none"
