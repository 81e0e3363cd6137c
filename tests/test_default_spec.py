"""One default spec: the server's `default_spec` and the clients' `DEFAULT_SPEC` are one name, the
only spec name written as a literal in service/ and clients/, and a 2.0.0 training spec that pays
no puzzle partial credit. The shipped trainer configs grade every stage with the default's grader.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from proctor_client._defaults import DEFAULT_SPEC
from reward_specs import BUILTIN_SPEC_DIR, default_registry, load_specs
from reward_specs.math import MathConfig
from reward_specs.puzzles import PuzzleConfig
from service.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
SPECS = load_specs(default_registry())
BUILT_IN = frozenset(path.stem for path in BUILTIN_SPEC_DIR.glob("*.toml"))
DEFINITIONS = {
    (Path("service/settings.py"), "default_spec"),
    (Path("clients/proctor_client/_defaults.py"), "DEFAULT_SPEC"),
}
"""(file, name assigned): the two places a spec name may be written in service/ and clients/."""


def test_the_server_and_the_clients_default_to_one_spec() -> None:
    assert Settings.model_fields["default_spec"].default == DEFAULT_SPEC


def test_the_default_is_a_training_spec_without_partial_credit() -> None:
    spec = SPECS[DEFAULT_SPEC]
    assert spec.version.split(".")[0] == "2", spec.version
    puzzle = spec.domains["puzzle"]
    assert isinstance(puzzle, PuzzleConfig) and puzzle.partial_credit is False
    math = spec.domains["math"]
    assert isinstance(math, MathConfig) and math.prose_answer is False  # an evaluation spec's


def _assigned_name(statement: ast.Assign | ast.AnnAssign) -> str | None:
    """The one name (or attribute) `statement` assigns to, else None."""
    targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
    if len(targets) != 1:
        return None
    target = targets[0]
    return target.id if isinstance(target, ast.Name) else getattr(target, "attr", None)


PACKAGES = ("service", "clients/proctor_client")
"""The Python of service/ and clients/ (clients/build/ is a wheel's build tree, not source)."""


def spec_literals(root: Path) -> list[tuple[Path, int, str, str | None]]:
    """Every string constant of the Python files of `PACKAGES` that is a built-in spec's name:
    (file, line, name, the name it is assigned to if it is an assignment's value)."""
    found = []
    for folder in PACKAGES:
        for path in sorted((root / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
            for parent in ast.walk(tree):
                for child in ast.iter_child_nodes(parent):
                    if (
                        isinstance(child, ast.Constant)
                        and isinstance(child.value, str)
                        and child.value in BUILT_IN
                    ):
                        target = (
                            _assigned_name(parent)
                            if isinstance(parent, ast.Assign | ast.AnnAssign)
                            and parent.value is child
                            else None
                        )
                        found.append((path.relative_to(root), child.lineno, child.value, target))
    return found


def test_no_other_spec_name_is_written_in_service_or_clients() -> None:
    found = spec_literals(ROOT)
    assert {(path, target) for path, _, _, target in found} >= DEFINITIONS  # the scan sees them
    others = [
        f"{path}:{line}: {name!r}"
        for path, line, name, target in found
        if (path, target) not in DEFINITIONS
    ]
    assert not others, "spec names written outside the two definitions: " + ", ".join(others)


@pytest.mark.parametrize(
    "source",
    [
        'SPEC = "prorl-v1"\n',
        'def score(spec: str = "prorl-v1-careful") -> None: ...\n',
        'parser.add_argument("--spec", default="dapo-overlong")\n',
        'class Args:\n    spec: str = "prorl-v1-termination"\n',
    ],
)
def test_the_scan_finds_a_default_written_anywhere(tmp_path: Path, source: str) -> None:
    for folder in PACKAGES:
        (tmp_path / folder).mkdir(parents=True)
    (tmp_path / "clients" / "proctor_client" / "mod.py").write_text(source, encoding="utf-8")
    (found,) = spec_literals(tmp_path)
    assert found[0] == Path("clients/proctor_client/mod.py") and found[2] in BUILT_IN
    assert (found[0], found[3]) not in DEFINITIONS


def test_the_shipped_trainer_configs_grade_with_the_default() -> None:
    schedule = pytest.importorskip("proctor_client.trainer.schedule")  # needs the trainer extra
    default = SPECS[DEFAULT_SPEC].parameters()["domains"]
    for path in sorted((ROOT / "clients" / "configs").glob("*.yaml")):
        raw = schedule.read_yaml(path)
        for stage in raw.get("stages") or ():
            name = stage.get("spec", DEFAULT_SPEC)
            assert SPECS[name].parameters()["domains"] == default, (path.name, stage["name"])
