"""The nbgrader round trip in a throwaway course: the reference solution scores full marks,
the blank release scores 0, graded by real `nbgrader autograde` with this repo's config.

Wrong submissions are graded by tests/test_exercises.py, which runs the same cells in-process.
"""

import shutil
import subprocess
import sys

import pytest
from nbgrader.api import Gradebook

from course import chapters, grade_cells, load, solution_path


@pytest.fixture(scope="module")
def graded(released_course):
    course = released_course
    for chapter in chapters():
        for student, source in (("reference", solution_path(chapter)),
                                ("blank", course / "release" / chapter / f"{chapter}.ipynb")):
            dest = course / "submitted" / student / chapter
            dest.mkdir(parents=True, exist_ok=True)
            shutil.copy(source, dest / f"{chapter}.ipynb")
        proc = subprocess.run(
            [sys.executable, "-m", "nbgrader", "autograde", chapter, "--force", "--create", "--log-level=WARN",
             f"--CourseDirectory.root={course}"],
            cwd=course, capture_output=True, text=True,
        )
        assert proc.returncode == 0, f"autograde {chapter} failed:\n{proc.stdout}\n{proc.stderr}"
    return course


@pytest.mark.slow
@pytest.mark.parametrize("chapter", chapters())
def test_reference_scores_full_marks_and_blank_scores_zero(graded, chapter):
    maximum = sum(grade_cells(load(solution_path(chapter))).values())
    with Gradebook(f"sqlite:///{graded / 'gradebook.db'}") as gb:
        reference = gb.find_submission(chapter, "reference")
        blank = gb.find_submission(chapter, "blank")
        assert reference.max_score == maximum
        failing = [g.name for nb in reference.notebooks for g in nb.grades if g.score != g.max_score]
        assert reference.score == maximum, f"{chapter}: the reference solution loses points in {failing}"
        assert blank.score == 0, f"{chapter}: the blank release scores {blank.score} of {maximum}"
