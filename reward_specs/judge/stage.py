"""A judge stage of a rule-based domain (math's, STEM's `judge` option): the judge alone for a
reference the rules cannot parse, or asked to confirm a rule's yes, which it may only lower.
Which of the two judges an item depends on its reference and the spec, never on the response."""

from __future__ import annotations

from reward_specs import scorer
from reward_specs.extract import BoxedFallback, extract_answer
from reward_specs.judge.domain import JudgeStage, ask_judge
from reward_specs.judge.text import strip_special_tokens

__all__ = ["confirmed", "judge_alone"]


def judge_alone(
    response: str,
    question: str,
    gold: str,
    fallbacks: tuple[BoxedFallback, ...],
    stage: JudgeStage,
    ctx: scorer.ScoreContext,
) -> scorer.Judgement:
    """The judge alone, for a reference the rules cannot parse (math's and STEM's judge stage):
    the answer as the math domain extracts it (so `math_answer_key` still names all that is
    read), its special tokens stripped."""
    answer, source = extract_answer(response, fallbacks)
    if answer is None:
        return scorer.Judgement.unparsed("no_answer", stage="judge")
    answer = strip_special_tokens(answer, stage.special_tokens)
    return ask_judge(question, gold, answer, source, stage, ctx, {"stage": "judge"})


def confirmed(
    verdict: scorer.Judgement,
    answer: str,
    question: str,
    gold: str,
    stage: JudgeStage,
    ctx: scorer.ScoreContext,
) -> scorer.Judgement:
    """A rule's yes (`verdict`, on `answer`) asked of the judge: the lower of the two counts, so
    the judge can only lower it."""
    answer = strip_special_tokens(answer, stage.special_tokens)
    source = str(verdict.details.get("source", ""))
    judged = ask_judge(question, gold, answer, source, stage, ctx)
    details = {**verdict.details, "stage": "rules+judge", "judge": judged.details.get("judge")}
    if judged.score >= verdict.score:
        return scorer.Judgement(verdict.score, verdict.success, verdict.parsed, details)
    reason = judged.details.get("reason")
    if reason is not None:
        details["reason"] = reason
    return scorer.Judgement(judged.score, judged.score >= 1.0, True, details)
