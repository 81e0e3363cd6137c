"""The uvicorn class `service.http.header_limit` extends is the one it was written against.

`HeaderLimited` subclasses uvicorn's internal `HttpToolsProtocol` (the module docstring says
why). Its methods are no public contract, so uvicorn is pinned to one minor release and this
test holds a fingerprint of each method overridden: its signature and a digest of its source.
A uvicorn release that changes any of them fails here; read the new methods, adjust
`HeaderLimited` if need be (tests/test_limits.py checks the 431 end to end), then update the
fingerprint and the pin together.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import inspect
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

from service.http.header_limit import EXTENDED, header_limited_http

ROOT = Path(__file__).resolve().parent.parent

FINGERPRINT = {
    "data_received": ("(self, data: 'bytes') -> 'None'", "010a7ae59a5d3b1a"),
    "on_header": ("(self, name: 'bytes', value: 'bytes') -> 'None'", "1e86ebb6cea0458c"),
    "on_headers_complete": ("(self) -> 'None'", "1ea8589acfad92d8"),
    "on_message_begin": ("(self) -> 'None'", "96d377fdc7c2baef"),
    "on_url": ("(self, url: 'bytes') -> 'None'", "37be44e962b04ca8"),
    "send_400_response": ("(self, msg: 'str') -> 'None'", "ae5a4a3782b646fd"),
}
"""Method -> (signature, first 16 hex digits of the SHA-256 of its source), uvicorn 0.55."""


def _extended() -> type:
    module, _, name = EXTENDED[0].rpartition(".")
    found: type = getattr(importlib.import_module(module), name)
    return found


def fingerprint(cls: type, methods: tuple[str, ...]) -> dict[str, tuple[str, str]]:
    prints = {}
    for name in methods:
        method = getattr(cls, name)
        digest = hashlib.sha256(inspect.getsource(method).encode()).hexdigest()[:16]
        prints[name] = (str(inspect.signature(method)), digest)
    return prints


def test_the_extended_methods_are_the_ones_written_against() -> None:
    assert fingerprint(_extended(), EXTENDED[1]) == FINGERPRINT


def test_every_override_is_fingerprinted() -> None:
    protocol = header_limited_http(8192)
    assert protocol.__mro__[1] is _extended()
    overridden = {
        name
        for name, value in vars(protocol).items()
        if callable(value) and name in vars(_extended())
    }
    assert overridden == set(EXTENDED[1]) == set(FINGERPRINT)


def test_uvicorn_is_pinned_to_the_release_fingerprinted() -> None:
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    (pin,) = [Requirement(d) for d in dependencies if Requirement(d).name == "uvicorn"]
    assert pin.specifier, "uvicorn must be pinned: service/http/header_limit.py extends it"
    installed = importlib.metadata.version("uvicorn")
    assert pin.specifier.contains(installed), (pin, installed)
    upper = [s for s in pin.specifier if s.operator == "<"]
    assert upper, f"{pin}: no upper bound"
