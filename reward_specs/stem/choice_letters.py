r"""Reading the chosen option of a multiple-choice response as a careful grader does.

In order: the boxes that end the response, then the last explicit answer statement ("Answer:",
"the answer is", "my answer is", "I choose"), which wins over any later mention of other options
("Option A is wrong because ..."); only without either, the last parenthesised "(C)" or stated
"option C". A statement may give the choice's text instead of its letter. A letter counts when it
stands alone as the answer, in either case (`answer: c`, `**C**`, `\text{c}`, `(c)`); a lower-case
letter followed by a word is prose ("the answer is a noble gas"). A statement naming two different
letters ("A or C", `\boxed{A}, \boxed{C}`) is not parsed: the response did not choose.

Nothing here raises on any input; every scan is linear in the response.
"""

from __future__ import annotations

import re
import string
from typing import Literal

from reward_specs.extract import final_boxes

__all__ = [
    "AMBIGUOUS",
    "ChoiceRule",
    "choice_text_in",
    "mentioned_letter",
    "norm",
    "pick_choice",
    "rule_for",
]

LETTERS = string.ascii_uppercase
AMBIGUOUS = -1
"""`pick_choice`'s index when the final statement names two different letters."""

ChoiceRule = Literal["explicit_statement", "standalone_letter", "two_letters"]
"""The names `details["rules"]` gives when the careful reader changed a verdict."""


def norm(text: str) -> str:
    """A choice's text as compared: `\\text{}` unwrapped, spaces collapsed, no final dot, lower."""
    text = re.sub(r"\\text\{([^}]*)\}", r"\1", text)
    return re.sub(r"\s+", " ", text.strip().strip("$").strip()).rstrip(".").lower()


def choice_text_in(text: str, choices: list[str]) -> int | None:
    """The index of the choice whose whole text `text` is, if any."""
    normed = norm(text)
    for i, choice in enumerate(choices):
        if normed and normed == norm(choice):
            return i
    return None


_OPEN = r"(?:\*\*|\*|\$|\\(?:text|textbf|mathrm|mathbf|boxed)\s*\{|\()*"
_CLOSE = r"(?:\*\*|\*|\$|\}|\))*"
_LETTER = re.compile(r"\s*(?P<open>" + _OPEN + r")(?P<l>[A-Za-z])(?P<close>" + _CLOSE + r")")
_JOINER = re.compile(r"\s*(?:,|/|&|\bor\b|\band\b)\s*", re.IGNORECASE)
_PROSE_AFTER = re.compile(r"[ \t]+[A-Za-z]")
_EXPLICIT = re.compile(
    r"(?:\b(?:(?:final|correct|right|best|my)\s+)?(?:answer|choice|option)\s*(?:\*\*)?\s*"
    r"(?:is|:|=|would\s+be|will\s+be)\s*(?:\*\*)?\s*:?"
    r"|\bI\s*(?:would\s+|will\s+|'ll\s+|'d\s+)?(?:choose|pick|select|go\s+with))",
    re.IGNORECASE,
)
_SENTENCE_END = re.compile(r"\.\s|\n")
_STATEMENT_CHARS = 300
"""How far a statement is read: the scan of many anchors stays linear in the response."""
_PAREN_LETTER = re.compile(r"\(([A-Z])\)")
_STATED_LETTER = re.compile(r"\b(?:option|choice)\s+\(?([A-Z])\b\)?", re.IGNORECASE)


def _letters_at(text: str, pos: int, n: int) -> list[int] | None:
    """The letters standing alone as an answer at `text[pos:]`, joined by "or", "and", commas;
    None when what is there is not a letter of the `n` offered."""
    found: list[int] = []
    while True:
        m = _LETTER.match(text, pos)
        if m is None:
            break
        after = text[m.end() : m.end() + 1]
        if after.isalnum() or after == "_":
            break  # part of a word: "Answer: Blue"
        wrapped = bool(m.group("open") or m.group("close"))
        if m.group("l").islower() and not wrapped and _PROSE_AFTER.match(text, m.end()):
            break  # "the answer is a noble gas"
        index = LETTERS.index(m.group("l").upper())
        if index >= n:
            return None
        found.append(index)
        joiner = _JOINER.match(text, m.end())
        if joiner is None:
            break
        pos = joiner.end()
    return found or None


def _statement(text: str, start: int, choices: list[str]) -> int | None:
    """The choice an explicit statement starting at `text[start]` names (AMBIGUOUS for two)."""
    stop = min(len(text), start + _STATEMENT_CHARS)
    end = _SENTENCE_END.search(text, start, stop)
    sentence = text[start : end.start() if end else stop]
    found = choice_text_in(sentence.strip().rstrip("."), choices)
    if found is not None:
        return found
    letters = _letters_at(sentence, 0, len(choices))
    if not letters:
        return None
    return letters[0] if len(set(letters)) == 1 else AMBIGUOUS


def _from_boxes(text: str, choices: list[str]) -> int | None:
    picks: set[int] = set()
    for box in final_boxes(text):
        found = choice_text_in(box, choices)
        if found is None:
            letters = _letters_at(box, 0, len(choices))
            if letters is None:
                return None  # not a choice: the caller reads the statements
            if len(set(letters)) > 1:
                return AMBIGUOUS
            found = letters[0]
        picks.add(found)
    if not picks:
        return None
    return picks.pop() if len(picks) == 1 else AMBIGUOUS


def pick_choice(text: str, choices: list[str]) -> tuple[int | None, str]:
    """(index of the chosen option, where it was read); index AMBIGUOUS when the final statement
    names two letters, None when nothing was chosen."""
    boxed = _from_boxes(text, choices)
    if boxed is not None:
        return boxed, "boxed"
    for match in reversed(list(_EXPLICIT.finditer(text))):
        found = _statement(text, match.end(), choices)
        if found is not None:
            return found, "answer_line"
    return mentioned_letter(text, len(choices))


def mentioned_letter(text: str, n: int) -> tuple[int | None, str]:
    """The last parenthesised capital "(C)", else the last "option C" / "choice C", of the `n`
    offered: where both readers look when the response states no answer."""
    for pattern, source in ((_PAREN_LETTER, "parenthesised"), (_STATED_LETTER, "stated")):
        for match in reversed(list(pattern.finditer(text))):
            letter = match.group(1)
            if letter.isupper() and LETTERS.index(letter) < n:
                return LETTERS.index(letter), source
    return None, "none"


_LOWER_AFTER_ANCHOR = re.compile(r"(?<![A-Za-z\\])[a-z](?![A-Za-z])")


def rule_for(text: str, picked: int | None, source: str) -> ChoiceRule:
    """Which of the reader's rules most likely made its pick differ from the plain reader's:
    two letters refused, a lower-case letter read, else the explicit statement preferred."""
    if picked == AMBIGUOUS:
        return "two_letters"
    if picked is not None and source in ("boxed", "answer_line"):
        letter = LETTERS[picked].lower()
        statements = list(_EXPLICIT.finditer(text))
        start = statements[-1].end() if statements and source == "answer_line" else 0
        window = text[start : start + _STATEMENT_CHARS]
        if any(m.group(0) == letter for m in _LOWER_AFTER_ANCHOR.finditer(window)):
            return "standalone_letter"
    return "explicit_statement"
