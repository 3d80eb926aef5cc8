"""helpers/ keeps its floors (DESIGN.md): imports only go down, and no technique imports another,
so a chapter's module can change without touching the rest."""

import ast
from pathlib import Path

import pytest

HELPERS = Path(__file__).resolve().parents[1] / "helpers"

FLOORS = {
    "face": {"__main__"},
    "techniques": {"amp", "dataloader", "ddp", "troubleshoot"},
    "measuring": {"benchmark", "memory"},
    "ground": {"device", "machine", "models", "plots", "checks"},
}
ORDER = ["ground", "measuring", "techniques", "face"]
FLOOR_OF = {module: floor for floor, modules in FLOORS.items() for module in modules}


def _helpers_imports(path):
    """Modules of ``helpers`` that ``path`` imports (top-level or inside functions)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "helpers":
            parts = node.module.split(".")
            if len(parts) > 1:
                found.add(parts[1])
            else:
                found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "helpers" and len(parts) > 1:
                    found.add(parts[1])
    return found


MODULES = sorted(p for p in HELPERS.glob("*.py") if p.stem != "__init__")


def test_every_module_has_a_floor():
    assert {p.stem for p in MODULES} <= set(FLOOR_OF), f"add new modules to FLOORS: {({p.stem for p in MODULES}) - set(FLOOR_OF)}"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.stem)
def test_imports_only_go_down(path):
    mine = ORDER.index(FLOOR_OF[path.stem])
    for target in _helpers_imports(path) - {"grading"}:
        assert target in FLOOR_OF, f"{path.stem} imports helpers.{target}, which has no floor"
        theirs = ORDER.index(FLOOR_OF[target])
        assert theirs < mine or (theirs == mine and FLOOR_OF[target] == "ground") or path.stem == "__main__", (
            f"helpers.{path.stem} ({FLOOR_OF[path.stem]}) imports helpers.{target} ({FLOOR_OF[target]}): "
            "imports only go down, and a technique never imports another"
        )


def test_chapters_modules_never_import_grading():
    """Grading is instructor tooling: no chapter module depends on it."""
    for path in MODULES:
        if path.stem != "__main__":
            assert "grading" not in _helpers_imports(path), f"helpers.{path.stem} imports helpers.grading"
