"""Math: the final answer checked for equivalence with math-verify (binary reward).

The answer is the last `\\boxed{}` of the (reasoning-stripped) response, else the configured
fallbacks. Both sides are parsed by math-verify's LaTeX extraction, the gold as `\\boxed{gold}`, and
compared with `verify` under the spec's rounding and strictness. math-verify bounds its work with
`signal.alarm`, which is why this scorer runs on the main thread of a worker process.

A fast path answers without sympy only where math-verify's answer is certain: two plain decimal
numbers that are exactly equal (match), or two plain integers that differ (no match). It never
changes a verdict; `tests/test_math_fast_path.py` checks it against math-verify.
"""

from __future__ import annotations

import re
from fractions import Fraction
from functools import lru_cache
from typing import Any

from math_verify import LatexExtractionConfig, parse, verify
from math_verify.errors import TimeoutException
from pydantic import ConfigDict, Field

from reward_specs.extract import Fallback, extract_answer
from reward_specs.memo import Memo
from reward_specs.scorer import (
    DomainConfig,
    Example,
    InvalidReference,
    Judgement,
    ReferenceModel,
    ScoreContext,
    Scorer,
)

__all__ = ["SCORER", "MathConfig", "MathReference", "equivalent", "math_answer_key"]


class MathConfig(DomainConfig):
    fallbacks: tuple[Fallback, ...] = ("answer_is",)
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


class MathReference(ReferenceModel):
    model_config = ConfigDict(extra="allow", frozen=True, coerce_numbers_to_str=True)

    answer: str = Field(..., min_length=1)


# No trailing dot: math-verify reads "5." as text, so "5." == "5" is not certain.
_PLAIN_NUMBER = re.compile(r"^[+-]?(\d+(\.\d+)?|\.\d+)$")
_PLAIN_INTEGER = re.compile(r"^[+-]?\d+$")


def _fast_verdict(gold: str, answer: str) -> bool | None:
    g, a = gold.strip(), answer.strip()
    if not (_PLAIN_NUMBER.match(g) and _PLAIN_NUMBER.match(a)):
        return None
    if Fraction(g) == Fraction(a):
        return True
    if _PLAIN_INTEGER.match(g) and _PLAIN_INTEGER.match(a) and max(len(g), len(a)) <= 15:
        return False
    return None


_LATEX = [LatexExtractionConfig(boxed_match_priority=0)]


@lru_cache(maxsize=4096)
def _parse_gold(gold: str, timeout_s: int) -> tuple[Any, ...]:
    return tuple(parse("\\boxed{" + gold + "}", _LATEX, parsing_timeout=timeout_s))


def equivalent(gold: str, answer: str, config: MathConfig) -> tuple[bool, dict[str, Any]]:
    """math-verify's verdict on an extracted answer, with the reason in the details.

    A timeout or an error inside math-verify is the response's doing (a pathological expression):
    the answer is judged not equivalent and the reason is recorded. An unparsable gold is the
    reference's fault and raises `InvalidReference`.

    Verdicts are memoised per process (a GRPO group repeats the same few final answers, and
    math-verify's own parse cache holds only 20 entries), except verdicts cut short by a timeout:
    those depend on the machine's load at the time, so they are recomputed.
    """
    key = (gold, answer, config)
    cached = _VERDICTS.get(key)
    if cached is None:
        cached = _equivalent(gold, answer, config)
        if cached[1].get("reason") not in _NOT_CACHED:
            _VERDICTS.put(key, cached)
    verdict, details = cached
    return verdict, dict(details)


_VERDICTS: Memo[tuple[str, str, MathConfig], tuple[bool, dict[str, Any]]] = Memo(16384)
_NOT_CACHED = frozenset({"parse_timeout", "verifier_timeout"})


def _equivalent(gold: str, answer: str, config: MathConfig) -> tuple[bool, dict[str, Any]]:
    if len(answer) > config.max_answer_chars:
        return False, {"reason": "answer_too_long"}
    if config.fast_path:
        fast = _fast_verdict(gold, answer)
        if fast is not None:
            return fast, {"path": "fast"}
    gold_parsed = _parse_gold(gold, config.parsing_timeout_s)
    if not gold_parsed:
        raise InvalidReference(f"math-verify cannot parse the gold answer {gold[:200]!r}")
    try:
        predicted = parse(
            "\\boxed{" + answer + "}",
            _LATEX,
            parsing_timeout=config.parsing_timeout_s,
            raise_on_error=True,
        )
    except TimeoutException:
        return False, {"reason": "parse_timeout"}
    except Exception as exc:  # noqa: BLE001 - math-verify itself reads any error as "unparsable"
        return False, {"reason": "parse_error", "error": type(exc).__name__}
    if not predicted:
        return False, {"reason": "unparsable_answer"}
    timed_out = False
    errors: list[str] = []
    # Pair by pair, as verify() itself does, so a timeout is seen instead of read as False.
    for g in gold_parsed:
        for p in predicted:
            try:
                if verify(
                    [g],
                    [p],
                    float_rounding=config.float_rounding,
                    numeric_precision=config.numeric_precision,
                    strict=config.strict,
                    allow_set_relation_comp=config.allow_set_relation_comp,
                    timeout_seconds=config.verify_timeout_s,
                    raise_on_error=True,
                ):
                    return True, {"path": "sympy"}
            except TimeoutException:
                timed_out = True
            except Exception as exc:  # noqa: BLE001 - verify() reads any error as "not equal"
                errors.append(type(exc).__name__)
    details: dict[str, Any] = {"path": "sympy"}
    if timed_out:
        details["reason"] = "verifier_timeout"
    if errors:
        details["verify_errors"] = errors[:5]
    return False, details


def score_math(
    response: str, reference: MathReference, config: MathConfig, ctx: ScoreContext
) -> Judgement:
    answer, source = extract_answer(response, config.fallbacks)
    if answer is None:
        return Judgement.unparsed("no_answer")
    ok, details = equivalent(reference.answer, answer, config)
    return Judgement(
        score=1.0 if ok else 0.0,
        success=ok,
        parsed=True,
        details={"extracted": answer, "source": source, **details},
    )


def math_answer_key(response: str, config: MathConfig) -> str:
    """All that `score_math` reads of a response: the extracted answer and where it was found
    (the last `\\boxed{}`, else the fallbacks; each a single linear scan)."""
    answer, source = extract_answer(response, config.fallbacks)
    return "none" if answer is None else f"{source}:{answer}"


def _examples() -> list[Example]:
    return [
        Example({"answer": "0.5"}, "Halving gives \\boxed{\\frac{1}{2}}."),
        Example({"answer": "\\sqrt{2}"}, "The diagonal is \\boxed{\\sqrt{2}}"),
        Example({"answer": 42}, "The answer is 42."),
    ]


SCORER: Scorer[MathReference, MathConfig] = Scorer(
    domain="math",
    config_type=MathConfig,
    reference_type=MathReference,
    score=score_math,
    examples=_examples,
    executor="process",
    libraries=("math-verify", "latex2sympy2_extended", "sympy", "antlr4-python3-runtime"),
    description="Final answer (last \\boxed{}) checked for equivalence with math-verify; 0/1.",
    answer_key=math_answer_key,
)
