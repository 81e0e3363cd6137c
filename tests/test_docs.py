"""The documents say what the code does: every `PROCTOR_*` name they use is one the code reads,
every setting they give with its default has that default, every command line of their fenced
blocks parses with that command's own argument parser, every sandbox image tag is the current one,
the settings table is the one `docs/settings_table.py` writes, every relative link and anchor
resolves, and the README stays a short map. Figures in prose that are not a setting's default
(timings, counts of a benchmark) are not checked here."""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import inspect
import re
import shlex
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from pydantic import BaseModel

from proctor_client import ProctorClient
from proctor_client import trl as client_trl
from proctor_client import verl as client_verl
from proctor_client.evaluation import cli as eval_cli
from proctor_client.evaluation import contamination as eval_contamination
from proctor_client.evaluation import sample as eval_sample
from proctor_client.trainer import cli as train_cli
from proctor_client.trainer.config import Args
from sandboxes.settings import DEFAULT_IMAGE
from service import cli as proctor_cli

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted([ROOT / "README.md", ROOT / "clients" / "README.md", *(ROOT / "docs").glob("*.md")])
"""The documents a user reads first; every check below runs over each of them."""


def _load_table_tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("settings_table", ROOT / "docs/settings_table.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TABLE = _load_table_tool()


def _ids(paths: list[Path]) -> list[str]:
    return [str(p.relative_to(ROOT)) for p in paths]


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


# ---------------------------------------------------------------- the settings table


def test_the_settings_table_is_the_one_the_code_writes() -> None:
    doc = TABLE.DOC.read_text(encoding="utf-8")
    assert TABLE.written(doc) == doc, "run: python docs/settings_table.py"


def test_the_table_has_a_row_per_setting_with_its_docstring() -> None:
    rows = TABLE.rows()
    names = [path for path, *_ in rows]
    assert len(names) == len(set(names))
    assert {"workers", "sandbox.backend", "run.cpu_s", "worker_concurrency"} <= set(names)
    undocumented = [path for path, _, _, meaning in rows if not meaning]
    assert not undocumented, f"settings without a docstring: {undocumented}"


# ---------------------------------------------------------------- PROCTOR_* names

_NAME = re.compile(r"\bPROCTOR_[A-Z0-9_]*[A-Z0-9]\b")
_CODE = [
    *ROOT.glob("service/**/*.py"),
    *ROOT.glob("reward_specs/**/*.py"),
    *ROOT.glob("sandboxes/**/*.py"),
    *ROOT.glob("clients/proctor_client/**/*.py"),
    *ROOT.glob("benchmarks/*.py"),
    ROOT / "docker-compose.yml",
    ROOT / "Dockerfile",
    ROOT / "tests" / "run",
    *ROOT.glob("**/build-offline.sh"),
]


def _names_the_code_uses() -> set[str]:
    names = {variable for _, variable, _, _ in TABLE.rows()}
    for path in _CODE:
        names.update(_NAME.findall(_text(path)))
    return names


@pytest.mark.parametrize("doc", DOCS, ids=_ids(DOCS))
def test_every_proctor_variable_is_one_the_code_reads(doc: Path) -> None:
    known = _names_the_code_uses()
    unknown = sorted(set(_NAME.findall(_text(doc))) - known)
    assert not unknown, f"{doc.name} names variables no code reads: {unknown}"


_COMPOSE_DEFAULT = re.compile(r"\$\{(PROCTOR_[A-Z0-9_]+):-([^}]+)\}")
_VARIABLE_ROW = re.compile(r"^\| `(PROCTOR_[A-Z0-9_]+)` \| `([^`]+)` \|", re.M)


@pytest.mark.parametrize("doc", DOCS, ids=_ids(DOCS))
def test_every_compose_variable_has_the_default_the_file_gives(doc: Path) -> None:
    compose = dict(_COMPOSE_DEFAULT.findall(_text(ROOT / "docker-compose.yml")))
    for variable, default in _VARIABLE_ROW.findall(_text(doc)):
        assert variable in compose, f"{doc.name}: {variable} has no default in docker-compose.yml"
        assert compose[variable] == default, (doc.name, variable, default, compose[variable])


# ---------------------------------------------------------------- settings with their defaults

_UNITS = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "s": 1, "ms": 1e-3}
_FIGURE = r"(?P<figure>\d[\d,]*(?:\.\d+)?)(?:\s(?P<unit>KiB|MiB|GiB|s|ms))?(?=[),;: ])"
_WITH_DEFAULT = re.compile(rf"`(?P<name>[a-z][a-z0-9_.]*)`(?: [a-z]+){{0,2}} \({_FIGURE}")
"""A setting given with its default: `name` (64 MiB, ...), `name` of them (4), ..."""


def _value(figure: str, unit: str | None) -> float:
    return float(figure.replace(",", "")) * _UNITS.get(unit or "", 1)


def _server_defaults() -> dict[str, float]:
    found: dict[str, float] = {}

    def walk(model: type[BaseModel], prefix: str) -> None:
        for name, info in model.model_fields.items():
            nested = info.annotation
            if isinstance(nested, type) and issubclass(nested, BaseModel):
                walk(nested, f"{prefix}{name}.")
            elif isinstance(info.default, int | float) and not isinstance(info.default, bool):
                found[f"{prefix}{name}"] = float(info.default)

    walk(TABLE.Settings, "")
    return found


def _keyword_defaults(*functions: Callable[..., Any]) -> dict[str, float]:
    found: dict[str, float] = {}
    for function in functions:
        for name, parameter in inspect.signature(function).parameters.items():
            value = parameter.default
            if isinstance(value, int | float) and not isinstance(value, bool):
                found.setdefault(name, float(value))
    return found


def _client_defaults() -> dict[str, float]:
    """The client distribution's own knobs: the SDK, the TRL and verl functions, the trainer."""
    found = _keyword_defaults(ProctorClient, client_trl.reward_func, client_verl.compute_score)
    for field in dataclasses.fields(Args):
        if isinstance(field.default, int | float) and not isinstance(field.default, bool):
            found.setdefault(field.name, float(field.default))
    return found


def _defaults_for(doc: Path) -> dict[str, float]:
    """What a name in `doc` refers to: in clients/README the client's own knobs come first."""
    server = _server_defaults()
    if doc == ROOT / "clients" / "README.md":
        return {**server, **_client_defaults()}
    return server


def _settings_given_with_defaults(doc: Path) -> Iterator[tuple[str, str, float]]:
    defaults = _defaults_for(doc)
    for match in _WITH_DEFAULT.finditer(_text(doc)):
        name = match["name"]
        if name in defaults:
            yield match[0], name, _value(match["figure"], match["unit"])


@pytest.mark.parametrize("doc", DOCS, ids=_ids(DOCS))
def test_every_setting_given_with_a_default_has_that_default(doc: Path) -> None:
    defaults = _defaults_for(doc)
    wrong = [
        f"{said!r}: the code's default is {defaults[name]:g}"
        for said, name, value in _settings_given_with_defaults(doc)
        if value != defaults[name]
    ]
    assert not wrong, f"{doc.name}: {wrong}"


def test_the_defaults_check_reads_the_forms_the_docs_use() -> None:
    found = {(name, value) for doc in DOCS for _, name, value in _settings_given_with_defaults(doc)}
    assert ("max_reference_depth", 64) in found
    assert ("max_header_bytes", 64 * 1024) in found
    assert ("max_request_bytes", 16 * 1024 * 1024) in found  # the SDK's, in clients/README
    sample = "`max_meta_bytes` (64 MiB) and `max_retries` of them (7: ...)"
    said = {m["name"]: _value(m["figure"], m["unit"]) for m in _WITH_DEFAULT.finditer(sample)}
    assert said == {"max_meta_bytes": 64 << 20, "max_retries": 7}


# ---------------------------------------------------------------- command lines

_FENCE = re.compile(r"^```(?P<lang>[a-z]*)\n(?P<body>.*?)^```", re.S | re.M)
_SHELL = {"", "sh", "bash", "shell", "console"}
_OURS = ("service.", "reward_specs.", "sandboxes.", "proctor_client.", "benchmarks.")
_SEPARATORS = {"&&", "||", "&", ";", "|"}


def _parser_for(argv: list[str]) -> tuple[argparse.ArgumentParser, list[str]] | None:
    """The parser that reads `argv`'s arguments, and those arguments; None if not ours."""
    program, args = argv[0], argv[1:]
    if program in {"python", "python3", "torchrun"} and "-m" in args:
        module = args[args.index("-m") + 1]
        args = args[args.index("-m") + 2 :]
        program = {
            "service.cli": "proctor",
            "proctor_client.trainer.cli": "proctor-train",
            "proctor_client.evaluation.cli": "proctor-eval",
        }.get(module, module)
        if program == module:
            assert not module.startswith(_OURS), f"no parser known for python -m {module}"
            return None
    if program == "proctor":
        return proctor_cli._parser(), args
    if program == "proctor-train":
        return train_cli._parser(), args
    if program == "proctor-eval" and args[:1] == ["sample"]:
        return eval_sample._parser(), args[1:]
    if program == "proctor-eval" and args[:1] == ["contamination"]:
        return eval_contamination._parser(), args[1:]
    if program == "proctor-eval":
        return eval_cli._parser(), args
    return None


def _usage(token: str) -> str:
    """A usage form's token as a command line would give it: `[--k` -> `--k`, `a|b` -> `a`."""
    return token.strip("[]").split("|")[0] if "|" in token.strip("[]") else token.strip("[]")


def _commands(text: str) -> Iterator[tuple[str, list[str]]]:
    """(line, argv) of each command in `text`'s shell blocks, continuation lines joined."""
    for block in _FENCE.finditer(text):
        if block["lang"] not in _SHELL:
            continue
        pending = ""
        for text in block["body"].replace("\\\n", " ").splitlines():
            line = f"{pending}\n{text}" if pending else text.removeprefix("$ ")
            try:
                split = shlex.split(line, comments=True)
            except ValueError:  # a quoted string goes on to the next line
                pending = line
                continue
            pending = ""
            tokens = [_usage(t) for t in split]
            command: list[str] = []
            for token in [*tokens, ";"]:
                if token in _SEPARATORS:
                    while command and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", command[0]):
                        command.pop(0)  # VARIABLE=value before the command
                    if command:
                        yield line, command
                    command = []
                elif token:
                    command.append(token)


def _all_commands() -> list[Any]:
    found = []
    for doc in DOCS:
        for line, argv in _commands(_text(doc)):
            if _parser_for(argv) is not None:
                found.append(pytest.param(argv, id=f"{doc.relative_to(ROOT)}: {line.strip()[:60]}"))
    return found


@pytest.mark.parametrize("argv", _all_commands())
def test_every_command_line_parses(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    found = _parser_for(argv)
    assert found is not None
    parser, args = found
    try:
        parser.parse_args(args)
    except SystemExit:
        pytest.fail(f"{shlex.join(argv)}: {capsys.readouterr().err}")


def test_the_command_check_finds_the_docs_commands_and_refuses_a_wrong_one() -> None:
    programs = {argv[0] for param in _all_commands() for argv in param.values}
    assert {"proctor", "proctor-train", "proctor-eval"} <= programs
    block = "```sh\nexport X=1 && PROCTOR_WORKERS=2 proctor score in.jsonl --no-such-flag\n```\n"
    ((_, argv),) = [c for c in _commands(block) if _parser_for(c[1])]
    assert argv == ["proctor", "score", "in.jsonl", "--no-such-flag"]
    parser, args = _parser_for(argv) or (None, [])
    assert parser is not None
    with pytest.raises(SystemExit):
        parser.parse_args(args)


# ---------------------------------------------------------------- image tags

_TAG = re.compile(r"proctor-sandbox:[\w.-]*\w")


@pytest.mark.parametrize(
    "doc", [*DOCS, ROOT / "sandboxes/README.md"], ids=_ids([*DOCS, ROOT / "sandboxes/README.md"])
)
def test_every_sandbox_image_tag_is_the_current_one(doc: Path) -> None:
    tags = set(_TAG.findall(_text(doc)))
    assert tags <= {DEFAULT_IMAGE}, f"{doc.name}: {sorted(tags)}; the image is {DEFAULT_IMAGE}"


def test_the_compose_file_starts_the_current_image() -> None:
    assert set(_TAG.findall(_text(ROOT / "docker-compose.yml"))) == {DEFAULT_IMAGE}


# ---------------------------------------------------------------- links and the map

_LINK = re.compile(r"\]\((?P<target>[^)\s]+)\)")


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    return {_anchor(h) for h in re.findall(r"^#+ (.*)$", _text(path), re.M)}


@pytest.mark.parametrize("doc", DOCS, ids=_ids(DOCS))
def test_every_relative_link_and_anchor_resolves(doc: Path) -> None:
    broken = []
    for match in _LINK.finditer(_text(doc)):
        target = match["target"]
        if re.match(r"[a-z]+:", target):
            continue  # an absolute URL
        file, _, anchor = target.partition("#")
        path = (doc.parent / file).resolve() if file else doc
        if not path.exists() or (anchor and anchor not in _anchors(path)):
            broken.append(target)
    assert not broken, f"{doc.name}: {broken}"


def test_the_readme_is_a_short_map() -> None:
    readme = _text(ROOT / "README.md")
    assert len(readme.encode()) < 12 * 1024
    section = readme.split("## Where things are", 1)[1].split("\n## ", 1)[0]
    folders = re.findall(r"^\| `([\w-]+)/` \|", section, re.M)
    assert {"service", "reward_specs", "sandboxes", "clients", "tests", "docs"} <= set(folders)
    named = set(re.findall(r"`([\w/.-]+\.(?:py|md))`", section))
    missing = [p for p in named if not (ROOT / p).exists() and not (ROOT / "clients" / p).exists()]
    assert not missing, f"the code map names files that do not exist: {missing}"
    setup = readme.split("## Set up", 1)[1].split("\n## ", 1)[0]
    assert [m["lang"] for m in _FENCE.finditer(setup)] == ["sh", "sh"], "two set-up commands"
    assert "bash tests/run" in setup


def test_every_test_file_is_in_the_tests_map() -> None:
    listed = set(re.findall(r"`(test_\w+\.py)`", _text(ROOT / "tests" / "README.md")))
    present = {path.name for path in (ROOT / "tests").glob("test_*.py")}
    assert not present - listed, f"tests/README.md does not list {sorted(present - listed)}"
    assert not listed - present, f"tests/README.md lists missing files {sorted(listed - present)}"


_REPO_PATH = re.compile(
    r"(?<![\w/.:-])((?:service|reward_specs|sandboxes|clients|tests|benchmarks|docs|proctor_client)"
    r"/[\w/.-]*[\w/])"
)


@pytest.mark.parametrize("doc", DOCS, ids=_ids(DOCS))
def test_every_path_named_exists(doc: Path) -> None:
    """A file or folder of this repository named in a document exists (a move updates the docs)."""
    named = set(_REPO_PATH.findall(_text(doc)))
    missing = sorted(
        p for p in named if not (ROOT / p).exists() and not (ROOT / "clients" / p).exists()
    )
    assert not missing, f"{doc.name} names paths that do not exist: {missing}"


def test_the_path_check_reads_paths_in_and_out_of_backticks() -> None:
    text = "see `service/nope.py`, reward_specs/math/rules.py and http://x/service/a.py"
    assert _REPO_PATH.findall(text) == ["service/nope.py", "reward_specs/math/rules.py"]
