"""Dependency aliases for the routes."""

from __future__ import annotations

from typing import Annotated, Any, NoReturn

from fastapi import Depends, HTTPException, Request

from reward_specs import Spec
from service.ingest import ScoreBody
from service.state import AppState

__all__ = ["StateDep", "field_error", "resolve_spec"]


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
    name = state.settings.default_spec if body.spec is None else body.spec
    spec = state.specs.get(name)
    if spec is None:
        known = ", ".join(sorted(state.specs))
        field_error(
            ["body", "spec"], f"unknown spec {name!r}; this server knows: {known}", "unknown_spec"
        )
    limit = state.settings.max_items_per_request
    if len(body.items) > limit:
        field_error(
            ["body", "items"],
            f"{len(body.items)} items; this server accepts at most {limit} per request",
            "too_many_items",
        )
    return spec
