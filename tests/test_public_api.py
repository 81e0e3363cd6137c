"""Each package's public surface is what its `__all__` says (the httpx check): every listed name
exists, none is listed twice, and every public name defined in the package (in it or in one of
its modules) is listed, so that nothing becomes public by accident."""

from __future__ import annotations

import importlib
import types
from typing import get_args

import pytest

from proctor_client import _models as client
from reward_specs import Status
from service import schemas
from service.work import runs

PACKAGES = ["reward_specs", "sandboxes", "service.dispatch", "proctor_client"]


@pytest.mark.parametrize("name", PACKAGES)
def test_all_lists_exactly_the_public_names(name: str) -> None:
    package = importlib.import_module(name)
    listed = package.__all__
    assert len(set(listed)) == len(listed)
    for attribute in listed:
        assert hasattr(package, attribute), f"{name}.{attribute} is listed but missing"
    public = {
        attribute
        for attribute, value in vars(package).items()
        if not attribute.startswith("_")
        and not isinstance(value, types.ModuleType)
        and str(getattr(value, "__module__", "")).startswith(name)
    }
    assert public - set(listed) == set(), f"{name} exports unlisted names"


def test_the_client_s_copies_of_the_wire_literals_agree() -> None:
    """The client never imports the service, so it keeps its own copies of the wire's literals;
    they must say what the service says."""
    assert get_args(client.Status) == get_args(Status)
    assert get_args(client.JobState) == get_args(schemas.JobState)
    assert get_args(client.FinishReason) == get_args(schemas.FinishReason)
    assert get_args(client.RunStatus) == get_args(runs.RunStatus)
