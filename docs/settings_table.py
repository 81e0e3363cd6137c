"""The settings table of docs/operating.md, written from the settings classes themselves.

    python docs/settings_table.py           # rewrite the table in docs/operating.md
    python docs/settings_table.py --check   # exit 1 if the table there is not the current one

Every field of `Settings` (and of its nested `sandbox` and `run` settings) is a row: its name, its
environment variable, its default and its docstring, so a default or a rule changed in the code
changes the table (tests/test_docs.py fails until it is written again). Run from the repository
root, or anywhere with the repository on `sys.path`.
"""

from __future__ import annotations

import ast
import inspect
import sys
import textwrap
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from service.settings import Settings  # noqa: E402

DOC = ROOT / "docs" / "operating.md"
BEGIN = "<!-- settings table: written by docs/settings_table.py, do not edit by hand -->"
END = "<!-- end of the settings table -->"

_KIB = 1024
_FACTORIES = {"_cpu_count": "one per core", "_default_pool_size": "one per core"}


def docstrings(model: type[BaseModel]) -> dict[str, str]:
    """Each field's docstring (the string literal right after its annotation), as one line."""
    body = ast.parse(textwrap.dedent(inspect.getsource(model))).body[0]
    if not isinstance(body, ast.ClassDef):
        raise TypeError(f"{model.__name__}'s source is not a class")
    found: dict[str, str] = {}
    for field, after in zip(body.body, [*body.body[1:], None], strict=True):
        if not (isinstance(field, ast.AnnAssign) and isinstance(field.target, ast.Name)):
            continue
        if isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant):
            found[field.target.id] = " ".join(str(after.value.value).split())
    return found


def _size(value: int) -> str:
    for unit, name in ((_KIB**3, "GiB"), (_KIB**2, "MiB"), (_KIB, "KiB")):
        if value >= unit and value % unit == 0:
            return f"{value // unit:,} {name}"
    return f"{value:,}"


def show_default(name: str, info: Any) -> str:
    """The default as the docs write it: sizes of `*_bytes` in KiB/MiB/GiB, numbers grouped."""
    if info.default_factory is not None:
        return _FACTORIES.get(info.default_factory.__name__, info.default_factory.__name__)
    value = info.default
    if value is PydanticUndefined or value is None or value == ():
        return "none"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int) and name.endswith("_bytes"):
        return _size(value)
    if isinstance(value, int) and (name == "port" or "uid" in name):  # a name, not a quantity
        return str(value)
    if isinstance(value, float) and value.is_integer():
        return f"{int(value):,}"
    if isinstance(value, int):
        return f"{value:,}"
    return f"`{value}`"


def rows(model: type[BaseModel] = Settings, prefix: str = "") -> list[tuple[str, str, str, str]]:
    """(setting, environment variable, default, meaning) for every field, nested ones flattened."""
    found = []
    notes = docstrings(model)
    for name, info in model.model_fields.items():
        path = f"{prefix}{name}"
        nested = info.annotation
        if isinstance(nested, type) and issubclass(nested, BaseModel):
            found.extend(rows(nested, f"{path}."))
            continue
        variable = "PROCTOR_" + path.replace(".", "__").upper()
        found.append((path, variable, show_default(name, info), notes.get(name, "")))
    return found


def table() -> str:
    lines = ["| setting | variable | default | meaning |", "|---|---|---|---|"]
    for path, variable, default, meaning in rows():
        cell = meaning.replace("|", "\\|")
        lines.append(f"| `{path}` | `{variable}` | {default} | {cell} |")
    return "\n".join(lines)


def written(text: str) -> str:
    """`text` (docs/operating.md) with the table between its markers made the current one."""
    head, begin, rest = text.partition(BEGIN)
    _, end, tail = rest.partition(END)
    if not begin or not end:
        raise ValueError(f"{DOC.name} lacks the settings table's markers")
    return f"{head}{BEGIN}\n{table()}\n{END}{tail}"


def main(argv: list[str]) -> int:
    text = DOC.read_text(encoding="utf-8")
    if argv[1:] == ["--check"]:
        if written(text) != text:
            print(f"{DOC}: the settings table is stale: run python docs/settings_table.py")
            return 1
        return 0
    DOC.write_text(written(text), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
