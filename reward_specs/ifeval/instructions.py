"""IFEval's 25 instructions: per id, its kwargs and a checker with the reference's counting rules.

Each entry of `INSTRUCTIONS` names the kwargs the reference's `build_description` takes and a
builder that turns validated kwargs into a check `str -> bool`. The rules are the reference's
(google-research `instruction_following_eval`, as of 2025, and lm-eval's copy of it); the
docstrings state them, including the surprising ones (keywords are regular expressions, keyword
frequency counts substrings, a postscript marker may appear anywhere on a line).

Where the reference would pick a random value (a missing or negative count, an unknown relation,
an out-of-range paragraph index), a reward service must not: such kwargs are rejected as
`InvalidKwargs`, which the domain reports as an `invalid` item. A kwarg whose value is `None` is
absent, as in the Hugging Face copy of IFEval, where every row carries every key.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from reward_specs.ifeval.text import count_sentences, count_words, detect_language, word_tokenize

__all__ = [
    "CONSTRAINED_RESPONSE_OPTIONS",
    "INSTRUCTIONS",
    "LANGUAGE_CODES",
    "Check",
    "Instruction",
    "InvalidKwargs",
    "build_check",
]

Check = Callable[[str], bool]
Kind = Literal["count", "relation", "text", "words", "letter", "language"]

RELATIONS = ("less than", "at least")

LANGUAGE_CODES: Mapping[str, str] = {
    "en": "English", "es": "Spanish", "pt": "Portuguese", "ar": "Arabic", "hi": "Hindi",
    "fr": "French", "ru": "Russian", "de": "German", "ja": "Japanese", "it": "Italian",
    "bn": "Bengali", "uk": "Ukrainian", "th": "Thai", "ur": "Urdu", "ta": "Tamil",
    "te": "Telugu", "bg": "Bulgarian", "ko": "Korean", "pl": "Polish", "he": "Hebrew",
    "fa": "Persian", "vi": "Vietnamese", "ne": "Nepali", "sw": "Swahili", "kn": "Kannada",
    "mr": "Marathi", "gu": "Gujarati", "pa": "Punjabi", "ml": "Malayalam", "fi": "Finnish",
}  # fmt: skip
"""The reference's language table; any other code makes its `build_description` fail."""

CONSTRAINED_RESPONSE_OPTIONS = ("My answer is yes.", "My answer is no.", "My answer is maybe.")


class InvalidKwargs(ValueError):
    """One instruction's kwargs cannot be used as given (the reference would crash or guess)."""


@dataclass(frozen=True, slots=True)
class Instruction:
    id: str
    kwargs: Mapping[str, Kind]
    build: Callable[..., Check]
    description: str


def _compare(count: int, relation: str, threshold: int) -> bool:
    return count < threshold if relation == "less than" else count >= threshold


def _regex(pattern: str, what: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern, re.IGNORECASE)
    except re.error as exc:
        raise InvalidKwargs(
            f"{what} {pattern!r} is not a valid regular expression: {exc}"
        ) from None


# --- keywords -------------------------------------------------------------------------------


def _keywords_existence(keywords: list[str]) -> Check:
    """Every keyword is found, case-insensitively, as a regular expression anywhere (no word
    boundaries: "cat" is found in "category")."""
    patterns = [_regex(k, "keyword") for k in keywords]
    return lambda text: all(p.search(text) for p in patterns)


def _keywords_frequency(keyword: str, frequency: int, relation: str) -> Check:
    """Non-overlapping case-insensitive matches of the (stripped) keyword as a regular expression,
    substrings included, compared with `frequency` ("less than": <, "at least": >=)."""
    pattern = _regex(keyword.strip(), "keyword")
    return lambda text: _compare(len(pattern.findall(text)), relation, frequency)


def _forbidden_words(forbidden_words: list[str]) -> Check:
    """No forbidden word matches between word boundaries, case-insensitively."""
    patterns = [_regex(r"\b" + w + r"\b", "forbidden word") for w in sorted(set(forbidden_words))]
    return lambda text: not any(p.search(text) for p in patterns)


def _letter_frequency(letter: str, let_frequency: int, let_relation: str) -> Check:
    """Occurrences of the letter in the lower-cased response, compared with `let_frequency`."""
    target = letter.strip().lower()

    def check(text: str) -> bool:
        count = text.lower().count(target) if target else 0
        return _compare(count, let_relation, let_frequency)

    return check


# --- language and case ----------------------------------------------------------------------


def _response_language(language: str) -> Check:
    """langdetect's answer equals the code; a text it cannot judge (no features) is followed."""

    def check(text: str) -> bool:
        detected = detect_language(text)
        return detected is None or detected == language

    return check


def _english_capital() -> Check:
    """`str.isupper()` and detected as English (undetectable counts as English)."""
    return lambda text: text.isupper() and detect_language(text) in (None, "en")


def _english_lowercase() -> Check:
    """`str.islower()` and detected as English (undetectable counts as English)."""
    return lambda text: text.islower() and detect_language(text) in (None, "en")


def _capital_word_frequency(capital_frequency: int, capital_relation: str) -> Check:
    """nltk word tokens that are `isupper()` ("U.S." counts, "A-OK" is one token), compared."""

    def check(text: str) -> bool:
        count = sum(1 for token in word_tokenize(text) if token.isupper())
        return _compare(count, capital_relation, capital_frequency)

    return check


# --- length ---------------------------------------------------------------------------------


def _number_sentences(num_sentences: int, relation: str) -> Check:
    """Punkt sentences (English model: "Dr.", "U.S." and "3.5" do not end one), compared."""
    return lambda text: _compare(count_sentences(text), relation, num_sentences)


def _number_words(num_words: int, relation: str) -> Check:
    """Runs of word characters ("don't" is two words, "-" none), compared."""
    return lambda text: _compare(count_words(text), relation, num_words)


_STARS = re.compile(r"\s?\*\*\*\s?")


def _number_paragraphs(num_paragraphs: int) -> Check:
    """Split on `***` (with one optional whitespace character each side); empty first or last
    pieces are dropped, an empty piece in between fails; the count must be exact."""

    def check(text: str) -> bool:
        pieces = _STARS.split(text)
        count = len(pieces)
        for index, piece in enumerate(pieces):
            if not piece.strip():
                if index in (0, len(pieces) - 1):
                    count -= 1
                else:
                    return False
        return count == num_paragraphs

    return check


_PARAGRAPH_WORD_STOP = frozenset(".,?!'\"")


def _nth_paragraph_first_word(num_paragraphs: int, nth_paragraph: int, first_word: str) -> Check:
    """Paragraphs are split on "\\n\\n"; the count of non-blank ones must equal `num_paragraphs`,
    and the nth piece (counted among all pieces, blank ones included) must start with the word:
    its first whitespace-separated token, leading quotes removed, cut at the first . , ? ! ' "
    and lower-cased."""
    if nth_paragraph > num_paragraphs:
        raise InvalidKwargs(
            f"nth_paragraph {nth_paragraph} is beyond num_paragraphs {num_paragraphs}"
        )
    expected = first_word.lower()

    def check(text: str) -> bool:
        pieces = text.split("\n\n")
        count = sum(1 for piece in pieces if piece.strip())
        if nth_paragraph > count:
            return False
        paragraph = pieces[nth_paragraph - 1].strip()
        if not paragraph:
            return False
        token = paragraph.split()[0].strip().lstrip("'").lstrip('"')
        word = []
        for char in token:
            if char in _PARAGRAPH_WORD_STOP:
                break
            word.append(char.lower())
        return count == num_paragraphs and "".join(word) == expected

    return check


# --- detectable content and format ----------------------------------------------------------

_PLACEHOLDER = re.compile(r"\[.*?\]")


def _number_placeholders(num_placeholders: int) -> Check:
    """At least that many `[...]` spans (shortest, on one line; "[]" counts)."""
    return lambda text: len(_PLACEHOLDER.findall(text)) >= num_placeholders


def _postscript(postscript_marker: str) -> Check:
    """The lower-cased response contains the marker on some line (not necessarily at its start):
    "P.S." matches "p.s." or "p. s."; "P.P.S" matches "p.p.s" with optional single spaces after
    each dot; any other marker is used, lower-cased, as a regular expression."""
    marker = postscript_marker.strip()
    if marker == "P.P.S":
        prefix = r"\s*p\.\s?p\.\s?s"
    elif marker == "P.S.":
        prefix = r"\s*p\.\s?s\."
    else:
        prefix = r"\s*" + marker.lower()
    try:
        pattern = re.compile(prefix + r".*$", re.MULTILINE)
    except re.error as exc:
        raise InvalidKwargs(f"postscript_marker {marker!r} is not a valid pattern: {exc}") from None
    return lambda text: pattern.search(text.lower()) is not None


_STAR_BULLET = re.compile(r"^\s*\*[^\*].*$", re.MULTILINE)
_DASH_BULLET = re.compile(r"^\s*-.*$", re.MULTILINE)


def _number_bullet_lists(num_bullets: int) -> Check:
    """Lines starting (after whitespace) with "*" not followed by "*", plus lines starting with
    "-" (so "---" counts); exactly `num_bullets`."""
    return lambda text: (
        len(_STAR_BULLET.findall(text)) + len(_DASH_BULLET.findall(text)) == num_bullets
    )


def _constrained_response() -> Check:
    """One of "My answer is yes.", "... no.", "... maybe." appears anywhere (case-sensitive)."""
    return lambda text: any(option in text.strip() for option in CONSTRAINED_RESPONSE_OPTIONS)


_SINGLE_HIGHLIGHT = re.compile(r"\*[^\n\*]*\*")
_DOUBLE_HIGHLIGHT = re.compile(r"\*\*[^\n\*]*\*\*")


def _number_highlighted_sections(num_highlights: int) -> Check:
    """Non-blank `*text*` spans plus non-blank `**text**` spans (a bold span counts once, through
    the second pattern), at least `num_highlights`."""

    def check(text: str) -> bool:
        count = sum(1 for h in _SINGLE_HIGHLIGHT.findall(text) if h.strip("*").strip())
        count += sum(1 for h in _DOUBLE_HIGHLIGHT.findall(text) if h[2:-2].strip())
        return count >= num_highlights

    return check


def _multiple_sections(section_spliter: str, num_sections: int) -> Check:
    """Pieces of a split on "<spliter> <digits>" (case-sensitive, the spliter as a regular
    expression, optional single whitespace around) minus one, at least `num_sections`."""
    try:
        pattern = re.compile(r"\s?" + section_spliter.strip() + r"\s?\d+\s?")
    except re.error as exc:
        raise InvalidKwargs(f"section_spliter is not a valid pattern: {exc}") from None
    return lambda text: len(pattern.split(text)) - 1 >= num_sections


def _json_format() -> Check:
    """After stripping, one leading "```json" / "```Json" / "```JSON" / "```" fence and one
    trailing "```", the text parses with Python's `json.loads` (which accepts NaN and Infinity)."""

    def check(text: str) -> bool:
        body = text.strip()
        for fence in ("```json", "```Json", "```JSON", "```"):
            body = body.removeprefix(fence)
        body = body.removesuffix("```").strip()
        try:
            json.loads(body)
        except ValueError:
            return False
        except RecursionError:  # too deeply nested to parse: the reference would crash here
            return False
        return True

    return check


_TITLE = re.compile(r"<<[^\n]+>>")


def _title() -> Check:
    """Some `<<...>>` on one line with non-blank content."""
    return lambda text: any(t.lstrip("<").rstrip(">").strip() for t in _TITLE.findall(text))


# --- combination, start/end, punctuation ----------------------------------------------------


def _two_responses() -> Check:
    """Split on "******": blank pieces are allowed only first or last; exactly two non-blank
    pieces, different once stripped."""

    def check(text: str) -> bool:
        pieces = text.split("******")
        kept = []
        for index, piece in enumerate(pieces):
            if piece.strip():
                kept.append(piece)
            elif index not in (0, len(pieces) - 1):
                return False
        return len(kept) == 2 and kept[0].strip() != kept[1].strip()

    return check


def _repeat_prompt(prompt_to_repeat: str) -> Check:
    """The stripped, lower-cased response starts with the stripped, lower-cased prompt."""
    prefix = prompt_to_repeat.strip().lower()
    return lambda text: text.strip().lower().startswith(prefix)


def _end_checker(end_phrase: str) -> Check:
    """The response, stripped of whitespace and then of double quotes and lower-cased, ends with
    the stripped, lower-cased phrase."""
    suffix = end_phrase.strip().lower()
    return lambda text: text.strip().strip('"').lower().endswith(suffix)


def _quotation() -> Check:
    """The stripped response is longer than one character and starts and ends with '"'."""

    def check(text: str) -> bool:
        body = text.strip()
        return len(body) > 1 and body[0] == '"' and body[-1] == '"'

    return check


def _no_comma() -> Check:
    """No ASCII comma anywhere (other commas, such as "，", are allowed)."""
    return lambda text: "," not in text


def _entry(
    instruction_id: str, build: Callable[..., Check], kwargs: Mapping[str, Kind] | None = None
) -> tuple[str, Instruction]:
    doc = (build.__doc__ or "").strip()
    return instruction_id, Instruction(instruction_id, dict(kwargs or {}), build, doc)


INSTRUCTIONS: Mapping[str, Instruction] = dict(
    [
        _entry("keywords:existence", _keywords_existence, {"keywords": "words"}),
        _entry(
            "keywords:frequency",
            _keywords_frequency,
            {"keyword": "text", "frequency": "count", "relation": "relation"},
        ),
        _entry("keywords:forbidden_words", _forbidden_words, {"forbidden_words": "words"}),
        _entry(
            "keywords:letter_frequency",
            _letter_frequency,
            {"letter": "letter", "let_frequency": "count", "let_relation": "relation"},
        ),
        _entry("language:response_language", _response_language, {"language": "language"}),
        _entry(
            "length_constraints:number_sentences",
            _number_sentences,
            {"num_sentences": "count", "relation": "relation"},
        ),
        _entry(
            "length_constraints:number_paragraphs", _number_paragraphs, {"num_paragraphs": "count"}
        ),
        _entry(
            "length_constraints:number_words",
            _number_words,
            {"num_words": "count", "relation": "relation"},
        ),
        _entry(
            "length_constraints:nth_paragraph_first_word",
            _nth_paragraph_first_word,
            {"num_paragraphs": "count", "nth_paragraph": "count", "first_word": "text"},
        ),
        _entry(
            "detectable_content:number_placeholders",
            _number_placeholders,
            {"num_placeholders": "count"},
        ),
        _entry("detectable_content:postscript", _postscript, {"postscript_marker": "text"}),
        _entry(
            "detectable_format:number_bullet_lists", _number_bullet_lists, {"num_bullets": "count"}
        ),
        _entry("detectable_format:constrained_response", _constrained_response),
        _entry(
            "detectable_format:number_highlighted_sections",
            _number_highlighted_sections,
            {"num_highlights": "count"},
        ),
        _entry(
            "detectable_format:multiple_sections",
            _multiple_sections,
            {"section_spliter": "text", "num_sections": "count"},
        ),
        _entry("detectable_format:json_format", _json_format),
        _entry("detectable_format:title", _title),
        _entry("combination:two_responses", _two_responses),
        _entry("combination:repeat_prompt", _repeat_prompt, {"prompt_to_repeat": "text"}),
        _entry("startend:end_checker", _end_checker, {"end_phrase": "text"}),
        _entry("startend:quotation", _quotation),
        _entry(
            "change_case:capital_word_frequency",
            _capital_word_frequency,
            {"capital_frequency": "count", "capital_relation": "relation"},
        ),
        _entry("change_case:english_capital", _english_capital),
        _entry("change_case:english_lowercase", _english_lowercase),
        _entry("punctuation:no_comma", _no_comma),
    ]
)


def _validate(name: str, kind: Kind, value: Any) -> Any:
    if kind == "count":
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InvalidKwargs(f"{name} must be a non-negative integer, got {value!r}")
        if name == "nth_paragraph" and value == 0:
            raise InvalidKwargs("nth_paragraph counts from 1, got 0")
        return value
    if kind == "relation":
        if value not in RELATIONS:
            raise InvalidKwargs(f"{name} must be one of {list(RELATIONS)}, got {value!r}")
        return value
    if kind == "text":
        if not isinstance(value, str) or not value.strip():
            raise InvalidKwargs(f"{name} must be a non-empty string, got {value!r}")
        return value
    if kind == "words":
        if (
            not isinstance(value, list)
            or not value
            or not all(isinstance(w, str) and w for w in value)
        ):
            raise InvalidKwargs(f"{name} must be a non-empty list of non-empty strings")
        return value
    if kind == "letter":
        if not isinstance(value, str) or len(value) != 1:
            raise InvalidKwargs(f"{name} must be a single character, got {value!r}")
        return value
    if value not in LANGUAGE_CODES:
        raise InvalidKwargs(
            f"{name} {value!r} is not one of the reference's codes {sorted(LANGUAGE_CODES)}"
        )
    return value


def build_check(instruction_id: str, kwargs: Mapping[str, Any]) -> Check:
    """The check for one instruction with its kwargs; `InvalidKwargs` names what is wrong."""
    instruction = INSTRUCTIONS.get(instruction_id)
    if instruction is None:
        raise InvalidKwargs(f"unknown instruction id {instruction_id!r}")
    given = {k: v for k, v in kwargs.items() if v is not None}
    unknown = sorted(set(given) - set(instruction.kwargs))
    if unknown:
        raise InvalidKwargs(f"{instruction_id}: unknown kwargs {unknown}")
    missing = sorted(set(instruction.kwargs) - set(given))
    if missing:
        raise InvalidKwargs(f"{instruction_id}: missing kwargs {missing}")
    values = {name: _validate(name, kind, given[name]) for name, kind in instruction.kwargs.items()}
    try:
        return instruction.build(**values)
    except InvalidKwargs as exc:
        raise InvalidKwargs(f"{instruction_id}: {exc}") from None
