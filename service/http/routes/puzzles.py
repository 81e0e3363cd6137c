"""GET /v1/puzzles and POST /v1/puzzles/{task}/sample: Reasoning Gym tasks for trainers.

A trainer builds its puzzle mixture from the service and scores it with the same semantics: each
sampled entry can be sent back as a `puzzle` reference, by value (`{"task", "entry"}`) or by its
coordinates (`{"task", "config", "seed", "index", "seed_space": 2}`, regenerated identically; seed
space 2 gives every (seed, index) an entry of its own, `reward_specs.puzzles.gym`). Generation and
validation live in `reward_specs`; sampling runs in a child process (`service.work.sampling`),
never in the API's, and is abandoned as soon as its client disconnects.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, HTTPException, Path, Request
from pydantic import BaseModel, ConfigDict, Field

from reward_specs import InvalidReference
from reward_specs.puzzles import (
    MAX_SAMPLE_COUNT,
    SEED_STRIDE,
    VALIDATED_TASKS,
    PuzzleConfig,
    task_info,
    task_names,
)
from service.core.tenancy import tenant
from service.http.deps import StateDep, spec_named
from service.work.sampling import SampleCall

__all__ = ["router"]

router = APIRouter(tags=["puzzles"])
log = logging.getLogger(__name__)


DEFAULT_SAMPLE_COUNT = 16
"""Entries a sample call gives when its body names no `count`."""


class PuzzleTask(BaseModel):
    task: str
    category: str
    default_config: dict[str, Any]
    """The dataset's config with its defaults (everything but the seed)."""
    default_config_valid: bool
    """False where the task needs a config to be usable (`composite` needs `datasets`)."""
    validator: Literal["proctor", "reasoning_gym"]
    """Who judges answers: our own validator (Boxnet, graph colouring) or the task's scorer."""


class PuzzleList(BaseModel):
    tasks: list[PuzzleTask]
    max_sample_count: int


class SampleRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    config: dict[str, Any] = Field(default_factory=dict)
    """Dataset config overrides; unknown or refused fields are a 422 naming them."""
    seed: int = Field(0, ge=0)
    """Entries of different seeds never share an entry (seed space 2: the dataset seeded
    `seed * 2**32`)."""
    count: int = Field(
        DEFAULT_SAMPLE_COUNT,
        ge=1,
        le=MAX_SAMPLE_COUNT,
        description=f"How many entries (default {DEFAULT_SAMPLE_COUNT}, at most "
        "`max_sample_count` of GET /v1/puzzles).",
    )
    start: int = Field(0, ge=0, le=SEED_STRIDE - MAX_SAMPLE_COUNT)
    """Index of the first entry: entries `start .. start+count-1` of the dataset. At most
    2**32 - `max_sample_count`, so that every entry is within one seed's range (indices below
    2**32) whatever the count: a bound the published schema states."""
    spec: str | None = None
    """The spec whose puzzle scorer will judge the answers (default: the server's): the prompt
    asks for the format it reads."""


class PuzzleEntry(BaseModel):
    index: int
    question: str
    messages: list[dict[str, str]]
    """The full prompt a model must see, as a chat: the system prompt (the answer format the
    spec's scorer reads for this task), then the question."""
    answer: str | None
    """The gold answer where the task has one (Boxnet and graph colouring have none)."""
    metadata: dict[str, Any]
    reference: dict[str, Any]
    """A `puzzle` reference for /v1/score: the entry's coordinates, or the entry by value for the
    few tasks whose generation depends on the process's hash seed."""


class SampleResponse(BaseModel):
    task: str
    spec: str
    config: dict[str, Any]
    seed: int
    entries: list[PuzzleEntry]


_STATUS = {"unknown_task": 404}
_CLIENT_GONE = 499
"""Logged (never sent: nobody is there) for a sampling call abandoned by its client."""


def _refuse(exc: InvalidReference) -> HTTPException:
    return HTTPException(
        status_code=_STATUS.get(exc.code, 422), detail={"code": exc.code, "message": str(exc)}
    )


@router.get("/v1/puzzles", response_model=PuzzleList, summary="Reasoning Gym tasks")
async def list_puzzles() -> PuzzleList:
    tasks = []
    for name in task_names():
        info = task_info(name)
        tasks.append(
            PuzzleTask(
                task=info.task,
                category=info.category,
                default_config=info.default_config,
                default_config_valid=info.default_config_valid,
                validator="proctor" if name in VALIDATED_TASKS else "reasoning_gym",
            )
        )
    return PuzzleList(tasks=tasks, max_sample_count=MAX_SAMPLE_COUNT)


@router.post(
    "/v1/puzzles/{task}/sample",
    response_model=SampleResponse,
    summary="Generate entries of a task",
    description="Entries `start .. start+count-1` of the task's dataset for `config` and "
    "`seed`, exactly as `reasoning_gym.create_dataset(task, **config, seed=seed * 2**32)` "
    "produces them (seed space 2: no two (seed, index) share an entry), "
    "each with the full prompt (`messages`: the system prompt asking for the answer format that "
    "`spec`'s scorer reads, then the question). "
    "An unknown task is a 404; a config the dataset refuses, a 422 naming it. The body is "
    f"optional: without one, the first {DEFAULT_SAMPLE_COUNT} entries of the default config with "
    f"seed 0; `count` defaults to {DEFAULT_SAMPLE_COUNT}.",
    responses={404: {"description": "Unknown task"}, 422: {"description": "Bad config"}},
)
async def sample(
    request: Request,
    state: StateDep,
    body: Annotated[SampleRequest | None, Body()] = None,
    task: str = Path(..., description="A task of GET /v1/puzzles"),
) -> SampleResponse:
    body = body or SampleRequest()  # no body: the defaults
    spec = spec_named(state, body.spec, ["body", "spec"])
    config = spec.domains.get("puzzle", PuzzleConfig())
    if not isinstance(config, PuzzleConfig):
        config = PuzzleConfig()
    call = SampleCall(task, body.config, body.seed, body.count, body.start, config)
    try:
        entries = await _unless_disconnected(request, state.sampler.sample(tenant(), call))
    except InvalidReference as exc:
        raise _refuse(exc) from None
    return SampleResponse(
        task=task,
        spec=spec.name,
        config=body.config,
        seed=body.seed,
        entries=[
            PuzzleEntry(
                index=e["index"],
                question=e.get("question", ""),
                messages=e["messages"],
                answer=e.get("answer"),
                metadata=e.get("metadata") or {},
                reference=e["reference"],
            )
            for e in entries
        ],
    )


async def _unless_disconnected(request: Request, work: Any) -> list[dict[str, Any]]:
    """Await `work` (a coroutine), cancelling it if the client disconnects first; a request
    abandoned that way is answered with nothing (an HTTPException nobody reads)."""
    task: asyncio.Task[list[dict[str, Any]]] = asyncio.ensure_future(work)
    gone = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait({task, gone}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:  # the server is stopping: so does the work
        task.cancel()
        raise
    finally:
        gone.cancel()
    if not task.done():
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        log.info("puzzle sampling abandoned: the client disconnected")
        raise HTTPException(status_code=_CLIENT_GONE, detail="client disconnected")
    return task.result()


async def _disconnected(request: Request) -> None:
    """Return once the client has gone (the body was read before the route ran)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass
