"""What a re-release does to a gradebook that already holds graded submissions.

``release`` runs nbgrader against a copy of the gradebook made here
(``prepare_gradebook``). Before nbgrader runs, each assignment's cells in
``solutions/`` are compared with the gradebook's:

- a check's source or points changed: fine (nbgrader records it); the
  assignment is listed in ``result.regrade``, because its scores are stale
  until ``grade`` runs again;
- a cell added or removed while submissions exist: nbgrader would stop with
  "Cannot add or remove cells ... because there are submissions". Without
  ``rebuild`` this is a ReleaseError that says what changed and what to do;
  with it, that assignment's *results* are removed from the copy (every
  submitted file stays in ``submitted/``), the manual scores that go with them
  are listed in ``result.dropped``, and the assignment needs ``grade`` again.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import nbformat

__all__ = ["GradebookChangeError", "prepare_gradebook", "source_cells"]


class GradebookChangeError(RuntimeError):
    """The gradebook cannot take this release as it stands; the message says what changed and what to do.
    (``release`` reports it as its own ReleaseError: this module sits below release and never imports it.)"""


def source_cells(path: Path) -> tuple[set[str], dict[str, float]]:
    """(every nbgrader cell id, {grade cell id: points}) of an instructor notebook."""
    nb = nbformat.read(str(path), as_version=4)
    ids, points = set(), {}
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if any(meta.get(k) for k in ("grade", "solution", "locked", "task")) and meta.get("grade_id"):
            ids.add(meta["grade_id"])
            if meta.get("grade"):
                points[meta["grade_id"]] = float(meta.get("points", 0))
    return ids, points


def _sqlite_path(root: Path) -> Path:
    from course_tools.grading.course import Course

    url = Course(root).db_url
    if not url.startswith("sqlite:///"):
        raise GradebookChangeError(f"release works on a copy of an SQLite gradebook; this course uses {url}")
    return Path(url[len("sqlite:///"):])


def _manual_scores(gb, assignment: str) -> list[str]:
    found = []
    for sub in gb.find_assignment(assignment).submissions:
        for nb in sub.notebooks:
            found += [f"{sub.student.id}/{assignment} `{g.name}`: {g.manual_score:g}" for g in nb.grades
                      if g.manual_score is not None]
    return found


def _compare(gb, assignment: str, notebook: str, path: Path) -> tuple[list[str], list[str], list[str], int]:
    """(added, removed, points changed, submissions) of one notebook against the gradebook."""
    try:
        old = gb.find_notebook(notebook, assignment)
    except Exception:  # noqa: BLE001 - MissingEntry: a new notebook or assignment
        return [], [], [], 0
    new_ids, new_points = source_cells(path)
    old_ids = {c.name for c in old.source_cells} | {c.name for c in old.task_cells}
    old_points = {c.name: float(c.max_score) for c in old.grade_cells}
    changed = [f"`{c}` {old_points[c]:g} -> {p:g} points" for c, p in new_points.items()
               if c in old_points and old_points[c] != p]
    return sorted(new_ids - old_ids), sorted(old_ids - new_ids), changed, len(old.submissions)


def prepare_gradebook(root: Path, names: list[str], db_copy: Path, rebuild: bool, result) -> Path:
    """Copy the gradebook to ``db_copy`` and make it ready for the release; return the real gradebook's path."""
    from nbgrader.api import Gradebook

    from course_tools.grading.course import Course

    real = _sqlite_path(root)
    if not real.is_file():
        return real
    shutil.copy2(real, db_copy)
    course = Course(root)
    with Gradebook(f"sqlite:///{db_copy}", course.course_id) as gb:
        for assignment in names:
            for path in sorted((course.source_dir / assignment).glob("*.ipynb")):
                added, removed, points, subs = _compare(gb, assignment, path.stem, path)
                if not subs or not (added or removed or points):
                    continue
                if points and assignment not in result.regrade:
                    result.regrade.append(assignment)
                if not (added or removed):
                    continue
                what = "; ".join(x for x in [added and "added " + ", ".join(added),
                                             removed and "removed " + ", ".join(removed)] if x)
                if not rebuild:
                    raise GradebookChangeError(
                        f"{assignment}: cells were {what} in {path.relative_to(root)}, and the gradebook holds {subs} "
                        f"graded submission(s), whose results nbgrader cannot keep across that change. Nothing was "
                        f"changed. To release it: `python -m course_tools release {assignment} --rebuild` (keeps every "
                        f"submitted notebook, removes {assignment}'s results from the gradebook and lists the manual "
                        f"scores that go with them), then `python -m course_tools grade --assignment {assignment}`")
                result.dropped += _manual_scores(gb, assignment)
                for sub in list(gb.find_assignment(assignment).submissions):
                    gb.remove_submission(assignment, sub.student.id)
                if assignment not in result.regrade:
                    result.regrade.append(assignment)
    return real
