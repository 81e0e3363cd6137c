"""What the judge domain does to text: special tokens stripped from a response, verdict markers
escaped in what is templated, and the judge's verdict read from its reply.

One normalisation (`fold`: zero-width and other format characters removed, NFKC, case-folded,
whitespace runs collapsed to one space) serves both the escaper and the parser, so that a marker
the parser would read is exactly a marker the escaper breaks: a marker in full-width letters, or
one split by zero-width spaces, is the same marker to both.

Every function here is linear in its text (a bounded number of passes; the escaper's passes are
bounded by the number of markers found, each of which makes the text one character longer).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping

__all__ = ["escape_markers", "fold", "marker_key", "read_verdict", "strip_special_tokens"]


def _folded(text: str) -> tuple[str, list[int]]:
    """`fold(text)`, and for each of its characters the index of the character of `text` it
    comes from (NFKC is applied per character, so every output character has one source)."""
    out: list[str] = []
    source: list[int] = []
    space = False
    for i, ch in enumerate(text):
        if unicodedata.category(ch) == "Cf":  # zero-width spaces and joiners, BOM, bidi marks
            continue
        for c in unicodedata.normalize("NFKC", ch).casefold():
            if c.isspace():
                if space:
                    continue
                c, space = " ", True
            else:
                space = False
            out.append(c)
            source.append(i)
    return "".join(out), source


def fold(text: str) -> str:
    """Zero-width (Unicode format) characters removed, NFKC, case-folded, whitespace collapsed."""
    return _folded(text)[0]


_DECORATION = " \t*_`#>"
"""What may surround a verdict on its line: markdown emphasis, a heading's or a quote's mark."""


def marker_key(marker: str) -> str:
    """A marker as the escaper looks for it and the parser compares it: folded, its decoration
    stripped."""
    return fold(marker).strip(_DECORATION)


def _folded_markers(markers: Iterable[str]) -> list[str]:
    return sorted({k for m in markers if (k := marker_key(m))}, key=len, reverse=True)


def escape_markers(text: str, markers: Iterable[str]) -> str:
    """`text` with every occurrence of a marker, as `fold` sees it, broken by a space after its
    first character (the characters the marker was made of written in their folded form), so
    that no folded marker is left in it. Text without markers comes back unchanged."""
    folded_markers = _folded_markers(markers)
    if not folded_markers:
        return text
    for _ in range(len(text) + 1):  # each pass breaks one marker; a text has fewer than this
        folded, source = _folded(text)
        found = min(
            ((at, m) for m in folded_markers if (at := folded.find(m)) != -1),
            default=None,
        )
        if found is None:
            return text
        at, marker = found
        end = at + len(marker)
        first, last = source[at], source[end - 1]
        # The folded characters of the source characters the match spans, whole.
        lo = at
        while lo > 0 and source[lo - 1] == first:
            lo -= 1
        hi = end
        while hi < len(source) and source[hi] == last:
            hi += 1
        gap = "_" if marker[1:2].isspace() else " "  # a space beside a space would collapse
        text = text[:first] + folded[lo : at + 1] + gap + folded[at + 1 : hi] + text[last + 1 :]
    raise AssertionError("unreachable: every pass breaks one marker")


_GENERIC_TOKENS = re.compile(
    r"<[|｜][^<>\n]{0,64}?[|｜]>"  # <|im_start|>, <|eot_id|>, DeepSeek's <｜Assistant｜>
    r"|</?s>|\[/?INST\]|<</?SYS>>"  # Llama 2's and Mistral's
    r"|</?(?:start_of_turn|end_of_turn|bos|eos|pad|unk)>",  # Gemma's
    re.IGNORECASE,
)


def strip_special_tokens(text: str, tokens: Iterable[str] = ()) -> str:
    """`text` with format characters removed, then the model's special-token strings (`tokens`,
    from its tokenizer) and the generic forms (`<|...|>`, `<s>`, `</s>`, `[INST]`, ...) removed
    until none is left (removing one must not join the halves of another)."""
    literal = sorted({t for t in tokens if t}, key=len, reverse=True)
    pattern = (
        re.compile("|".join([*map(re.escape, literal), _GENERIC_TOKENS.pattern]), re.IGNORECASE)
        if literal
        else _GENERIC_TOKENS
    )
    text = "".join(ch for ch in text if unicodedata.category(ch) != "Cf")
    while True:
        stripped = pattern.sub("", text)
        if stripped == text:
            return text
        text = stripped


def read_verdict(reply: str, verdicts: Mapping[str, float]) -> tuple[str, float] | None:
    """The last line of `reply` that is, folded and stripped of markdown decoration, exactly one
    of the folded `verdicts` markers: (the marker as configured, its score); None without one.
    A marker inside a longer line does not count, nor does any but the last."""
    folded = {marker_key(marker): marker for marker in verdicts}
    for line in reversed(reply.splitlines()):
        marker = folded.get(fold(line).strip(_DECORATION))
        if marker is not None:
            return marker, verdicts[marker]
    return None
