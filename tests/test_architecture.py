"""helpers/ keeps its floors (DESIGN.md): imports only go down, no technique imports another, and no
teaching module imports the checks, so a chapter's module can change without touching the rest.

    face        __main__, grading/ (instructor tooling)
    checks      checks/ (what grade cells use)
    techniques  amp  dataloader  ddp  troubleshoot
    measuring   benchmark  memory
    ground      device  machine  models  plots

Every .py file under helpers/ is read, subpackages and relative imports included.
"""

import ast
from pathlib import Path

import pytest

HELPERS = Path(__file__).resolve().parents[1] / "helpers"

FLOORS = {
    "ground": {"device", "machine", "models", "plots", "results", "units"},
    "measuring": {"benchmark", "memory"},
    "techniques": {"amp", "dataloader", "ddp", "troubleshoot"},
    "checks": {"checks"},
    "face": {"__main__", "grading", "gpu_check"},
}
ORDER = list(FLOORS)
FLOOR_OF = {unit: floor for floor, units in FLOORS.items() for unit in units}


def unit_of(path: Path) -> str:
    """The floor unit a file belongs to: its top-level module or subpackage under helpers/."""
    rel = path.relative_to(HELPERS)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def helpers_imports(source: str, path: Path) -> set[str]:
    """Units of ``helpers`` that ``source`` (the file at ``path``) imports, anywhere in the file."""
    package = ["helpers", *path.relative_to(HELPERS).parts[:-1]]
    found = set()
    for node in ast.walk(ast.parse(source)):
        names = []
        if isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = [*base, *(node.module.split(".") if node.module else [])]
            names = [module + [alias.name] for alias in node.names] if len(module) == 1 else [module]
        elif isinstance(node, ast.Import):
            names = [alias.name.split(".") for alias in node.names]
        for parts in names:
            if parts[0] == "helpers" and len(parts) > 1:
                found.add(parts[1])
    return found


def violations(path: Path, source: str | None = None) -> list[str]:
    """What is wrong with the imports of ``path`` (empty when it keeps the floors)."""
    mine = unit_of(path)
    if mine == "__init__":
        return []
    if mine not in FLOOR_OF:
        return [f"helpers/{path.relative_to(HELPERS)} belongs to no floor: add {mine!r} to FLOORS"]
    floor = ORDER.index(FLOOR_OF[mine])
    problems = []
    for target in helpers_imports(source if source is not None else path.read_text(), path) - {mine}:
        if target not in FLOOR_OF:
            problems.append(f"{mine} imports helpers.{target}, which has no floor")
            continue
        theirs = ORDER.index(FLOOR_OF[target])
        same_allowed = FLOOR_OF[target] in ("ground", "face")
        if theirs > floor or (theirs == floor and not same_allowed):
            problems.append(f"helpers.{mine} ({FLOOR_OF[mine]}) imports helpers.{target} ({FLOOR_OF[target]}): "
                            "imports only go down, a technique never imports another, and no teaching module "
                            "imports the checks")
    return problems


FILES = sorted(HELPERS.rglob("*.py"))


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(HELPERS)))
def test_imports_only_go_down(path):
    assert not violations(path)


@pytest.mark.parametrize("source, unit", [
    ("from helpers.checks import check\n", "memory.py"),
    ("from .checks.core import check\n", "amp.py"),
    ("from . import amp\n", "ddp.py"),
    ("import helpers.grading.cli\n", "benchmark.py"),
    ("from helpers import dataloader\n", "checks/core.py"),  # fine: checks stands on techniques
])
def test_the_rule_catches_a_module_that_breaks_the_floors(source, unit):
    """The checker is not vacuous: each import above breaks a floor, except the last, which keeps them."""
    found = violations(HELPERS / unit, source)
    assert bool(found) is (not unit.startswith("checks")), found


def test_relative_imports_are_resolved():
    assert helpers_imports("from ..device import pick_device\n", HELPERS / "checks" / "core.py") == {"device"}
    assert helpers_imports("from . import core\n", HELPERS / "checks" / "x.py") == {"checks"}
    assert helpers_imports("from . import amp\n", HELPERS / "ddp.py") == {"amp"}
