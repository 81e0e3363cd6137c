"""STEM: multiple choice by letter, or a free-form numeric/symbolic answer within a tolerance.

Multiple choice (`reference.choices` given). The chosen letter is read, in order of precedence, from
the last `\\boxed{}`, the last "Answer: C" / "the answer is (C)", the last parenthesised letter
"(C)", and the last "option C" / "choice C". Where one of those places holds the text of a choice
instead of a letter, that choice is taken. Only letters of the offered choices count. The gold
may be a letter, a 0-based index, or the text of the correct choice.

With `careful` on, the choice is read by `reward_specs/stem/choice_letters.py` instead: the explicit
answer statement wins over later mentions of other letters, standalone letters count in either
case, and a final statement naming two different letters is not parsed.

Free form (no `choices`). The final answer (last `\\boxed{}`, then the fallbacks) is read as a
number where it is one (`3.2e-5`, `3.2 \\times 10^{-5}`, `1/8`, thousands separators, a trailing
unit) and compared with `rel_tol` (the reference's, else the spec's); otherwise it is compared
symbolically with math-verify, as the math domain does. With `units` on, a gold that carries a
unit is compared unit-aware (`reward_specs/stem/units.py`).
"""

from __future__ import annotations

import math
import re
import string
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import ConfigDict, Field, field_validator, model_validator

from reward_specs import faults, scorer
from reward_specs.caches import Cache
from reward_specs.extract import BoxedFallback, answer_is, extract_answer, last_boxed
from reward_specs.judge.domain import JudgeStage
from reward_specs.judge.stage import confirmed, judge_alone
from reward_specs.lazy import lazy_import
from reward_specs.math.domain import MathConfig, equivalent, reference_parses
from reward_specs.math.rules import Rule, gold_facts, normalise
from reward_specs.math.verifier import boxed_latex, math_verify_errors, math_verify_utils, parse
from reward_specs.stem import choice_letters
from reward_specs.stem.choice_letters import choice_text_in, norm
from reward_specs.stem.numbers import parse_number
from reward_specs.stem.units import compare_with_units

if TYPE_CHECKING:
    import sympy
else:  # imported at first use (reward_specs.lazy)
    sympy = lazy_import("sympy")

__all__ = ["SCORER", "StemConfig", "StemReference", "parse_number"]

LETTERS = string.ascii_uppercase


class StemConfig(scorer.DomainConfig):
    rel_tol: float = Field(1e-2, ge=0.0, le=1.0)
    """Relative tolerance for free-form numeric answers when the reference gives none."""
    abs_tol: float = Field(0.0, ge=0.0)
    """Absolute tolerance, for golds at or near zero."""
    fallbacks: tuple[BoxedFallback, ...] = ("answer_is",)
    symbolic: MathConfig = MathConfig()
    """How non-numeric free-form answers are checked (math-verify)."""
    careful: bool = False
    """Multiple choice read as a careful grader does (`reward_specs/stem/choice_letters.py`), and
    free-form numbers normalised by the math domain's rules (`12\\,345`, `1e6`) before reading."""
    units: bool = False
    """Where the gold carries a unit, the answer's unit converted to it (pint) and the dimension
    required to match (`reward_specs/stem/units.py`); a unitless gold is compared as before."""

    judge: JudgeStage | None = None
    """A judge stage (`reward_specs.judge.domain.JudgeStage`), as the math domain's: free-form
    items whose reference neither a number nor math-verify reads judged by a model, or a rule's
    yes confirmed by one. None: the rules alone. (`symbolic.judge` is refused: STEM's own
    stage is this one.)"""

    added_later: ClassVar[frozenset[str]] = frozenset({"careful", "units", "judge"})

    @model_validator(mode="after")
    def _one_stage(self) -> StemConfig:
        if self.symbolic.judge is not None:
            raise ValueError("set stem's judge stage as `judge`, not `symbolic.judge`")
        return self


class StemReference(scorer.ReferenceModel):
    model_config = ConfigDict(extra="allow", frozen=True, coerce_numbers_to_str=True)

    answer: str = Field(..., min_length=1)
    choices: list[str] | None = Field(None, min_length=2, max_length=26)
    rel_tol: float | None = Field(None, ge=0.0, le=1.0)

    @field_validator("choices")
    @classmethod
    def _choices_distinct(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and len({norm(c) for c in value}) != len(value):
            raise ValueError("choices must be distinct")
        return value


# ---------------------------------------------------------------- multiple choice


def _gold_index(reference: StemReference) -> int:
    choices = reference.choices or []
    gold = reference.answer.strip()
    letter = re.fullmatch(r"\(?([A-Za-z])\)?", gold)
    if letter and LETTERS.index(letter.group(1).upper()) < len(choices):
        return LETTERS.index(letter.group(1).upper())
    if gold.isdigit() and int(gold) < len(choices):
        return int(gold)
    for i, choice in enumerate(choices):
        if norm(choice) == norm(gold):
            return i
    raise scorer.InvalidReference(
        f"the gold answer {gold[:100]!r} is neither a choice's letter nor its text"
    )


def _letter_in(text: str, n: int) -> int | None:
    """A choice letter standing alone at the start of `text` ("C", "(C)", "C.", "C) foo")."""
    m = re.match(r"^\s*\\?(?:text\{)?\(?([A-Z])\)?(?:\}|[.:)\s]|$)", text)
    if m and LETTERS.index(m.group(1)) < n:
        return LETTERS.index(m.group(1))
    return None


_ANSWER_LETTER = re.compile(
    r"(?:answer|choice|option)\s*(?:\*\*)?\s*(?:is|:)?\s*:?\s*(?:\*\*)?\s*\(?([A-Z])\)?(?![A-Za-z])",
    re.IGNORECASE,
)


def _pick_choice(text: str, choices: list[str]) -> tuple[int | None, str]:
    n = len(choices)
    boxed = last_boxed(text)
    # A choice's whole text is read before a letter: "A decrease in pressure" is that choice's
    # text, not choice A followed by words.
    if boxed is not None:
        found = choice_text_in(boxed, choices)
        if found is None:
            found = _letter_in(boxed, n)
        if found is not None:
            return found, "boxed"
    stated = answer_is(text)
    if stated is not None:
        found = choice_text_in(stated, choices)
        if found is not None:
            return found, "answer_text"
    for match in reversed(list(_ANSWER_LETTER.finditer(text))):
        letter = match.group(1).upper()
        # "answer is a ..." is prose; a lowercase letter counts only as "(c)".
        parenthesised = match.group(0).rstrip().endswith(")") and "(" in match.group(0)
        if (match.group(1).isupper() or parenthesised) and LETTERS.index(letter) < n:
            return LETTERS.index(letter), "answer_line"
    return choice_letters.mentioned_letter(text, n)


def _score_choice(text: str, reference: StemReference, careful: bool) -> scorer.Judgement:
    choices = reference.choices or []
    gold = _gold_index(reference)
    picked, source = _pick_choice(text, choices)
    rules: list[str] = []
    if careful:
        plain = picked
        picked, source = choice_letters.pick_choice(text, choices)
        if (plain == gold) is not (picked == gold):
            rules.append(choice_letters.rule_for(text, picked, source))
    more = {"rules": rules, "prorl_v1": picked != gold} if rules else {}
    if picked == choice_letters.AMBIGUOUS:
        return scorer.Judgement.unparsed("two_choices", source=source, **more)
    if picked is None:
        return scorer.Judgement.unparsed("no_choice", **more)
    ok = picked == gold
    return scorer.Judgement(
        score=1.0 if ok else 0.0,
        success=ok,
        parsed=True,
        details={"extracted": LETTERS[picked], "source": source, "gold": LETTERS[gold], **more},
    )


# ---------------------------------------------------------------- free form


def _symbolic_value(answer: str, timeout_s: int) -> float | None:
    """The value of an answer that is a closed-form number (`\\sqrt{2}`, `\\pi/4`), else None."""
    try:
        parsed = parse(
            "\\boxed{" + answer + "}", boxed_latex(), parsing_timeout=timeout_s, raise_on_error=True
        )
    except math_verify_errors.TimeoutException:
        return None
    except Exception as exc:  # unparsable: the caller falls back to math-verify's verdict
        if faults.ours(exc, _parser_works, parse):
            raise
        return None
    for expr in parsed:
        if isinstance(expr, sympy.Expr) and expr.is_number:
            try:
                value = _evaluate(expr, timeout_s)
            except math_verify_errors.TimeoutException:
                return None
            if value is not None:
                return value
    return None


def _parser_works() -> bool:
    """The canary of `faults.ours`: math-verify, through this module's name, reads sqrt(4) as 2."""
    parsed = parse("\\boxed{\\sqrt{4}}", boxed_latex(), raise_on_error=True)
    return any(isinstance(e, sympy.Expr) and e == 2 for e in parsed)


def _evaluate(expr: sympy.Expr, timeout_s: int) -> float | None:
    """`expr` as a finite real float, under math-verify's own alarm-based time limit."""

    def run() -> float | None:
        value = complex(expr.evalf(30))
        if value.imag != 0.0 or not math.isfinite(value.real):
            return None
        return value.real

    bounded: Callable[[], float | None] = math_verify_utils.timeout(timeout_seconds=timeout_s)(run)
    try:
        result = bounded()
    except (TypeError, ValueError, ArithmeticError):
        return None
    return result


def _score_free_form(text: str, reference: StemReference, config: StemConfig) -> scorer.Judgement:
    answer, source = extract_answer(text, config.fallbacks)
    if answer is None:
        return scorer.Judgement.unparsed("no_answer")
    details: dict[str, Any] = {"extracted": answer, "source": source}
    if config.careful:
        rewritten, fired = normalise(answer, gold_facts(reference.answer))
        if fired:
            return _careful_free_form(answer, rewritten, fired, reference, config, details)
    return _free_form_verdict(answer, reference, config, details)


def _careful_free_form(
    answer: str,
    rewritten: str,
    fired: tuple[Rule, ...],
    reference: StemReference,
    config: StemConfig,
    details: dict[str, Any],
) -> scorer.Judgement:
    """The verdict on the normalised answer; the rules named when they changed it."""
    judged = _free_form_verdict(rewritten, reference, config, dict(details))
    plain = _free_form_verdict(answer, reference, _plain(config), dict(details))
    if judged.success is plain.success:
        return judged
    more = {"rules": [*fired, *judged.details.get("rules", ())], "prorl_v1": plain.success}
    return scorer.Judgement(judged.score, judged.success, True, {**judged.details, **more})


@Cache("stem.plain_configs", 64)
def _plain(config: StemConfig) -> StemConfig:
    """The same config without the careful rules and units (prorl-v1's reading)."""
    symbolic = config.symbolic.model_copy(update={"careful": False, "prose_answer": False})
    return config.model_copy(update={"careful": False, "units": False, "symbolic": symbolic})


def _free_form_verdict(
    answer: str, reference: StemReference, config: StemConfig, details: dict[str, Any]
) -> scorer.Judgement:
    if config.units:
        rel_tol = reference.rel_tol if reference.rel_tol is not None else config.rel_tol
        verdict = compare_with_units(answer, reference.answer, rel_tol, config.abs_tol)
        if verdict is not None:
            ok, more = verdict
            details.update(more)
            return scorer.Judgement(
                score=1.0 if ok else 0.0, success=ok, parsed=True, details=details
            )
    gold_value = parse_number(reference.answer)
    if gold_value is not None:
        value = parse_number(answer)
        if value is None:
            value = _symbolic_value(answer, config.symbolic.parsing_timeout_s)
            if value is not None:
                details["evaluated"] = True
        if value is None:
            ok, more = equivalent(reference.answer, answer, config.symbolic)
            details.update(more)
        else:
            rel_tol = reference.rel_tol if reference.rel_tol is not None else config.rel_tol
            ok = math.isclose(value, gold_value, rel_tol=rel_tol, abs_tol=config.abs_tol)
            details.update({"value": value, "rel_tol": rel_tol})
    else:
        ok, more = equivalent(reference.answer, answer, config.symbolic)
        details.update(more)
    return scorer.Judgement(score=1.0 if ok else 0.0, success=ok, parsed=True, details=details)


def score_stem(
    response: str, reference: StemReference, config: StemConfig, ctx: scorer.ScoreContext
) -> scorer.Judgement:
    """Multiple choice by letter or choice text; free-form numbers within a relative tolerance,
    else symbolic equivalence; 0/1."""
    stage = config.judge
    if (
        stage is not None
        and stage.when == "unparsed_reference"
        and reference.choices is None
        and not _reference_parses(reference, config)
    ):
        return judge_alone(
            response, _question(reference), reference.answer, config.fallbacks, stage, ctx
        )
    if reference.choices is not None:
        verdict = _score_choice(response, reference, config.careful)
    else:
        verdict = _score_free_form(response, reference, config)
    if stage is None or stage.when != "confirm_yes" or verdict.score < 1.0:
        return verdict
    answer, gold = str(verdict.details.get("extracted", "")), reference.answer
    if reference.choices is not None:  # the judge reads the choices' texts, not letters
        answer = reference.choices[LETTERS.index(answer)]
        gold = reference.choices[LETTERS.index(str(verdict.details["gold"]))]
    return confirmed(verdict, answer, _question(reference), gold, stage, ctx)


def _reference_parses(reference: StemReference, config: StemConfig) -> bool:
    """Whether the rules read a free-form reference: a number, or anything math-verify reads."""
    return parse_number(reference.answer) is not None or reference_parses(
        reference.answer, config.symbolic
    )


def _question(reference: StemReference) -> str:
    question = (reference.model_extra or {}).get("question")
    if not isinstance(question, str) or not question:
        raise scorer.InvalidReference("the judge stage needs the reference's `question`")
    return question


def _examples() -> list[scorer.Example]:
    return [
        scorer.Example(
            {"answer": "B", "choices": ["red", "green", "blue"]}, "So it must be green.\nAnswer: B"
        ),
        scorer.Example({"answer": "blue", "choices": ["red", "green", "blue"]}, "\\boxed{C}"),
        scorer.Example({"answer": "3.2e-5"}, "The rate is \\boxed{3.2 \\times 10^{-5}}."),
        scorer.Example({"answer": "x^2 + 1"}, "\\boxed{1 + x^2}"),
    ]


SCORER = scorer.Scorer.from_function(
    "stem", score_stem, _examples, libraries=("math-verify", "latex2sympy2_extended", "sympy")
)
