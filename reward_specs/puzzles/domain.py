"""Puzzles: every Reasoning Gym task, scored with the library's own semantics.

The reference names a task and carries its entry, by value (what a Reasoning Gym dataset, or
`POST /v1/puzzles/{task}/sample`, returned) or as `(config, seed, index)` from which the entry is
regenerated deterministically. The answer is the last `<answer>...</answer>` of the response (the
tag and the fallbacks are spec parameters); `parsed` is false, with the reason, when there is none,
and the score is then 0 (a format failure earns nothing), although a few tasks' `score_answer(None)`
gives 0.01 (countdown, fraction_simplification, puzzle24).

Boxnet and graph colouring are judged by our validators (`reward_specs.puzzles.boxnet`,
`.graph_color`): Reasoning Gym's score for every answer its scorer handles, a defined score where it
crashes, JSON found in fences or prose, and diagnostics naming the step, agent, box, vertex or edge
that broke a rule. Every other task is scored by the task's `score_answer`, so our score is the
library's; `success` is a score of 1 (and, with `strict`, a plan or colouring without violations).

A task scorer that raises is never silent: the answer is judged 0, `details.scorer_exception` says
what was raised (the service counts such answers in /metrics). If the entry's own
gold answer makes the scorer raise too, the task cannot score this entry at all (a broken task or a
broken entry): the item is `invalid`. That probe runs once per entry and is cached.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Generic, Literal, TypeVar

from pydantic import Field, ValidationError, model_validator

from reward_specs import scorer
from reward_specs.caches import Cache
from reward_specs.canonical import canonical_text
from reward_specs.extract import Fallback
from reward_specs.puzzles import boxnet, graph_color, gym
from reward_specs.puzzles.answers import extract_answer, last_json_block, locate_json

__all__ = [
    "SCORER",
    "PuzzleConfig",
    "PuzzleReference",
    "puzzle_answer_key",
    "puzzle_workload",
    "score_puzzle",
]

log = logging.getLogger(__name__)


class PuzzleConfig(scorer.DomainConfig):
    answer_tag: str = Field("answer", pattern=r"^[A-Za-z][A-Za-z0-9_-]*$")
    """The answer is the content of the last `<answer_tag>...</answer_tag>` (Reasoning Gym's
    format)."""
    fallbacks: tuple[Fallback, ...] = ()
    """Where else to look when the tag is missing, in order: `boxed` (the last `\\boxed{}`),
    `answer_is` ("the answer is X"), `json` (the last fenced block or JSON value). None by default:
    the answer format is part of what is rewarded."""
    strict: bool = False
    """Boxnet and graph colouring: `success` also requires a plan or colouring without any
    violation (no skipped or malformed action, a JSON object keyed by every vertex). The score is
    unchanged."""
    json_recovery: bool = True
    """Boxnet and graph colouring: take JSON from a fenced block or from prose around it when the
    answer is not JSON as a whole (a malformed value is never partly rescued)."""
    max_answer_chars: int = Field(100_000, ge=1)
    """A longer extracted answer is judged 0 without being scored (a cheap guard)."""
    json_block_tasks: tuple[str, ...] = ()
    """Tasks whose answer is the last ```json fenced block of the response (what their question
    asks for: Boxnet's), read instead of the tag and with no fallback; every other task's is the
    tag's. One target per task, which the prompt of `POST /v1/puzzles/{task}/sample` names."""
    partial_credit: bool = True
    """Off: the floors that pay a wrong answer go: Boxnet's 0.05 for any plan, graph colouring's
    0.01 for a wrong colouring, and Reasoning Gym's containment credit (an answer that contains
    the gold among other text earns len(gold)/len(answer), so listing every candidate pays),
    each scored 0; a task's own graded credit is kept."""

    added_later: ClassVar[frozenset[str]] = frozenset({"json_block_tasks", "partial_credit"})

    @model_validator(mode="after")
    def _one_target(self) -> PuzzleConfig:
        if self.json_block_tasks and self.fallbacks:
            raise ValueError("json_block_tasks reads one target per task: give no fallbacks")
        return self


class PuzzleReference(scorer.ReferenceModel):
    task: str = Field(..., min_length=1)
    entry: dict[str, Any] | None = None
    """A Reasoning Gym entry (question, answer, metadata), e.g. from /v1/puzzles/{task}/sample."""
    config: dict[str, Any] = Field(default_factory=dict)
    """The dataset config: with `seed`/`index` to regenerate the entry; with `entry` (optional),
    the config the entry was generated with, when the task's scorer depends on it."""
    seed: int | None = None
    index: int | None = Field(None, ge=0)
    seed_space: Literal[2] | None = None
    """How `seed` and `index` name a Reasoning Gym entry: absent, the dataset seeded `seed` (where
    seeds overlap: (seed 0, index 5) is (seed 5, index 0)); 2, as `POST /v1/puzzles/{task}/sample`
    writes it, the dataset seeded `seed * 2**32`, so that no two (seed, index) share an entry
    (`gym.dataset_seed`): then `seed` >= 0 and `index` < 2**32."""

    @model_validator(mode="after")
    def _entry_or_coordinates(self) -> PuzzleReference:
        if self.entry is None and (self.seed is None or self.index is None):
            raise ValueError("give either `entry`, or `seed` and `index` (with `config`)")
        if self.entry is not None and (self.seed is not None or self.seed_space is not None):
            raise ValueError("give either `entry`, or `seed` and `index`, not both")
        one_seeds_range = (self.seed or 0) >= 0 and (self.index or 0) < gym.SEED_STRIDE
        if self.seed_space is not None and not one_seeds_range:
            raise ValueError("seed space 2 takes a seed >= 0 and an index below 2**32")
        if self.entry is not None and not isinstance(self.entry.get("metadata", {}), dict):
            raise ValueError("entry.metadata must be an object")
        return self


# ---------------------------------------------------------------- gold-answer probes

_PROBES: Cache[tuple[str, str], str] = Cache("puzzles.gold_probes", 4096)
"""(task, entry key) -> what the scorer raised on the entry's gold answer; "" if nothing."""


def _gold_failure(task: str, entry_key: str, dataset: Any, entry: dict[str, Any]) -> str | None:
    """Does the scorer also raise on the entry's own gold answer? Its message if so (cached).

    Entries without a gold answer are probed with the empty answer.
    """
    key = (task, entry_key)
    known = _PROBES.get(key)
    if known is not None:
        return known or None
    gold = entry.get("answer")
    probe = gold if isinstance(gold, str) else ""
    failure = ""
    try:
        dataset.score_answer(probe, entry)
    except Exception as exc:  # the verdict "broken", logged with its traceback
        log.warning("puzzle task %s raises on an entry's gold answer", task, exc_info=True)
        failure = f"{type(exc).__name__}: {exc}"[:300]
    _PROBES.put(key, failure)
    return failure or None


# ---------------------------------------------------------------- entries


EntryKey = Callable[[], str]


def _resolve(reference: PuzzleReference) -> tuple[str, dict[str, Any], Any, EntryKey]:
    """(scoring task, entry, dataset whose score_answer applies, the entry's cache key)."""
    task, config = reference.task, reference.config
    gym.task_info(task)  # unknown task -> InvalidReference
    key: EntryKey
    if reference.entry is not None:
        entry = reference.entry
        by_value = entry

        def key() -> str:
            return canonical_text(by_value, default=str)

    elif reference.seed is not None and reference.index is not None:
        index = reference.index
        entry = gym.regenerate(task, config, reference.seed, index, reference.seed_space)
        seed = gym.dataset_seed(reference.seed, reference.seed_space)

        def key() -> str:  # one entry, one key, whichever seed space named it
            return f"{gym.canonical_config(config)}|{seed}|{index}"

    else:  # PuzzleReference's validator has refused this already
        raise scorer.InvalidReference("give either `entry`, or `seed` and `index`")
    scoring_task = task
    if task == "composite":
        source = (entry.get("metadata") or {}).get("source_dataset")
        if not isinstance(source, str):
            raise scorer.InvalidReference("composite entry without metadata.source_dataset")
        gym.task_info(source)
        scoring_task = source
        config = gym.composite_part_config(config, source)
    if reference.entry is not None:
        entry = gym.restore_entry(scoring_task, entry)
    if "metadata" not in entry:
        raise scorer.InvalidReference(f"task {task!r}: the entry has no metadata")
    return scoring_task, entry, gym.scoring_dataset(scoring_task, config), key


# ---------------------------------------------------------------- validators


def _json_answer(answer: str, accepts: Any, config: PuzzleConfig) -> tuple[Any, str] | None:
    if config.json_recovery:
        return locate_json(answer, accepts)
    try:
        return json.loads(answer), "json"
    except (ValueError, RecursionError):
        return None


def _violations(verdict: boxnet.Verdict | graph_color.Verdict) -> dict[str, Any]:
    return {"violations": verdict.violations, "violation_count": verdict.violation_count}


def _graph_color(
    puzzle: graph_color.GraphPuzzle, value: Any, config: PuzzleConfig
) -> scorer.Judgement:
    verdict = graph_color.validate_colouring(puzzle, value)
    return scorer.Judgement(
        score=verdict.score if config.partial_credit or verdict.valid else 0.0,
        success=verdict.strict_valid if config.strict else verdict.valid,
        parsed=True,
        details={
            "valid": verdict.valid,
            "strict_valid": verdict.strict_valid,
            **_violations(verdict),
        },
    )


def _boxnet(state: dict[str, list[str]], value: Any, config: PuzzleConfig) -> scorer.Judgement:
    verdict = boxnet.validate_plan(state, value)
    if not verdict.is_plan:
        return scorer.Judgement.unparsed("not_a_plan", violations=verdict.violations)
    score = verdict.score
    if not config.partial_credit:  # the share of boxes on target, without the floor
        score = (verdict.boxes - verdict.remaining) / verdict.boxes if verdict.boxes else 1.0
    facts = {"boxes": verdict.boxes, "remaining": verdict.remaining, "steps": verdict.steps}
    return scorer.Judgement(
        score=score,
        success=verdict.solved and (verdict.violation_count == 0 or not config.strict),
        parsed=True,
        details={**facts, **_violations(verdict)},
    )


S = TypeVar("S")


@dataclass(frozen=True, slots=True)
class _Validator(Generic[S]):
    """One of our own validators, in the frame they share: read the part of the entry it needs
    (an invalid entry if that fails), find the answer's JSON (unparsed if none), check it."""

    part: str
    """The entry's part `read` takes, named in an invalid entry's message."""
    read: Callable[[dict[str, Any]], S]
    accepts: Callable[[Any], bool]
    """Whether a JSON value found in the answer is one this validator takes."""
    check: Callable[[S, Any, PuzzleConfig], scorer.Judgement]
    """(what `read` gave, the answer's JSON value, config) -> the verdict, with the validator's own
    facts in `details`."""

    def __call__(
        self, answer: str, entry: dict[str, Any], config: PuzzleConfig, details: dict[str, Any]
    ) -> scorer.Judgement:
        try:
            state = self.read(entry)
        except ValidationError as exc:
            raise scorer.InvalidReference(f"{self.part}: {exc}"[:500]) from None
        located = _json_answer(answer, self.accepts, config)
        if located is None:
            return scorer.Judgement.unparsed("no_json", **details)
        value, source = located
        checked = self.check(state, value, config)
        if not checked.parsed:  # a JSON value that is no answer: its reason first, as in unparsed()
            return replace(checked, details={"reason": None, **details, **checked.details})
        return replace(checked, details={**details, "json_source": source, **checked.details})


_VALIDATORS: dict[str, _Validator[Any]] = {
    "boxnet": _Validator(
        "boxnet entry: metadata",
        lambda entry: boxnet.BoxnetState.model_validate(entry["metadata"]).initial_state,
        boxnet.accepts,
        _boxnet,
    ),
    "graph_color": _Validator(
        "graph_color entry: metadata.puzzle",
        lambda entry: graph_color.GraphPuzzle.model_validate(entry["metadata"].get("puzzle")),
        graph_color.accepts,
        _graph_color,
    ),
}

VALIDATED_TASKS = frozenset(_VALIDATORS)
"""Tasks judged by our own validators rather than the task's `score_answer`."""


# ---------------------------------------------------------------- the scorer


def _library_score(
    task: str,
    answer: str,
    entry: dict[str, Any],
    dataset: Any,
    key: EntryKey,
    details: dict[str, Any],
    partial_credit: bool = True,
) -> scorer.Judgement:
    try:
        raw = dataset.score_answer(answer, entry)
        score = float(raw)
        if not math.isfinite(score) or not 0.0 <= score <= 1.0:
            raise ValueError(f"score_answer returned {raw!r}, not a number in [0, 1]")
        if not partial_credit and score < 1.0 and gym.uses_containment_credit(dataset):
            score = 0.0  # containment credit: the gold inside a longer answer
    except Exception as exc:  # in details, counted by the service, judged 0 (invalid if broken)
        failure = _gold_failure(task, key(), dataset, entry)
        if failure is not None:
            raise scorer.InvalidReference(
                f"task {task!r} cannot score this entry: its scorer raises on the gold answer "
                f"too ({failure})",
                "broken_task",
            ) from exc
        log.info("task %s's scorer raised on an answer", task, exc_info=True)
        return scorer.Judgement(
            score=0.0,
            success=False,
            parsed=True,
            details={**details, "scorer_exception": f"{type(exc).__name__}: {exc}"[:500]},
        )
    return scorer.Judgement(score=score, success=score == 1.0, parsed=True, details=details)


_VERDICTS: Cache[tuple[str, str, PuzzleConfig], scorer.Judgement] = Cache("puzzles.verdicts", 65536)
"""(reference key, extracted answer, config) -> verdict: a GRPO group's 16 responses to one
puzzle hold only a few distinct answers. Scorers are deterministic in (entry, answer)."""


def score_puzzle(
    response: str, reference: PuzzleReference, config: PuzzleConfig, ctx: scorer.ScoreContext
) -> scorer.Judgement:
    """Every Reasoning Gym task by name, scored by the library's score_answer (our own validators
    for boxnet and graph_color); continuous."""
    answer, source = find_answer(response, reference.task, config)
    memo_key = (ctx.reference_key, answer, config) if ctx.reference_key and answer else None
    if memo_key is not None:
        known = _VERDICTS.get(memo_key)
        if known is not None and known.details.get("source") == source:
            return scorer.Judgement(known.score, known.success, known.parsed, dict(known.details))
    judgement = _score_answer(answer, source, reference, config)
    if memo_key is not None:
        _VERDICTS.put(memo_key, judgement)
    return judgement


def find_answer(response: str, task: str, config: PuzzleConfig) -> tuple[str | None, str]:
    """(answer, where it came from) for `task` under `config`: its one target, the last
    occurrence winning."""
    if task in config.json_block_tasks:
        block = last_json_block(response)
        return block, "json_block" if block is not None else "none"
    return extract_answer(response, config.answer_tag, config.fallbacks)


def puzzle_answer_key(response: str, config: PuzzleConfig) -> str | None:
    """All that `score_puzzle` reads of a response: the extracted answer and where it was found.

    Only for the tag alone (the default), which is found in one linear pass: the service computes
    keys in its own process, outside the workers' timeouts, and the fallbacks' scans (JSON above
    all) are not that cheap on hostile text. With fallbacks, the whole response is the key.
    """
    if config.fallbacks or config.json_block_tasks:  # the target depends on the task
        return None
    answer, source = extract_answer(response, config.answer_tag)
    return "none" if answer is None else f"{source}:{answer}"


def puzzle_workload(reference: Mapping[str, Any]) -> str | None:
    """The task: what a puzzle costs to score depends on it (sympy-backed tasks cost far more than
    most others)."""
    task = reference.get("task")
    return task if isinstance(task, str) else None


def _score_answer(
    answer: str | None, source: str, reference: PuzzleReference, config: PuzzleConfig
) -> scorer.Judgement:
    task, entry, dataset, key = _resolve(reference)
    if answer is None:
        return scorer.Judgement.unparsed("no_answer", task=task)
    if len(answer) > config.max_answer_chars:
        return scorer.Judgement.zero("answer_too_long", task=task)
    details: dict[str, Any] = {"task": task, "source": source, "extracted": answer[:2000]}
    validator = _VALIDATORS.get(task)
    if validator is not None:
        return validator(answer, entry, config, details)
    return _library_score(task, answer, entry, dataset, key, details, config.partial_credit)


def _examples() -> list[scorer.Example]:
    colouring = gym.entry_for("graph_color", {}, 7, 0)["metadata"]["possible_answer"]
    return [
        scorer.Example(
            {"task": "basic_arithmetic", "config": {}, "seed": 1, "index": 0},
            "<answer>" + str(gym.entry_for("basic_arithmetic", {}, 1, 0)["answer"]) + "</answer>",
        ),
        scorer.Example(
            {"task": "graph_color", "config": {}, "seed": 7, "index": 0},
            f"<answer>{json.dumps(colouring)}</answer>",
        ),
        scorer.Example(
            {
                "task": "boxnet",
                "entry": {
                    "question": "(abridged)",
                    "answer": None,
                    "metadata": {
                        "initial_state": {"0.5_0.5": ["box_red"], "0.5_1.5": ["target_red"]}
                    },
                },
            },
            '<answer>```json\n[{"Agent[0.5, 0.5]": "move(box_red, square[0.5, 1.5])"}, '
            '{"Agent[0.5, 1.5]": "move(box_red, target_red)"}]\n```</answer>',
        ),
    ]


SCORER = scorer.Scorer.from_function(
    "puzzle",
    score_puzzle,
    _examples,
    libraries=("reasoning-gym", "sympy", "numpy"),
    answer_key=puzzle_answer_key,
    workload=puzzle_workload,
)
