"""`reward_specs.lazy`: a package whose `__init__` waits until a name it defines is read."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from reward_specs.lazy import lazy_import


@pytest.fixture
def toy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Package `toy_pkg`: its `__init__` counts its runs; `toy_pkg.sub.leaf` imports a sibling."""
    package = tmp_path / "toy_pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text(
        "import builtins\nbuiltins.toy_runs = getattr(builtins, 'toy_runs', 0) + 1\nNAME = 'toy'\n"
    )
    (package / "helper.py").write_text("VALUE = 7\n")
    (package / "sub" / "__init__.py").write_text("SUB = 1\n")
    (package / "sub" / "leaf.py").write_text("from toy_pkg import helper\nLEAF = helper.VALUE\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield package
    for name in [n for n in sys.modules if n == "toy_pkg" or n.startswith("toy_pkg.")]:
        del sys.modules[name]
    import builtins

    builtins.__dict__.pop("toy_runs", None)


def test_submodules_import_without_the_package_init(toy: Path) -> None:
    import builtins

    leaf = lazy_import("toy_pkg.sub.leaf", defer_package_init=True)
    assert leaf.LEAF == 7
    assert getattr(builtins, "toy_runs", 0) == 0
    import toy_pkg

    assert toy_pkg.helper.VALUE == 7  # a submodule: still no __init__
    assert getattr(builtins, "toy_runs", 0) == 0
    assert toy_pkg.NAME == "toy"  # a name the __init__ defines: it runs, once
    assert toy_pkg.NAME == "toy"
    assert builtins.toy_runs == 1
    assert toy_pkg.sub.leaf.LEAF == 7
    assert type(toy_pkg) is type(sys)


def test_a_package_already_imported_is_left_as_it_is(toy: Path) -> None:
    import builtins

    import toy_pkg

    leaf = lazy_import("toy_pkg.sub.leaf", defer_package_init=True)
    assert leaf.LEAF == 7
    assert builtins.toy_runs == 1
    assert toy_pkg.NAME == "toy"
