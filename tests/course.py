"""What the tests know about the course: its chapters, cells and wrong submissions.

One place for the layout rules (``solutions/NN_topic/NN_topic.ipynb``, grade
cells, demo cells, the submission file header), so every test reads the
course the same way and a new chapter is picked up without editing a test.
"""

from __future__ import annotations

import contextlib
import io
import re
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from helpers.grading.preprocessors import is_demo_cell
from helpers.grading.release import assignments

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = ROOT / "solutions"
NOTEBOOKS = ROOT / "notebooks"
SUBMISSIONS = Path(__file__).resolve().parent / "submissions"


def chapters() -> list[str]:
    """Assignment names, e.g. ``["00_start", "02_devices"]``, in course order (the release's own rule)."""
    return assignments(ROOT)


def solution_path(chapter: str) -> Path:
    return SOLUTIONS / chapter / f"{chapter}.ipynb"


def load(path: Path) -> nbformat.NotebookNode:
    return nbformat.read(str(path), as_version=4)


def nbgrader_meta(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def grade_cells(nb) -> dict[str, int]:
    """grade_id -> points, for every autograded test cell."""
    return {nbgrader_meta(c)["grade_id"]: nbgrader_meta(c)["points"] for c in nb.cells if nbgrader_meta(c).get("grade") and c.cell_type == "code"}


def solution_ids(nb) -> list[str]:
    return [nbgrader_meta(c)["grade_id"] for c in nb.cells if nbgrader_meta(c).get("solution")]


@dataclass
class Submission:
    """A learner's version of one solution cell, with the outcome it must get.

    File ``tests/submissions/<chapter>/<name>.py`` starts with a header::

        # solution: time-on-device             (grade_id of the solution cell it replaces)
        # fails: time-on-device-sync           (grade cells that must fail; empty = full marks)
        # says: synchronis                     (text every failure message must contain)
    """

    chapter: str
    name: str
    solution: str
    fails: list[str]
    says: str
    source: str
    path: Path = field(repr=False, default=None)


def submissions() -> list[Submission]:
    found = []
    for path in sorted(SUBMISSIONS.glob("*/*.py")):
        text = path.read_text()
        header = dict(re.findall(r"^# (solution|fails|says):[ \t]*(.*)$", text, flags=re.M))
        if "solution" not in header:
            raise ValueError(f"{path}: the header needs a '# solution: <grade_id>' line")
        found.append(
            Submission(
                chapter=path.parent.name,
                name=path.stem,
                solution=header["solution"].strip(),
                fails=header.get("fails", "").split(),
                says=header.get("says", "").strip(),
                source=text,
                path=path,
            )
        )
    return found


@dataclass
class CellResult:
    passed: bool
    message: str = ""


def run_graded_cells(nb, replacements: dict[str, str] | None = None) -> dict[str, CellResult]:
    """Run a chapter's code cells in order in one fresh namespace, as a grader would.

    Demonstration cells (tag ``demo``) are skipped, exactly as
    ``SkipDemoCells`` skips them under nbgrader; a solution cell whose
    grade_id is in ``replacements`` runs the given source instead. Like
    nbgrader, execution goes on after a failing cell. Returns the outcome of
    every grade cell. This is the fast path: the same cells and hidden tests
    nbgrader runs, without a kernel start per submission.
    """
    replacements = dict(replacements or {})
    namespace: dict = {"__name__": "__main__"}
    exec("from IPython.display import display", namespace)  # what a kernel provides
    results: dict[str, CellResult] = {}
    for cell in nb.cells:
        if cell.cell_type != "code" or is_demo_cell(cell):
            continue
        meta = nbgrader_meta(cell)
        source = replacements.pop(meta["grade_id"], cell.source) if meta.get("solution") else cell.source
        error = None
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                exec(compile(source, f"<cell {meta.get('grade_id', cell.get('id', '?'))}>", "exec"), namespace)
        except Exception as err:  # noqa: BLE001 - a failing cell is an outcome, as under nbgrader
            error = f"{type(err).__name__}: {err}"
        if meta.get("grade"):
            results[meta["grade_id"]] = CellResult(error is None, error or "")
    if replacements:
        raise KeyError(f"no solution cell with grade_id {sorted(replacements)}")
    return results
