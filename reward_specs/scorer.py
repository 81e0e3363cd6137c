"""The contract every domain scorer implements.

A scorer turns one response and its validated reference into a `Judgement` under a pydantic config
taken from the spec. It never reports a service failure as a wrong answer: whatever the *response*
causes (an unparsable answer, a verifier timeout on a pathological expression, code that crashes)
is a judged outcome; whatever makes the *reference* unusable raises `InvalidReference`; anything
else that goes wrong is ours and propagates, and the engine turns it into `infra_error`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, Literal, TypeVar, cast, get_type_hints

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, model_serializer

__all__ = [
    "DomainConfig",
    "Example",
    "InvalidReference",
    "Judgement",
    "NotJudged",
    "ReferenceModel",
    "ScoreContext",
    "Scorer",
]


class DomainConfig(BaseModel):
    """Base of every domain's spec parameters: immutable, and unknown keys are an error."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    added_later: ClassVar[frozenset[str]] = frozenset()
    """Parameters added after specs were published: left out of the dump (and so of the spec
    hash) while they hold their default, so that a spec that predates them keeps its hash."""

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        for name in self.added_later:
            if getattr(self, name) == type(self).model_fields[name].default:
                data.pop(name, None)
        return data


class ReferenceModel(BaseModel):
    """Base of every domain's reference schema; extra keys are tolerated."""

    model_config = ConfigDict(extra="allow", frozen=True)


@dataclass(frozen=True, slots=True)
class Judgement:
    """The verdict on one response, before termination penalties."""

    score: float
    success: bool
    parsed: bool
    details: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def unparsed(cls, reason: str, **details: Any) -> Judgement:
        """No answer could be extracted in the expected format: no credit."""
        return cls(score=0.0, success=False, parsed=False, details={"reason": reason, **details})

    @classmethod
    def zero(cls, reason: str, **details: Any) -> Judgement:
        """An answer judged to earn nothing (too long, a syntax error, over the budget), the reason
        first in `details`."""
        return cls(score=0.0, success=False, parsed=True, details={"reason": reason, **details})


class InvalidReference(ValueError):
    """The item's reference cannot be scored (unknown task, malformed tests): status `invalid`."""

    def __init__(self, message: str, code: str = "invalid_reference") -> None:
        super().__init__(message)
        self.code = code


class NotJudged(RuntimeError):
    """A service the scorer depends on failed for reasons of its own (a judge endpoint down,
    or slower than its timeout): the item was not judged, status `infra_error` with `code`."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, slots=True)
class ScoreContext:
    """Process-local resources a scorer may use. Built once per worker, never per item."""

    sandbox: Any = None
    """A `sandboxes` backend for domains that execute code; None where none is configured."""
    checker_sandbox: Any = None
    """A second `sandboxes` backend for the code domain's checkers and `program` tests, whose
    sandboxes never fork an untrusted program (`sandboxes.checkers`); None where none is
    configured."""
    reference_key: str | None = None
    """Set per item by the engine: a hash of the reference's canonical JSON (`Item.reference_key`,
    or made by the engine), so equal keys mean equal references and a scorer may memoise
    per-reference work (or a whole verdict) under it."""
    judges: Any = None
    """A `reward_specs.judge.Judges` (the judge endpoints this process may call, their cache
    and limits) for the judge domain; None where none is configured (its items are then
    `infra_error` `judge_unavailable`)."""
    domain_hash: str | None = None
    """Set per item by the engine: the spec's hash of the item's domain (`Spec.domain_hashes`:
    its config, the libraries and its environment's digest), so that a verdict a scorer keeps
    is kept under everything that can change it."""


@dataclass(frozen=True, slots=True)
class Example:
    """A known-good item for the registry-wide invariants: `response` scores 1, "" scores 0."""

    reference: Mapping[str, Any]
    response: str


C = TypeVar("C", bound=DomainConfig)
R = TypeVar("R", bound=ReferenceModel)

ScoreFn = Callable[[str, R, C, ScoreContext], Judgement]
AnswerKeyFn = Callable[[str, C], str | None]
WorkloadFn = Callable[[Mapping[str, Any]], str | None]


@dataclass(frozen=True, slots=True)
class Scorer(Generic[R, C]):
    """One domain's scorer, as registered.

    A domain declares it with `Scorer.from_function`, which reads the reference and config types
    and the description from the score function; the plain constructor takes them explicitly.
    `executor` tells the dispatcher where the work belongs: `process` for CPU-bound verification
    (math-verify's timeouts rely on `signal.alarm`, which only works on a process's main thread),
    `thread` for scorers that mostly wait on something else (a sandbox) and are safe to call from
    several threads of one process.
    """

    domain: str
    config_type: type[C]
    reference_type: type[R]
    score: ScoreFn[R, C]
    examples: Callable[[], list[Example]]
    executor: Literal["process", "thread"] = "process"
    libraries: tuple[str, ...] = ()
    """Distributions whose versions can change a verdict; they enter the spec hash."""
    description: str = ""
    """What the domain rewards, in a line: `from_function` takes the score function's first
    docstring paragraph."""
    answer_key: AnswerKeyFn[C] | None = None
    """What of a (reasoning-stripped) response its judgement depends on, for scorers that can say
    so cheaply: the extracted answer and where it was found, say. Two responses with equal keys
    (and equal references) must get equal judgements, so the service scores one of them: a GRPO
    group's differently worded responses often hold only a few distinct answers. It must be
    pure, never raise, and cost far less than `score`; None (the default, or as a result) means
    the whole response counts."""
    workload: WorkloadFn | None = None
    """A label for what scoring an item costs, read from its raw (unvalidated) reference: the
    puzzle's task, say. Items with equal labels should take alike times to score. The service
    learns each label's typical time and hands the costliest items to its workers first, so that
    one slow item does not finish a batch alone on one core. It only orders work, never changes a
    verdict; it must be pure and cheap, and None (the default, or as a result) means "typical"."""
    forget: Callable[[], None] | None = None
    """Empties what the scorer keeps of its verdicts in this process; the service calls it when
    the domain's environment (its sandbox's) has changed. None: it keeps none."""
    opt_in: bool = False
    """The domain is part of a spec only when the spec names it (its config has no usable
    defaults: the judge's endpoint and model); specs that do not name it keep the hash they had
    before the domain existed, and its items are `invalid` under them."""

    @classmethod
    def from_function(
        cls,
        domain: str,
        score: ScoreFn[R, C],
        examples: Callable[[], list[Example]],
        *,
        executor: Literal["process", "thread"] = "process",
        libraries: tuple[str, ...] = (),
        answer_key: AnswerKeyFn[C] | None = None,
        workload: WorkloadFn | None = None,
        forget: Callable[[], None] | None = None,
        opt_in: bool = False,
    ) -> Scorer[R, C]:
        """The scorer of `score(response, reference: R, config: C, ctx)`: its annotations give the
        reference and config types, the first paragraph of its docstring the description, so
        that neither is stated twice."""
        reference_type, config_type = _annotated_types(domain, score)
        return cls(
            domain=domain,
            config_type=config_type,
            reference_type=reference_type,
            score=score,
            examples=examples,
            executor=executor,
            libraries=libraries,
            description=_first_paragraph(domain, score),
            answer_key=answer_key,
            workload=workload,
            forget=forget,
            opt_in=opt_in,
        )


def _first_paragraph(domain: str, score: ScoreFn[R, C]) -> str:
    doc = inspect.getdoc(score)
    if not doc:
        raise ValueError(f"{domain}: {_name(score)} needs a docstring, the domain's description")
    return " ".join(doc.split("\n\n")[0].split())


def _name(score: ScoreFn[R, C]) -> str:
    return getattr(score, "__qualname__", repr(score))


def _annotated_types(domain: str, score: ScoreFn[R, C]) -> tuple[type[R], type[C]]:
    """The annotations of the reference and config parameters of `score(response, reference,
    config, ctx)`; a TypeError naming the domain where one is missing or of the wrong base."""
    name = _name(score)
    try:
        hints = get_type_hints(score)
    except (NameError, TypeError) as exc:
        raise TypeError(f"{domain}: the annotations of {name} do not resolve: {exc}") from exc
    params = list(inspect.signature(score).parameters)
    if len(params) != 4:
        raise TypeError(f"{domain}: {name} must take (response, reference, config, ctx)")
    found = (hints.get(params[1]), hints.get(params[2]))
    for param, hint, base in zip(params[1:3], found, (ReferenceModel, DomainConfig), strict=True):
        if not (isinstance(hint, type) and issubclass(hint, base)):
            raise TypeError(
                f"{domain}: parameter {param!r} of {name} must be annotated with a "
                f"{base.__name__} subclass, not {hint!r}"
            )
    return cast("tuple[type[R], type[C]]", found)  # R and C are these annotations, checked above
