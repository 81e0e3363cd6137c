"""Finding the final answer: the last complete `\\boxed{}` and the "answer is" fallbacks."""

from __future__ import annotations

import re
from typing import get_args

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from reasoning_gym.utils import extract_answer as reasoning_gym_answer

from reward_specs.extract import (
    _ANSWER_IS,
    _SENTENCE_END,
    BoxedFallback,
    Fallback,
    answer_is,
    answer_line,
    extract_answer,
    hashes_answer,
    last_boxed,
)
from reward_specs.puzzles.answers import extract_answer as extract_puzzle_answer


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (r"\boxed{42}", "42"),
        (r"so $\boxed{ 42 }$.", "42"),  # surrounding spaces are stripped
        (r"\boxed{\frac{1}{2}}", r"\frac{1}{2}"),  # nested braces
        (r"\boxed{\frac{\sqrt{2}}{2}}", r"\frac{\sqrt{2}}{2}"),  # two levels
        (r"\boxed{\{1,2\}}", r"\{1,2\}"),  # escaped braces do not count
        (r"\boxed{\left\{ x \right\}}", r"\left\{ x \right\}"),
        (r"\boxed{1} then \boxed{2}", "2"),  # the last wins
        (r"\boxed{1} then \boxed{2", "1"),  # an unclosed last box is skipped
        (r"\boxed{2} and \boxed{\frac{1}{2}", "2"),  # unclosed with nested braces
        (r"\fbox{7}", "7"),
        (r"\boxed 7", "7"),  # brace-less
        (r"$\boxed 7$", "7"),  # brace-less, stops at the dollar
        (r"\boxed {7}", "7"),  # space before the brace
        ("no box at all", None),
        (r"\boxed{", None),
        ("", None),
    ],
)
def test_last_boxed(text: str, expected: str | None) -> None:
    assert last_boxed(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The answer is 42.", "42"),
        ("the answer is 42", "42"),
        ("THE ANSWER IS 42", "42"),
        ("Final answer: 7", "7"),
        ("Final Answer: $x = 3$", "x = 3"),
        ("Answer: -3", "-3"),
        ("answer = 5", "5"),
        ("So the final answer is $\\frac{1}{2}$.", "\\frac{1}{2}"),
        ("The answer is 3.5.", "3.5"),  # a decimal point is not a sentence end
        ("The answer is 12. Let me check: 3*4 = 12.", "12"),  # the sentence ends at '. '
        ("I thought the answer is 6, but the answer is 8.", "8"),  # last anchor on a line
        ("The answer is 1.\nLater: the answer is 2.", "2"),  # last anchor in the text
        ("Final answer:\n\n9", "9"),  # the answer on the next line
        ("The answer is", None),
        ("The answer is ...", None),
        ("No anchor here: 42", None),
    ],
)
def test_answer_is(text: str, expected: str | None) -> None:
    assert answer_is(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("She pays 3 * 24 = 72 dollars.\n#### 72", "72"),  # GSM8K's own solutions end so
        ("#### 1,234", "1234"),  # commas removed, as verl does
        ("#### -7.5", "-7.5"),
        ("#### 5 then, correcting myself, #### 6", "6"),  # the last one counts
        ("#### 72.", "72"),  # a sentence's dot is not the number's
        ("####72", "72"),  # verl wants one space; the number is the same without it
        ("#### $18", "18"),
        ("#### 5\n#### none", "5"),  # the last `####` with a number after it, as verl's findall
        ("#### x", None),
        ("The answer is 72", None),  # not this format: the spec's extraction reads it
    ],
)
def test_hashes_answer(text: str, expected: str | None) -> None:
    assert hashes_answer(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("so 5 + 7 = 12.\nAnswer: 12", "12"),  # DAPO's prompt asks for `Answer: $Answer`
        ("answer: 12", "12"),  # any case, as verl's `(?i)`
        ("Answer: $\\frac{1}{2}$", "\\frac{1}{2}"),
        ("Answer: \\boxed{7}.", "7"),  # a box on the line is the answer
        ("Answer:\n\n 3.14", "3.14"),  # on a later line, as verl's `\\s*` reads it
        ("Answer: 5\nWait. Answer: 6", "6"),  # the last line counts
        ("Final Answer: The final answer is $5$. I hope it is correct.", "5"),  # Minerva's
        ("The answer is 4", None),  # no `Answer:`: the spec's extraction reads it
    ],
)
def test_answer_line(text: str, expected: str | None) -> None:
    assert answer_line(text) == expected


@settings(max_examples=300)
@given(st.text(alphabet="#Answer: 0123456789,.$\n\\{}boxed", max_size=200))
def test_native_formats_never_raise(text: str) -> None:
    for read in (hashes_answer, answer_line):
        answer = read(text)
        assert answer is None or (answer and answer.strip() == answer)


def test_native_formats_read_long_runs_in_one_pass() -> None:
    assert hashes_answer("#### " * 100_000 + "#### 3") == "3"
    assert answer_line("Answer:" + "\n" * 200_000) is None
    assert answer_line("Answer: " * 50_000 + "9") == "9"


def test_extract_answer_prefers_the_box() -> None:
    text = "The answer is 5.\n\nActually $\\boxed{6}$."
    assert extract_answer(text, ("answer_is",)) == ("6", "boxed")
    assert extract_answer("The answer is 5.", ("answer_is",)) == ("5", "answer_is")
    assert extract_answer("The answer is 5.", ()) == (None, "none")
    assert extract_answer("nothing", ("answer_is",)) == (None, "none")


def test_an_empty_box_is_no_answer() -> None:
    assert extract_answer(r"\boxed{}", ()) == (None, "none")
    assert extract_answer(r"\boxed{ } The answer is 4", ("answer_is",)) == ("4", "answer_is")


box_free = st.text(
    alphabet=st.characters(exclude_characters="{}\\", exclude_categories=["Cs"]), max_size=40
)


@settings(max_examples=300)
@given(st.text(max_size=300))
def test_extract_never_raises(text: str) -> None:
    answer, source = extract_answer(text, ("answer_is",))
    assert source in ("boxed", "answer_is", "none")
    assert (answer is None) == (source == "none")
    if answer is not None:
        assert answer.strip() == answer and answer


@settings(max_examples=300)
@given(box_free, box_free, box_free)
def test_last_box_content_is_recovered(before: str, content: str, after: str) -> None:
    text = before + "\\boxed{" + content + "}" + after
    assert last_boxed(text) == content.strip()
    nested = before + "\\boxed{\\frac{" + content + "}{2}}" + after
    assert last_boxed(nested) == "\\frac{" + content + "}{2}"


def _naive_last_boxed(text: str) -> str | None:
    """The obvious quadratic reading of "the last complete box", to check the linear one against."""
    for match in reversed(list(re.finditer(r"\\(?:boxed|fbox)\s*", text))):
        end = match.end()
        if end < len(text) and text[end] == "{":
            depth, i = 0, end
            while i < len(text):
                if text[i] == "\\":
                    i += 2
                    continue
                depth += {"{": 1, "}": -1}.get(text[i], 0)
                if depth == 0:
                    return text[end + 1 : i].strip()
                i += 1
        elif end < len(text) and match.group(0).endswith(" "):
            token = re.match(r"[^\s$]+", text[end:])
            if token:
                return token.group(0).strip()
    return None


tokens = st.lists(
    st.sampled_from(["\\boxed", "\\fbox", "{", "}", "\\{", "\\}", "\\", "x", "1", " ", "$"]),
    max_size=40,
)


@settings(max_examples=1000)
@given(tokens)
def test_last_boxed_matches_the_naive_reading(parts: list[str]) -> None:
    text = "".join(parts)
    assert last_boxed(text) == _naive_last_boxed(text)


def test_many_unclosed_boxes_after_the_answer() -> None:
    """A response ending in thousands of open boxes still yields the earlier complete one."""
    text = "so \\boxed{1}. " + "\\boxed{" * 50_000
    assert last_boxed(text) == "1"
    assert last_boxed("\\boxed{" * 50_000) is None


puzzle_tokens = st.lists(
    st.sampled_from(["<answer>", "</answer>", " ", "\n", "x", "<answer> ", "<ans", "wer>", "7"]),
    max_size=14,
)


@settings(max_examples=2000)
@given(puzzle_tokens)
def test_puzzle_answer_is_reasoning_gyms(parts: list[str]) -> None:
    # Our extractor finds the tags without the regex (which is quadratic in unclosed tags); the
    # answer must be the one Reasoning Gym's own `extract_answer` reads, empty meaning none.
    text = "".join(parts)
    expected = reasoning_gym_answer(text)
    answer, source = extract_puzzle_answer(text)
    assert answer == (expected or None)
    assert source == ("tag" if expected is not None else "none")


def test_a_flood_of_unclosed_tags_is_read_in_one_pass() -> None:
    # 256 KB of opening tags: the regex would retry each one against the rest of the text
    # (minutes); the service computes this key in its own process, so it must not.
    flood = "<answer>" * 32_768
    assert extract_puzzle_answer(flood) == (None, "none")
    assert extract_puzzle_answer(flood + "</answer>") == ("<answer>" * 32_767, "tag")


def _answer_is_by_regex(text: str) -> str | None:
    """`answer_is` as first written, with the trimming regexes (quadratic on long runs)."""
    matches = list(_ANSWER_IS.finditer(text))
    if not matches:
        return None
    answer = text[matches[-1].end() :].split("\n", 1)[0]
    answer = _SENTENCE_END.split(answer, maxsplit=1)[0].strip()
    answer = re.sub(r"[.\s]+$", "", answer)
    answer = re.sub(r"^\$+|\$+$", "", answer).strip()
    return answer or None


answer_is_tokens = st.lists(
    st.sampled_from(
        ["the answer is ", "Answer: ", ".", ". ", " ", "\t", "\u00a0", "$", "x", "7", "\n", "\r"]
    ),
    max_size=16,
)


@settings(max_examples=2000)
@given(answer_is_tokens)
def test_answer_is_trims_as_the_regexes_did(parts: list[str]) -> None:
    text = "".join(parts)
    assert answer_is(text) == _answer_is_by_regex(text)


def test_answer_is_reads_long_runs_in_one_pass() -> None:
    assert answer_is("the answer is 7" + " \t" * 100_000 + "x") == "7" + " \t" * 100_000 + "x"
    assert answer_is("the answer is " + "$" * 200_000 + "x") == "x"


def test_many_brace_less_boxes_without_a_token_are_read_in_one_pass() -> None:
    # Each `\boxed ` followed by `$` has no token; checking one must not copy the rest of the text.
    assert last_boxed("\\boxed 7 " + "\\boxed $" * 40_000) == "7"


def test_every_domain_s_fallbacks_come_from_one_vocabulary() -> None:
    """Math and STEM take a subset of the fallbacks puzzles take, each with the same meaning."""
    assert set(get_args(BoxedFallback)) <= set(get_args(Fallback))
    text = "The answer is 7."
    assert extract_answer(text, ("answer_is",)) == extract_puzzle_answer(
        text, "answer", ("answer_is",)
    )
