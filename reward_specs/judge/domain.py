"""Judge: a free-form answer compared with the reference by a judge model (binary reward).

The answer is extracted as the math domain extracts one (the last `\\boxed{}`, then "the answer
is ..."), from the response with the judge model's special-token strings removed
(`text.strip_special_tokens`); a response without one is 0 (`parsed: false`) and is never sent,
nor is an answer longer than `max_answer_chars` (0, `answer_too_long`). The spec's template is
filled with the question, the reference answer and the extracted answer, each with the verdict
markers escaped (`text.escape_markers`) and nothing else added, and sent as one user message to
`{url}/chat/completions` of the endpoint the spec names (`ScoreContext.judges`). The verdict is
the last marker of the judge's reply on a line of its own (`text.read_verdict`); with
`both_orders` the template is asked a second time with the reference and the answer swapped, and
the item's score is the lower of the two, so both must agree for a yes.

A review item (`reference.reasoning` set: the whole response, reasoning included, as
`proctor-eval --review-judge` sends it) asks the spec's second template, `review_template`,
whether that reasoning supports the extracted answer: `{question}`, `{reasoning}` and `{answer}`
filled as above, one order (nothing is compared, so nothing is swapped), the same verdicts. The
reasoning travels in the reference because the spec's `strip_reasoning` removes a `<think>` block
from the response before any domain reads it. A spec without a `review_template` refuses such an
item (`invalid`).

Who caused what decides the outcome (`reward_specs.judge.client`): a reply without a verdict (cut
at `max_tokens` or not) is 0 (`judge_no_verdict`), an HTTP 400 is 0 (`judge_rejected_input`):
a response can provoke both, and must not escape its 0 by confusing its judge. A judge that is
down, refuses us (429, 401, 403, 404, 5xx) or is slower than its `timeout_s` makes the item
`infra_error` (`judge_unavailable`, `judge_timeout`), as does a spec whose endpoint this process
does not have.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from reward_specs import codes
from reward_specs.canonical import canonical_text
from reward_specs.extract import BoxedFallback, extract_answer
from reward_specs.judge.client import JudgeRejected, Judges, Messages, Reply
from reward_specs.judge.text import escape_markers, marker_key, read_verdict, strip_special_tokens
from reward_specs.scorer import (
    DomainConfig,
    Example,
    InvalidReference,
    Judgement,
    NotJudged,
    ReferenceModel,
    ScoreContext,
    Scorer,
)
from reward_specs.spec import Spec

__all__ = [
    "SCORER",
    "JudgeConfig",
    "JudgeReference",
    "JudgeStage",
    "ask_judge",
    "judge_answer_key",
    "judge_stages",
    "render",
    "review_prompt",
    "score_judge",
    "wanted_endpoints",
]

REPLY_CHARS = 2048
"""How much of a judge's reply `details.judge.reply` keeps (its end: where the verdict is)."""

_SLOTS = ("{question}", "{reference}", "{answer}")
_REVIEW_SLOTS = ("{question}", "{reasoning}", "{answer}")


class JudgeConfig(DomainConfig):
    endpoint: str = Field(..., min_length=1)
    """The name of the judge endpoint in the server's `judge_endpoints`."""
    model: str = Field(..., min_length=1)
    """The model the endpoint serves, as its `GET /models` names it."""
    template: str
    """The user message: `{question}`, `{reference}` and `{answer}` are each filled with the
    text itself (markers escaped, no delimiters added: a template that wants them writes them);
    no other braces are read."""
    verdicts: dict[str, float]
    """The marker strings the judge ends with and the score each gives (0 to 1)."""
    review_template: str | None = None
    """The second template, for review items: does `{reasoning}` (the whole response) support
    `{answer}` to `{question}`? Filled as `template` is; None: the spec reviews nothing."""
    both_orders: bool = False
    """Ask a second time with the reference and the answer swapped; both must agree for a yes."""
    max_answer_chars: int = Field(2000, ge=1, le=100_000)
    """A longer extracted answer is 0 (`answer_too_long`), never sent."""
    max_tokens: int = Field(512, ge=1, le=32768)
    """The judge's reply's bound; a reply cut there without a verdict is 0 (`judge_no_verdict`)."""
    temperature: float = Field(0.0, ge=0.0, le=2.0)
    special_tokens: tuple[str, ...] = ()
    """The judge model's special-token strings (from its tokenizer), stripped from responses
    with the generic `<|...|>`, `<s>`, `</s>`, `[INST]` forms."""
    fallbacks: tuple[BoxedFallback, ...] = ("answer_is",)
    """Where to look when the response has no `\\boxed{}`, as in the math domain."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @field_validator("template")
    @classmethod
    def _has_slots(cls, value: str) -> str:
        missing = [s for s in _SLOTS if s not in value]
        if missing:
            raise ValueError(f"the template lacks {', '.join(missing)}")
        return value

    @field_validator("review_template")
    @classmethod
    def _has_review_slots(cls, value: str | None) -> str | None:
        missing = [s for s in _REVIEW_SLOTS if value is not None and s not in value]
        if missing:
            raise ValueError(f"the review template lacks {', '.join(missing)}")
        return value

    @field_validator("verdicts")
    @classmethod
    def _verdicts(cls, value: dict[str, float]) -> dict[str, float]:
        if not value:
            raise ValueError("at least one verdict marker is needed")
        keys = [marker_key(m) for m in value]
        if any(len(k) < 2 for k in keys):
            raise ValueError("a verdict marker needs at least two characters that count")
        if len(set(keys)) != len(keys):
            raise ValueError("two verdict markers are the same once normalised")
        if any(not 0.0 <= s <= 1.0 for s in value.values()):
            raise ValueError("verdict scores lie in [0, 1]")
        return value

    @model_validator(mode="after")
    def _a_yes_exists(self) -> JudgeConfig:
        if 1.0 not in self.verdicts.values():
            raise ValueError("one verdict must score 1 (the judge's yes)")
        return self


JudgeWhen = Literal["unparsed_reference", "confirm_yes"]


class JudgeStage(JudgeConfig):
    """A judge stage of the math domain (`[domains.math.judge]`): the judge section's fields and
    `when` the judge is asked. The path that judges an item depends only on its reference and
    the spec, never on the response:

    - `unparsed_reference`: an item whose reference answer the rules cannot parse (math-verify
      reads nothing of `\\boxed{answer}`) is judged by the judge alone (its reference needs a
      `question`); every other item by the rules alone;
    - `confirm_yes`: the rules judge every item, and a rule's yes is asked of the judge, whose no
      (or no verdict, or rejection) lowers it to 0; a rule's no or parse failure stands, never
      sent (NeMo-Gym's math_with_judge, except that a judge never raises a rule's no)."""

    when: JudgeWhen = "unparsed_reference"

    def __hash__(self) -> int:
        # the math domain's caches key on its config, and `verdicts` is a dict
        return hash(canonical_text(self.model_dump(mode="json")))


class JudgeReference(ReferenceModel):
    model_config = ConfigDict(extra="allow", frozen=True, coerce_numbers_to_str=True)

    question: str = Field(..., min_length=1)
    answer: str = Field(..., min_length=1)
    reasoning: str | None = None
    """Set: a review item, asking the spec's `review_template` whether this reasoning (the
    whole response) supports the answer extracted from the response."""


def _answer(text: str, config: JudgeConfig) -> tuple[str | None, str]:
    cleaned = strip_special_tokens(text, config.special_tokens)
    answer, source = extract_answer(cleaned, config.fallbacks)
    return answer, source


def judge_answer_key(text: str, config: JudgeConfig) -> str | None:
    """The extracted answer (what the judge is shown of the response) and where it was found
    (which `details.source` reports)."""
    answer, source = _answer(text, config)
    return None if answer is None else f"{source}\x00{answer}"


def render(template: str, fills: Mapping[str, str]) -> str:
    """`template` with each `{slot}` of `fills` replaced by its fill, in one pass (a fill's own
    braces are text, never a slot)."""
    slots = [f"{{{name}}}" for name in fills]
    out: list[str] = []
    i = 0
    while i < len(template):
        for slot in slots:
            if template.startswith(slot, i):
                out.append(fills[slot[1:-1]])
                i += len(slot)
                break
        else:
            out.append(template[i])
            i += 1
    return "".join(out)


def prompts(
    question: str, reference: str, answer: str, config: JudgeConfig
) -> tuple[Messages, ...]:
    """The chats sent for one item: one order, or both (reference and answer swapped)."""
    markers = list(config.verdicts)
    q, r, a = (escape_markers(t, markers) for t in (question, reference, answer))
    orders = [{"question": q, "reference": r, "answer": a}]
    if config.both_orders:
        orders.append({"question": q, "reference": a, "answer": r})
    return tuple((("user", render(config.template, fills)),) for fills in orders)


def review_prompt(
    question: str, reasoning: str, answer: str, template: str, config: JudgeConfig
) -> Messages:
    """The chat sent for one review item: `template` (the spec's `review_template`) filled."""
    markers = list(config.verdicts)
    fills = {
        "question": question,
        "reasoning": strip_special_tokens(reasoning, config.special_tokens),
        "answer": answer,
    }
    return (("user", render(template, {k: escape_markers(v, markers) for k, v in fills.items()})),)


def _scope(config: JudgeConfig, ctx: ScoreContext) -> str:
    """What the cache keeps replies under: the judge section's hash (the domain's, with the
    endpoint's models, where the engine gives it)."""
    return ctx.domain_hash or canonical_text(config.model_dump(mode="json"))


def _details(
    replies: tuple[Reply, ...], cached: bool, verdict: str | None, orders: int
) -> dict[str, Any]:
    last = replies[-1].text if replies else ""
    return {
        "verdict": verdict,
        "orders": orders,
        "cached": cached,
        "prompt_tokens": sum(r.prompt_tokens for r in replies),
        "completion_tokens": sum(r.completion_tokens for r in replies),
        "reply": last[-REPLY_CHARS:],
        "finish_reasons": [r.finish_reason for r in replies],
    }


def judge_stages(spec: Spec) -> dict[str, str]:
    """The domains of `spec` a judge model scores and the endpoint each calls: the judge
    domain's, and each domain with a judge stage (math's, STEM's)."""
    found: dict[str, str] = {}
    for domain, config in spec.domains.items():
        if isinstance(config, JudgeConfig):
            found[domain] = config.endpoint
        elif isinstance(stage := getattr(config, "judge", None), JudgeConfig):
            found[domain] = stage.endpoint
    return found


def wanted_endpoints(specs: Mapping[str, Spec]) -> set[str]:
    """The judge endpoints the specs name (the judge domain's and the math judge stage's)."""
    wanted: set[str] = set()
    for spec in specs.values():
        wanted.update(judge_stages(spec).values())
    return wanted


def score_judge(
    response: str, reference: JudgeReference, config: JudgeConfig, ctx: ScoreContext
) -> Judgement:
    """Free-form answer (last `\\boxed{}`, then "the answer is") judged against the reference by
    a judge model behind an OpenAI-compatible endpoint; 0/1."""
    answer, source = _answer(response, config)
    if answer is None:
        return Judgement.unparsed("no_answer")
    return ask_judge(
        reference.question,
        reference.answer,
        answer,
        source,
        config,
        ctx,
        reasoning=reference.reasoning,
    )


def ask_judge(
    question: str,
    reference: str,
    answer: str,
    source: str,
    config: JudgeConfig,
    ctx: ScoreContext,
    extra: Mapping[str, Any] | None = None,
    reasoning: str | None = None,
) -> Judgement:
    """The judge's verdict on `answer` (extracted already, found at `source`) against
    `reference`: the judge domain's path after extraction, shared with the math domain's judge
    stage. `extra`: details to report beside the judge's. With `reasoning` (a review item), the
    spec's review template asks whether the reasoning supports the answer. Raises NotJudged."""
    if len(answer) > config.max_answer_chars:
        return Judgement.zero(
            "answer_too_long", answer_chars=len(answer), source=source, **(extra or {})
        )
    judges: Judges | None = ctx.judges
    if judges is None or config.endpoint not in judges.endpoints:
        raise NotJudged(
            f"judge endpoint {config.endpoint!r} is not configured here", codes.JUDGE_UNAVAILABLE
        )
    if reasoning is None:
        chats = prompts(question, reference, answer, config)
    elif config.review_template is None:
        raise InvalidReference(
            "a review item (`reasoning` set) under a spec with no review_template"
        )
    else:
        chats = (review_prompt(question, reasoning, answer, config.review_template, config),)
    body = {
        "model": config.model,
        "max_tokens": config.max_tokens,
        "temperature": config.temperature,
    }
    try:
        replies, cached = judges.ask(config.endpoint, chats, body, _scope(config, ctx))
    except JudgeRejected as exc:
        return Judgement.zero(
            "judge_rejected_input",
            source=source,
            **(extra or {}),
            judge={"status": exc.status, "reply": exc.body[-REPLY_CHARS:]},
        )
    verdicts = [read_verdict(r.text, config.verdicts) for r in replies]
    if any(v is None for v in verdicts):
        return Judgement.zero(
            "judge_no_verdict",
            source=source,
            judge=_details(replies, cached, None, len(chats)),
            **(extra or {}),
        )
    marker, score = min((v for v in verdicts if v is not None), key=lambda v: v[1])
    details = {
        "source": source,
        "judge": _details(replies, cached, marker, len(chats)),
        **(extra or {}),
    }
    return Judgement(score=score, success=score >= 1.0, parsed=True, details=details)


def _examples() -> list[Example]:
    return [
        Example(
            reference={
                "question": "Name the gas plants take in for photosynthesis.",
                "answer": "carbon dioxide",
            },
            response="Plants take in CO2, so the answer is \\boxed{carbon dioxide}.",
        )
    ]


SCORER = Scorer.from_function(
    "judge",
    score_judge,
    _examples,
    answer_key=judge_answer_key,
    opt_in=True,
)
