"""The floors of helpers/ and course_tools/ are declared once, as import-linter contracts in pyproject.toml
(ARCHITECTURE.md says why each floor is where it is), and checked here:

    course_tools    the instructor's and maintainer's tooling: cli > handout, colab, gpu_check > grading
    grading         class_level > release | engine > the ground (course, settings, outcome words, run record)
    helpers         what a learner has: __main__ > checks > techniques > measuring > ground

Imports only go down, no technique imports another, no module of either package is in an import circle. The
tests also plant an upward import in a copy of the packages, to prove the contracts can fail.
"""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support.layout import ROOT  # noqa: E402
LINT = [sys.executable, "-c", "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"]


def lint(where: Path) -> subprocess.CompletedProcess:
    """lint-imports over the packages found at ``where`` (which holds pyproject.toml and both packages)."""
    env = {"PYTHONPATH": str(where), "PATH": str(Path(sys.executable).parent)}
    return subprocess.run([*LINT, str(where / "pyproject.toml"), "--no-cache", "--no-logo"], cwd=where, env=env,
                          capture_output=True, text=True, timeout=120)


def test_every_contract_is_kept():
    run = lint(ROOT)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "0 broken" in run.stdout and " kept" in run.stdout, run.stdout


@pytest.fixture(scope="module")
def copy(tmp_path_factory):
    """The two packages and pyproject.toml, copied where a test may plant a bad import."""
    where = tmp_path_factory.mktemp("floors")
    for name in ("helpers", "course_tools"):
        shutil.copytree(ROOT / name, where / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", where / "pyproject.toml")
    return where


@pytest.mark.parametrize("module, planted, broken", [
    ("helpers/memory.py", "from helpers.checks import core\n", "helpers floors"),
    ("helpers/amp.py", "from helpers import dataloader\n", "helpers floors"),
    ("helpers/device.py", "import helpers.benchmark\n", "helpers floors"),
    ("helpers/benchmark.py", "import course_tools.grading.release.generate\n", "helpers never imports course_tools"),
    ("course_tools/grading/course.py", "from course_tools import handout\n", "course_tools floors"),
    ("helpers/units.py", "from helpers import results\n", "no import circles"),
    ("course_tools/grading/engine/budgets.py", "from course_tools.grading.class_level import status\n",
     "the engine never imports the class level"),
    ("course_tools/grading/engine/kernel.py", "import course_tools.grading.release.generate\n",
     "the engine never imports the class level or release"),
    ("course_tools/grading/release/generate.py", "from course_tools.grading.engine import execute\n",
     "grading rooms"),
    ("course_tools/grading/run_record.py", "from course_tools.grading.engine import watchdog\n", "grading rooms"),
])
def test_a_planted_import_breaks_its_contract(copy, module, planted, broken):
    """Each planted line breaks the contract named; the copy is restored after each case."""
    path = copy / module
    original = path.read_text()
    path.write_text(planted + original)
    try:
        run = lint(copy)
    finally:
        path.write_text(original)
    assert run.returncode != 0, run.stdout
    assert broken in run.stdout.split("Broken contracts", 1)[-1], run.stdout
