"""Dependency aliases for the routes."""

from __future__ import annotations

from typing import Annotated, Any, NoReturn

from fastapi import Depends, HTTPException, Request

from reward_specs import Spec, codes
from service.state import AppState
from service.work.ingest import ScoreBody

__all__ = ["StateDep", "check_item_count", "field_error", "resolve_spec", "spec_named"]


async def _state(request: Request) -> AppState:
    # async: a sync dependency would run on the thread pool every sync route shares
    state: AppState = request.app.state.proctor
    return state


StateDep = Annotated[AppState, Depends(_state)]


def field_error(loc: list[str | int], message: str, kind: str, status: int = 422) -> NoReturn:
    """Refuse the whole request, naming the offending field like FastAPI's own 422s do."""
    detail: list[dict[str, Any]] = [{"loc": loc, "msg": message, "type": kind}]
    raise HTTPException(status_code=status, detail=detail)


def resolve_spec(state: AppState, body: ScoreBody) -> Spec:
    """The request's spec, after the request-wide checks (unknown spec, too many items)."""
    spec = spec_named(state, body.spec, ["body", "spec"])
    check_item_count(state, len(body.items), ["body", "items"])
    return spec


def spec_named(state: AppState, name: str | None, loc: list[str | int]) -> Spec:
    """The spec `name` (the server's default for None), or the 422 naming `loc`."""
    name = state.settings.default_spec if name is None else name
    spec = state.specs.get(name)
    if spec is None:
        known = ", ".join(sorted(state.specs))
        field_error(loc, f"unknown spec {name!r}; this server knows: {known}", codes.UNKNOWN_SPEC)
    return spec


def check_item_count(state: AppState, count: int, loc: list[str | int]) -> None:
    """422 naming `loc` past `max_items_per_request`, for every route that scores items."""
    limit = state.settings.max_items_per_request
    if count > limit:
        field_error(
            loc, f"{count} items; this server accepts at most {limit} per request", "too_many_items"
        )
