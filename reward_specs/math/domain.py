"""Math: the final answer checked for equivalence with math-verify (binary reward).

The answer is the last `\\boxed{}` of the (reasoning-stripped) response, else the configured
fallbacks; a reference with a `format` has its dataset's own answer read first (GSM8K's `####`,
DAPO's `Answer:` line), so that a response trained to that format is not scored unparsed. Both
sides are parsed by math-verify's LaTeX extraction, the gold as `\\boxed{gold}`, and compared
with `verify` under the spec's rounding and strictness. math-verify bounds its work with
`signal.alarm`, which is why this scorer runs on the main thread of a worker process.

With `careful` on, a second layer stands around math-verify (`reward_specs/math/rules.py`): the
answer is normalised before it parses, its "equal" verdicts are checked against the gold's
precision after, and the boxes that end a response together are judged together where the gold
is a list. A rule that changed a verdict is named in `details["rules"]`, beside math-verify's own
verdict (`details["math_verify"]`). `prose_answer` reads an unboxed answer from the final sentence
with math-verify's own extraction, for evaluations.

A fast path (`reward_specs/math/fast.py`) answers without math-verify's costly steps only where
its answer is certain: plain numbers and exact rationals before parsing, and after parsing, plain
expressions whose difference is a constant clearly away from zero or a polynomial. It never
changes a verdict; `tests/test_math_fast_path.py` and `tests/test_math_differential.py` check it
against math-verify.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import ConfigDict, Field

from reward_specs import faults, scorer
from reward_specs.caches import Cache
from reward_specs.extract import (
    BoxedFallback,
    answer_line,
    extract_answer,
    final_boxes,
    final_sentence,
    hashes_answer,
    stated_sentence,
)
from reward_specs.judge.domain import JudgeStage
from reward_specs.judge.stage import confirmed, judge_alone
from reward_specs.lazy import lazy_import
from reward_specs.math.fast import parsed_verdict, string_verdict
from reward_specs.math.rules import (
    Rule,
    Units,
    gold_facts,
    normalise,
    precision_differs,
    question_units,
)
from reward_specs.math.verifier import (
    boxed_latex,
    math_verify_errors,
    parse,
    prose_extraction,
    verify,
)

if TYPE_CHECKING:
    import sympy
else:  # imported at first use (reward_specs.lazy)
    sympy = lazy_import("sympy")

__all__ = [
    "SCORER",
    "AnswerFormat",
    "MathConfig",
    "MathReference",
    "equivalent",
    "math_answer_key",
]


class MathConfig(scorer.DomainConfig):
    fallbacks: tuple[BoxedFallback, ...] = ("answer_is",)
    """Where to look when the response has no `\\boxed{}`; `answer_is` reads "the answer is X"."""
    parsing_timeout_s: int = Field(5, ge=1, le=60)
    """math-verify's time limit for parsing one expression."""
    verify_timeout_s: int = Field(5, ge=1, le=60)
    """math-verify's time limit for one gold/answer comparison."""
    float_rounding: int = Field(6, ge=0, le=20)
    numeric_precision: int = Field(15, ge=1, le=100)
    strict: bool = True
    allow_set_relation_comp: bool = False
    fast_path: bool = True
    """Skip sympy where the verdict is certain (it never changes a verdict)."""
    max_answer_chars: int = Field(1000, ge=1)
    """A longer extracted answer is judged wrong without parsing (a cheap guard, not a timeout)."""
    careful: bool = False
    """The careful grader's rules around math-verify (`reward_specs/math/rules.py`) and the final
    boxes judged together where the gold is a list; off, math-verify's verdicts alone."""
    prose_answer: bool = False
    """With no box, read the last mathematical expression of the stated answer's sentence (else
    of the final sentence), as math-verify's own extraction does. For evaluations: a policy in
    training should learn to box its answer, and the parse rate shows what that costs."""

    judge: JudgeStage | None = None
    """A judge stage (`reward_specs.judge.domain.JudgeStage`): items whose reference the rules
    cannot parse judged by a model, or a rule's yes confirmed by one. None: the rules alone."""

    added_later: ClassVar[frozenset[str]] = frozenset({"careful", "prose_answer", "judge"})


AnswerFormat = Literal["gsm8k", "math_dapo"]
"""Where a dataset's own responses state their answer: `gsm8k` the number after the last `####`,
`math_dapo` the last `Answer:` line (`reward_specs.extract`)."""

_FORMATS: dict[AnswerFormat, Callable[[str], str | None]] = {
    "gsm8k": hashes_answer,
    "math_dapo": answer_line,
}


class MathReference(scorer.ReferenceModel):
    model_config = ConfigDict(extra="allow", frozen=True, coerce_numbers_to_str=True)

    answer: str = Field(..., min_length=1)
    format: AnswerFormat | None = None
    """The dataset's own answer format, read first; a response without it is read as the spec
    says (the last box, then the fallbacks). Without it, the spec's reading alone."""

    @property
    def question(self) -> str | None:
        """The problem's text, when the reference carries one (an extra key, never validated,
        so references that predate it stay valid): the careful grader reads its angle unit."""
        question = (self.model_extra or {}).get("question")
        return question if isinstance(question, str) else None


_fast_verdict = string_verdict
"""The fast path before parsing (`reward_specs/math/fast.py`)."""


@Cache("math.gold_parses", 4096)
def _parse_gold(gold: str, timeout_s: int) -> tuple[Any, ...]:
    return tuple(parse("\\boxed{" + gold + "}", boxed_latex(), parsing_timeout=timeout_s))


def equivalent(
    gold: str, answer: str, config: MathConfig, units: Units = None
) -> tuple[bool, dict[str, Any]]:
    """math-verify's verdict on an extracted answer (with the careful rules when the config says
    so; `units` is the angle unit the question asks for), with the reason in the details.

    A timeout or an error inside math-verify is the response's doing (a pathological expression):
    the answer is judged not equivalent and the reason is recorded. An unparsable gold is the
    reference's fault and raises `scorer.InvalidReference`.

    Verdicts are memoised per process (a GRPO group repeats the same few final answers, and
    math-verify's own parse cache is small), except verdicts cut short by a timeout:
    those depend on the machine's load at the time, so they are recomputed.
    """
    key = (gold, answer, config, units)
    cached = _VERDICTS.get(key)
    if cached is None:
        if config.careful:
            cached = _careful_equivalent(gold, answer, config, units)
        else:
            cached = _equivalent(gold, answer, config, relation_as_set=False)
        _VERDICTS.put(key, cached)
    verdict, details = cached
    return verdict, dict(details)


_NOT_CACHED = frozenset({"parse_timeout", "verifier_timeout"})


def _cut_short(verdict: tuple[bool, dict[str, Any]]) -> bool:
    """A verdict a timeout cut short: it depends on the machine's load, so it is not memoised."""
    return verdict[1].get("reason") in _NOT_CACHED


_VERDICTS: Cache[tuple[str, str, MathConfig, Units], tuple[bool, dict[str, Any]]] = Cache(
    "math.verdicts", 16384, never=_cut_short
)


@Cache("math.plain_configs", 64)
def _plain(config: MathConfig) -> MathConfig:
    """The same config without the careful rules: math-verify's own verdicts."""
    return config.model_copy(update={"careful": False, "prose_answer": False})


def _careful_equivalent(
    gold: str, answer: str, config: MathConfig, units: Units
) -> tuple[bool, dict[str, Any]]:
    """math-verify on the normalised answer, its "equal" checked against the gold's precision;
    the rules that changed the verdict listed, with math-verify's own verdict beside them."""
    if config.fast_path and _fast_verdict(gold, answer) is not None:
        return _equivalent(gold, answer, config, relation_as_set=False)
    facts = gold_facts(gold)
    rewritten, fired = normalise(answer, facts, units)
    if facts.plain is not None:  # a scientific gold, written out exactly
        verdict, details = _equivalent(facts.plain, rewritten, config, relation_as_set=True)
    else:
        verdict, details = _equivalent(gold, rewritten, config, relation_as_set=True)
    if facts.plain is not None and "scientific" not in fired:
        fired = (*fired, "scientific")  # the gold was rewritten: math-verify's verdict decides
    rules: list[Rule] = []
    math_verify = verdict
    if fired or details.get("relation_as_set"):
        math_verify = equivalent(gold, answer, _plain(config))[0]
        if math_verify is not verdict:
            rules.extend(fired)
            if details.get("relation_as_set"):
                rules.append("relation_as_set")
    details.pop("relation_as_set", None)
    if verdict and precision_differs(facts, rewritten):
        verdict = False
        rules.append("gold_precision")
    if rules:
        details["rules"] = rules
        details["math_verify"] = math_verify
    return verdict, details


def _equivalent(
    gold: str, answer: str, config: MathConfig, relation_as_set: bool
) -> tuple[bool, dict[str, Any]]:
    """math-verify's verdict. `relation_as_set`: an inequality answer may match an interval gold
    (math-verify's `allow_set_relation_comp`, for that pair only; never an equation against a
    finite set); a verdict that needed it says so in the details."""
    if len(answer) > config.max_answer_chars:
        return False, {"reason": "answer_too_long"}
    if config.fast_path:
        fast = _fast_verdict(gold, answer)
        if fast is not None:
            return fast, {"path": "fast"}
    gold_parsed = _parse_gold(gold, config.parsing_timeout_s)
    if not gold_parsed:
        raise scorer.InvalidReference(f"math-verify cannot parse the gold answer {gold[:200]!r}")
    try:
        predicted = parse(
            "\\boxed{" + answer + "}",
            boxed_latex(),
            parsing_timeout=config.parsing_timeout_s,
            raise_on_error=True,
        )
    except math_verify_errors.TimeoutException:
        return False, {"reason": "parse_timeout"}
    except Exception as exc:
        if faults.ours(exc, _verifier_works, (parse, verify)):
            raise
        return False, {"reason": "parse_error", "error": type(exc).__name__}
    if not predicted:
        return False, {"reason": "unparsable_answer"}
    if config.fast_path and config.strict and not config.allow_set_relation_comp:
        fast = parsed_verdict(
            gold_parsed, predicted, config.numeric_precision, config.verify_timeout_s
        )
        if fast is not None:
            return fast, {"path": "fast"}
    timed_out = False
    errors: list[str] = []
    # Pair by pair, as verify() itself does, so a timeout is seen instead of read as False.
    for g in gold_parsed:
        for p in predicted:
            as_set = (
                relation_as_set
                and not config.allow_set_relation_comp
                and isinstance(g, (sympy.Interval, sympy.Union))
                and _is_inequality(p)
            )
            try:
                if verify(
                    [g],
                    [p],
                    float_rounding=config.float_rounding,
                    numeric_precision=config.numeric_precision,
                    strict=config.strict,
                    allow_set_relation_comp=config.allow_set_relation_comp or as_set,
                    timeout_seconds=config.verify_timeout_s,
                    raise_on_error=True,
                ):
                    return True, {"path": "sympy", **({"relation_as_set": True} if as_set else {})}
            except math_verify_errors.TimeoutException:
                timed_out = True
            except Exception as exc:
                if faults.ours(exc, _verifier_works, (parse, verify)):
                    raise
                errors.append(type(exc).__name__)
    details: dict[str, Any] = {"path": "sympy"}
    if timed_out:
        details["reason"] = "verifier_timeout"
    if errors:
        details["verify_errors"] = errors[:5]
    return False, details


def _verifier_works() -> bool:
    """The canary of `faults.ours`: math-verify, through this module's names, finds 1/2 in a box
    and judges it equal to 0.5."""
    gold = parse("\\boxed{0.5}", boxed_latex(), raise_on_error=True)
    answer = parse("\\boxed{\\frac{1}{2}}", boxed_latex(), raise_on_error=True)
    return bool(verify(gold, answer, raise_on_error=True))


def _is_inequality(expr: Any) -> bool:
    """An inequality, or a chain of them (`1 < x < 5`): what may match an interval. Not an
    equation: `x^2 = 4` restates a problem, it does not give the set {-2, 2}."""
    if isinstance(expr, sympy.And):
        return all(_is_inequality(arg) for arg in expr.args)
    return isinstance(expr, sympy.core.relational.Relational) and not isinstance(
        expr, sympy.Equality
    )


# ---------------------------------------------------------------- which answer is judged

_PROSE_CHARS = 2000
"""How much of the sentence math-verify's extraction reads (as `final_sentence`'s limit)."""


def _prose_answer(text: str, timeout_s: int) -> str | None:
    """The last mathematical expression math-verify's extraction finds in the sentence that
    states the answer ("the answer is ...", else the final sentence), as text."""
    sentence = (stated_sentence(text) or final_sentence(text))[:_PROSE_CHARS]
    if not sentence.strip():
        return None
    try:
        found = parse(sentence, prose_extraction(), parsing_timeout=timeout_s, raise_on_error=True)
    except math_verify_errors.TimeoutException:
        return None
    except Exception as exc:  # the prose holds no expression math-verify reads: no answer
        if faults.ours(exc, _verifier_works, (parse, verify)):
            raise
        return None
    strings = [item for item in found if isinstance(item, str) and item.strip()]
    return strings[-1].strip() if strings else None


def _gold_is_a_list(gold: str, config: MathConfig) -> bool:
    parsed = _parse_gold(gold, config.parsing_timeout_s)
    return bool(parsed) and isinstance(parsed[0], sympy.FiniteSet) and len(parsed[0]) > 1


def score_math(
    response: str, reference: MathReference, config: MathConfig, ctx: scorer.ScoreContext
) -> scorer.Judgement:
    """Final answer (last `\\boxed{}`) checked for equivalence with math-verify; 0/1."""
    stage = config.judge
    if (
        stage is not None
        and stage.when == "unparsed_reference"
        and not reference_parses(reference.answer, config)
    ):
        return _judge_stage(response, reference, config, stage, ctx)
    verdict = _by_rules(response, reference, config)
    if stage is not None and stage.when == "confirm_yes" and verdict.score >= 1.0:
        return _confirmed(verdict, reference, stage, ctx)
    return verdict


def reference_parses(gold: str, config: MathConfig) -> bool:
    """Whether math-verify reads anything of `\\boxed{gold}`: with a judge stage asked for
    `unparsed_reference`, the one thing that routes an item to the judge."""
    return bool(_parse_gold(gold, config.parsing_timeout_s))


def _question(reference: MathReference) -> str:
    question = (reference.model_extra or {}).get("question")
    if not isinstance(question, str) or not question:
        raise scorer.InvalidReference("the judge stage needs the reference's `question`")
    return question


def _judge_stage(
    response: str,
    reference: MathReference,
    config: MathConfig,
    stage: JudgeStage,
    ctx: scorer.ScoreContext,
) -> scorer.Judgement:
    return judge_alone(
        response, _question(reference), reference.answer, config.fallbacks, stage, ctx
    )


def _confirmed(
    verdict: scorer.Judgement, reference: MathReference, stage: JudgeStage, ctx: scorer.ScoreContext
) -> scorer.Judgement:
    answer = str(verdict.details.get("extracted", ""))
    return confirmed(verdict, answer, _question(reference), reference.answer, stage, ctx)


def _by_rules(response: str, reference: MathReference, config: MathConfig) -> scorer.Judgement:
    units = question_units(reference.question) if config.careful else None
    if reference.format is not None:
        native = _FORMATS[reference.format](response)
        if native:
            return _judged(reference.answer, native, reference.format, config, units, None)
    boxes = final_boxes(response) if config.careful else []
    if len(boxes) > 1 and _gold_is_a_list(reference.answer, config):
        return _judged(reference.answer, ", ".join(boxes), "boxes", config, units, boxes[-1])
    answer, source = _extracted(response, boxes, config)
    if config.prose_answer and source != "boxed":
        prose = _prose_answer(response, config.parsing_timeout_s)
        if prose is not None:
            return _judged(reference.answer, prose, "prose", config, units, answer)
    if answer is None:
        return scorer.Judgement.unparsed("no_answer")
    return _judged(reference.answer, answer, source, config, units, None)


def _extracted(response: str, boxes: list[str], config: MathConfig) -> tuple[str | None, str]:
    """`extract_answer`'s result; from `final_boxes` when they were read (its last box is the
    last box), so that the careful path scans the response's boxes once."""
    if boxes and boxes[-1]:
        return boxes[-1], "boxed"
    return extract_answer(response, config.fallbacks)


def _judged(
    gold: str,
    answer: str,
    source: str,
    config: MathConfig,
    units: Units,
    instead: str | None,
) -> scorer.Judgement:
    """The verdict on `answer`; `instead` is what the answer would have been without the rule
    that chose it (several boxes, prose), so that the rule is named if it changed the verdict."""
    ok, details = equivalent(gold, answer, config, units)
    if source in ("boxes", "prose"):
        rule: Rule = "several_boxes" if source == "boxes" else "prose_answer"
        before = instead is not None and equivalent(gold, instead, config, units)[0]
        if before is not ok:
            details["rules"] = [rule, *details.get("rules", ())]
    return scorer.Judgement(
        score=1.0 if ok else 0.0,
        success=ok,
        parsed=True,
        details={"extracted": answer, "source": source, **details},
    )


def math_answer_key(response: str, config: MathConfig) -> str:
    """All that `score_math` reads of a response: the extracted answer and where it was found
    (the last `\\boxed{}`, else the fallbacks; each a single linear scan), with the careful
    rules the boxes that end it together, with prose answers the sentence that states it, and
    the answers a reference's `format` would read."""
    boxes = final_boxes(response) if config.careful else []
    answer, source = _extracted(response, boxes, config)
    key = "none" if answer is None else f"{source}:{answer}"
    if len(boxes) > 1:
        key += "\x00boxes:" + "\x00".join(boxes)
    if config.prose_answer and source != "boxed":
        key += "\x00prose:" + (stated_sentence(response) or final_sentence(response))
    # What a reference's `format` reads first (the key does not see the reference).
    for name, read in _FORMATS.items():
        native = read(response)
        if native:
            key += f"\x00{name}:{native}"
    return key


def _examples() -> list[scorer.Example]:
    return [
        scorer.Example({"answer": "0.5"}, "Halving gives \\boxed{\\frac{1}{2}}."),
        scorer.Example({"answer": "\\sqrt{2}"}, "The diagonal is \\boxed{\\sqrt{2}}"),
        scorer.Example({"answer": 42}, "The answer is 42."),
    ]


SCORER = scorer.Scorer.from_function(
    "math",
    score_math,
    _examples,
    libraries=("math-verify", "latex2sympy2_extended", "sympy", "antlr4-python3-runtime"),
    answer_key=math_answer_key,
)
