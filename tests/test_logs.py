"""Log lines name the request they concern: the id a caller sends in X-Request-ID (or a new
one) comes back in the response header and stands on every line logged while serving it, as
text or as one JSON object per line (`log_format`)."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
from fastapi import APIRouter, FastAPI
from fastapi.testclient import TestClient

from service.core.logs import configure_logging, request_id
from service.main import create_app
from service.settings import Settings


@pytest.fixture
def captured() -> Iterator[io.StringIO]:
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    stream = io.StringIO()
    yield stream
    root.handlers[:] = saved[0]
    root.setLevel(saved[1])


def _app_logging_a_line() -> FastAPI:
    """The service's app (not started: no workers) with one more route, which logs a line."""
    app = create_app(Settings(workers=1))
    router = APIRouter()

    @router.get("/logs-a-line")
    def logs_a_line() -> dict[str, str | None]:
        logging.getLogger("proctor.test").warning("scoring %d items", 3)
        return {"request_id": request_id()}

    app.include_router(router)
    return app


def _lines(stream: io.StringIO, fmt: str) -> None:
    configure_logging("INFO", fmt)
    handler = logging.getLogger().handlers[0]
    assert isinstance(handler, logging.StreamHandler)
    handler.setStream(stream)


@pytest.mark.parametrize("fmt", ["json", "text"])
def test_a_line_logged_for_a_request_names_its_id(captured: io.StringIO, fmt: str) -> None:
    _lines(captured, fmt)
    client = TestClient(_app_logging_a_line())
    given = client.get("/logs-a-line", headers={"x-request-id": "trainer-step-7"})
    made = client.get("/logs-a-line")
    assert given.headers["x-request-id"] == given.json()["request_id"] == "trainer-step-7"
    new = made.headers["x-request-id"]
    assert new and new == made.json()["request_id"] and new != "trainer-step-7"
    lines = [line for line in captured.getvalue().splitlines() if "scoring 3 items" in line]
    assert len(lines) == 2
    if fmt == "json":
        parsed = [json.loads(line) for line in lines]
        assert [p["request_id"] for p in parsed] == ["trainer-step-7", new]
        assert parsed[0]["level"] == "warning" and parsed[0]["logger"] == "proctor.test"
    else:
        assert "[trainer-step-7] scoring 3 items" in lines[0]
        assert f"[{new}] scoring 3 items" in lines[1]


def test_a_request_id_that_is_not_a_plain_token_is_replaced(captured: io.StringIO) -> None:
    _lines(captured, "json")
    forged = 'x" {"forged": 1}'
    reply = TestClient(_app_logging_a_line()).get("/logs-a-line", headers={"x-request-id": forged})
    assert reply.headers["x-request-id"] != forged
    assert all("forged" not in line for line in captured.getvalue().splitlines())


def test_a_line_outside_any_request_has_none(captured: io.StringIO) -> None:
    _lines(captured, "json")
    logging.getLogger("proctor.test").error("the queue is unreachable")
    (line,) = [json.loads(x) for x in captured.getvalue().splitlines()]
    assert "request_id" not in line and line["message"] == "the queue is unreachable"
    logging.getLogger("proctor.test").error("batch lost", extra={"request_id": "r-1"})
    assert json.loads(captured.getvalue().splitlines()[1])["request_id"] == "r-1"
