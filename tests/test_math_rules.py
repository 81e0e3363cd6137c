r"""The careful grader's rules, by property and by example.

The property: for random integers and decimal fractions, every way people write the number
(thousands separators, scientific notation, a percentage, `x = v`) is judged equal to the plain
gold under the default spec, and the same form with its last significant digit moved by one is
judged different (math-verify alone passes some of those: it rounds to six places, and its floats
miss long scientific mantissas). Then the conservative edges, the several-boxes extraction, and
prorl-v1's parameters, which must not name the careful grader at all.
"""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from reward_specs import default_registry, load_specs
from reward_specs.extract import final_boxes, final_sentence
from reward_specs.math import MathConfig, equivalent, math_answer_key
from reward_specs.math.rules import gold_facts, normalise, precision_differs, question_units
from tests.cases import CAREFUL, EVALUATION, PLAIN

SPECS = load_specs(default_registry())
CONFIG = SPECS[CAREFUL].config("math")
assert isinstance(CONFIG, MathConfig)

SEPARATORS = [",", r"\,", r"\ ", "{,}", " ", "~"]


def grouped(digits: str, separator: str) -> str:
    head = len(digits) % 3 or 3
    groups = [digits[:head]] + [digits[i : i + 3] for i in range(head, len(digits), 3)]
    return separator.join(groups)


def plain(value: Decimal) -> str:
    return format(value, "f")


def written_forms(value: Decimal) -> list[str]:
    """`value` as people write it; each form's digits are exactly `value`'s."""
    text = plain(value)
    sign = "-" if text.startswith("-") else ""
    whole, _, fraction = text.lstrip("-").partition(".")
    forms = [text, f"x = {text}"]
    if len(whole) > 3:
        tail = "." + fraction if fraction else ""
        forms += [sign + grouped(whole, sep) + tail for sep in SEPARATORS]
    digits = (whole + fraction).lstrip("0")
    if digits and len(digits) > 1:
        exponent = value.adjusted()
        mantissa = f"{sign}{digits[0]}.{digits[1:]}"
        forms += [
            f"{mantissa}e{exponent}",
            f"{mantissa}E{exponent}",
            f"{mantissa} \\times 10^{{{exponent}}}",
        ]
    if fraction and not sign:
        forms.append(plain(value * 100) + r"\%")
    return forms


def last_digit(value: Decimal) -> Decimal:
    """One unit in the last written digit of `value`."""
    return Decimal(1).scaleb(value.as_tuple().exponent)  # type: ignore[arg-type]


integers = st.integers(min_value=-(10**12), max_value=10**12).map(Decimal)
fractions = st.builds(
    lambda m, k: Decimal(m).scaleb(-k),
    st.integers(min_value=1, max_value=10**9),
    st.integers(min_value=1, max_value=9),
)
"""A decimal fraction m / 10^k: finite, exactly written, up to 9 places (beyond math-verify's 6)."""


def strip_trailing_zeros(value: Decimal) -> Decimal:
    if value == value.to_integral_value():
        return value.quantize(Decimal(1))
    return value.normalize()


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(integers, fractions).map(strip_trailing_zeros), st.sampled_from([1, -1]))
@example(Decimal("123456789012"), 1)
@example(Decimal("0.1234567"), 1)
@example(Decimal("0.00012345"), -1)
@example(Decimal("12345.678"), 1)
def test_written_forms_equal_the_gold_and_a_last_digit_off_differs(
    value: Decimal, direction: int
) -> None:
    gold = plain(value)
    for form in written_forms(value):
        assert equivalent(gold, form, CONFIG)[0], (gold, form)
    moved = value + direction * last_digit(value)
    if moved.is_zero() or (moved < 0) != (value < 0):
        return  # the sign would change: a different test
    for form in written_forms(moved):
        assert not equivalent(gold, form, CONFIG)[0], (gold, form)


# ---------------------------------------------------------------- conservative edges


@pytest.mark.parametrize(
    ("gold", "answer", "rewritten", "rules"),
    [
        ("12345", r"12\,345", "12345", ("thousands_sep",)),
        ("15", "1,5", "1,5", ()),  # not groups of three: stays a list
        ("1,500", r"1\,500", "1500", ("thousands_sep",)),  # a gold with a separator is a number
        ("1, 500", r"1\,500", r"1\,500", ()),  # a list gold: no separator reading
        ("1.5", "1,500", "1500", ("thousands_sep",)),  # three digits: never a decimal comma
        ("1.22", "1,22", "1.22", ("decimal_comma",)),
        ("1", "1,22", "1,22", ()),  # a decimal comma only against a decimal gold
        ("2500", "2.5e3", "2500", ("scientific",)),
        ("2e", "2e3", "2e3", ()),  # a symbolic gold: e stays Euler's number
        (r"\frac{1}{6}", r"0.1\overline{6}", r"\frac{1}{6}", ("repeating_decimal",)),
        ("45", r"\frac{\pi}{4}", r"\frac{\pi}{4}", ()),  # no unit named
        (
            r"45^\circ",
            r"\frac{\pi}{4}",
            r"\frac{180}{\pi} \cdot \left(\frac{\pi}{4}\right)",
            ("angle_unit",),
        ),
    ],
)
def test_normalise(gold: str, answer: str, rewritten: str, rules: tuple[str, ...]) -> None:
    assert normalise(answer, gold_facts(gold)) == (rewritten, rules)


@pytest.mark.parametrize(
    ("question", "units"),
    [
        ("Find the angle in degrees.", "degrees"),
        ("Give x in radians.", "radians"),
        ("Convert 30 degrees to radians.", None),
        ("How many apples?", None),
        (None, None),
    ],
)
def test_question_units(question: str | None, units: str | None) -> None:
    assert question_units(question) == units


@pytest.mark.parametrize(
    ("gold", "answer", "differs"),
    [
        ("1.0000001", "1.0000002", True),
        ("0.333333", "0.3333333", False),  # more precise, rounds to the gold
        ("0.5", "0.5000001", False),  # rounds to the gold's one place: the old verdict
        (r"\frac{1}{3}", "0.333333", False),  # an exact gold is not a decimal literal
        ("50", r"50\%", False),  # math-verify's reading of a percent for the number stands
        ("0.1234567", r"12.34568\%", True),
        ("0.1234567", "x = 0.1234568", True),
    ],
)
def test_precision_differs(gold: str, answer: str, differs: bool) -> None:
    assert precision_differs(gold_facts(gold), answer) is differs


def test_details_name_the_rule_and_math_verify_verdict() -> None:
    ok, details = equivalent("0.1234567", "0.1234568", CONFIG)
    assert (ok, details["rules"], details["math_verify"]) == (False, ["gold_precision"], True)
    ok, details = equivalent("12345", r"12\,345", CONFIG)
    assert (ok, details["rules"], details["math_verify"]) == (True, ["thousands_sep"], False)
    ok, details = equivalent("12345", "12,345", CONFIG)  # math-verify reads it already
    assert ok and "rules" not in details


# ---------------------------------------------------------------- extraction


@pytest.mark.parametrize(
    ("text", "boxes"),
    [
        (r"\boxed{1}", ["1"]),
        (r"$\boxed{(2, 2)} \text{ and } \boxed{(6, 2)}$.", ["(2, 2)", "(6, 2)"]),
        (r"\boxed{1}, \boxed{2} or \boxed{3}", ["1", "2", "3"]),
        (r"\boxed{1} \quad \boxed{2}", ["1", "2"]),
        ("\\boxed{1}\n\\boxed{2}", ["1", "2"]),
        ("\\boxed{1}\n\n\\boxed{2}", ["2"]),  # another paragraph
        (r"\boxed{1} then \boxed{2}", ["2"]),  # prose between
        (r"\boxed{\boxed{1}}", ["1"]),  # nested: the inner box, as last_boxed reads it
        (r"\boxed{1} and \boxed{2", ["1"]),  # an unclosed last box
        ("no box", []),
    ],
)
def test_final_boxes(text: str, boxes: list[str]) -> None:
    assert final_boxes(text) == boxes


def test_final_boxes_is_linear_in_a_hostile_response() -> None:
    text = r"\boxed{1} and " * 20000 + r"\boxed{" * 20000
    assert len(final_boxes(text)) == 20000


@pytest.mark.parametrize(
    ("text", "sentence"),
    [
        ("First. Therefore $x = 3.5$ is it.", "Therefore $x = 3.5$ is it"),
        ("One line\nThe largest n is 34.", "The largest n is 34"),
        ("Done!  ", "Done"),
    ],
)
def test_final_sentence(text: str, sentence: str) -> None:
    assert final_sentence(text) == sentence


# ---------------------------------------------------------------- prorl-v1 is as it was


def test_prorl_v1_parameters_do_not_name_the_careful_grader() -> None:
    """Its parameters, and so its hash, are those it had before the careful grader existed."""
    text = json.dumps(SPECS[PLAIN].parameters())
    assert "careful" not in text and "prose_answer" not in text
    careful = SPECS[CAREFUL].parameters()["domains"]
    assert careful["math"]["careful"] and careful["stem"]["careful"]
    assert careful["stem"]["symbolic"]["careful"]
    assert SPECS[CAREFUL].hash != SPECS[PLAIN].hash


def test_answer_keys_cover_what_the_careful_and_prose_readings_read() -> None:
    """Two responses whose judgements may differ never share an answer key."""
    careful, prose = CONFIG, SPECS[EVALUATION].config("math")
    assert isinstance(prose, MathConfig)
    plain = SPECS[PLAIN].config("math")
    assert isinstance(plain, MathConfig)
    several, last = r"So $\boxed{2}$ and $\boxed{3}$.", r"So $\boxed{3}$."
    assert math_answer_key(several, plain) == math_answer_key(last, plain)
    assert math_answer_key(several, careful) != math_answer_key(last, careful)
    five, six = "Therefore $x = 5$ is it.", "Therefore $x = 6$ is it."
    assert math_answer_key(five, careful) == math_answer_key(six, careful)  # both unparsed
    assert math_answer_key(five, prose) != math_answer_key(six, prose)
