"""The OpenAPI document: FastAPI's, plus what only this server knows (its spec names, its item
limit, the bounds of `POST /v1/run`) and the score request's schema, which FastAPI does not see
(the score routes read their bodies themselves, `service.work.ingest`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from service.http.auth import declare_security
from service.http.examples import EXAMPLE_ITEMS
from service.schemas import ScoreRequest
from service.settings import Settings
from service.state import AppState

__all__ = ["server_openapi"]


def server_openapi(app: FastAPI, state: AppState) -> Callable[[], dict[str, Any]]:
    """`app.openapi`: the generated schema, plus the score request's and the server's facts."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(
                title=app.title, version=app.version, summary=app.summary, routes=app.routes
            )
            components = schema.setdefault("components", {}).setdefault("schemas", {})
            _add_score_request(components, sorted(state.specs), state.settings)
            _publish_run_bounds(components, state.settings)
            declare_security(schema, state.settings)
            app.openapi_schema = schema
        return app.openapi_schema

    return openapi


def _add_score_request(components: dict[str, Any], specs: list[str], settings: Settings) -> None:
    """`ScoreRequest` joins the components, where the score routes' operations point, with an
    example per domain, this server's spec names and its item limit."""
    body = ScoreRequest.model_json_schema(ref_template="#/components/schemas/{model}")
    components.update(body.pop("$defs", {}))
    components["ScoreRequest"] = body
    # An item's unknown field makes that item `invalid`, not the request a 422.
    components["ScoreItem"].pop("additionalProperties", None)
    components["ScoreRequest"]["examples"] = [
        {"items": [{"id": f"{domain}-example", **item}]} for domain, item in EXAMPLE_ITEMS.items()
    ]
    request = components["ScoreRequest"]["properties"]
    for option in request["spec"]["anyOf"]:
        if option.get("type") == "string":
            option["enum"] = specs
    request["items"]["maxItems"] = settings.max_items_per_request


def _publish_run_bounds(components: dict[str, Any], settings: Settings) -> None:
    """A run's `limits` may ask for at most this server's bounds, and `files` holds at most
    `run.max_files` entries: said in the schema, where a client (or a fuzzer) reads them."""
    run = settings.run
    bounds = {"cpu_s": run.cpu_s, "wall_s": run.wall_s, "memory_mb": run.memory_mb}
    bounds["output_bytes"] = run.output_bytes
    limits = components.get("RunLimitsBody", {}).get("properties", {})
    for name, bound in bounds.items():
        for option in limits.get(name, {}).get("anyOf", []):
            if option.get("type") in ("number", "integer"):
                option["maximum"] = bound
    files = components.get("RunBody", {}).get("properties", {}).get("files", {})
    for option in files.get("anyOf", []):
        if option.get("type") == "object":
            option["maxProperties"] = run.max_files
