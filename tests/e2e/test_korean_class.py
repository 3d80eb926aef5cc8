"""A Korean class, graded end to end: ko/ released, submitted, autograded and fed back by real nbgrader.

One chapter (08_speed, whose checks speak Korean) in a throwaway copy of the Korean course folder: the
reference scores full marks, the blank release 0, a wrong answer loses exactly the points it loses in the
English course, and its feedback names the mistake in Korean, through the sandbox and the verdict worker.
The other chapters share this code path and the English runs (tests/course/test_translation.py proves the Korean
notebooks' code equals the English).
"""

from __future__ import annotations

import shutil
import subprocess
import sys

import nbformat
import pytest
from nbgrader.api import Gradebook

from support.layout import ROOT, grade_cells, load, nbgrader_meta, solution_path, submissions

CHAPTER = "08_speed"
pytestmark = pytest.mark.slow


def _nbgrader(course, *args):
    proc = subprocess.run([sys.executable, "-m", "nbgrader", *args, "--log-level=WARN",
                           f"--CourseDirectory.root={course}"], cwd=course, capture_output=True, text=True)
    assert proc.returncode == 0, f"nbgrader {args[0]} failed:\n{proc.stdout}\n{proc.stderr}"


@pytest.fixture(scope="module")
def korean_class(tmp_path_factory):
    top = tmp_path_factory.mktemp("course")
    shutil.copy(ROOT / "nbgrader_config.py", top / "nbgrader_config.py")  # ko/'s config runs the English one
    course = top / "ko"
    course.mkdir()
    shutil.copy(ROOT / "ko" / "nbgrader_config.py", course / "nbgrader_config.py")
    shutil.copytree(ROOT / "ko" / "solutions" / CHAPTER, course / "solutions" / CHAPTER)
    _nbgrader(course, "generate_assignment", CHAPTER, "--force")
    released = course / "notebooks" / CHAPTER / f"{CHAPTER}.ipynb"
    wrong = next(s for s in submissions() if s.chapter == CHAPTER and s.name == "item_per_step")
    mistake = nbformat.read(course / "solutions" / CHAPTER / f"{CHAPTER}.ipynb", as_version=4)  # the rest solved
    for cell in mistake.cells:
        if nbgrader_meta(cell).get("grade_id") == wrong.solution:
            cell.source = wrong.source
    for student, nb in (("reference", nbformat.read(course / "solutions" / CHAPTER / f"{CHAPTER}.ipynb", 4)),
                        ("blank", nbformat.read(released, as_version=4)), ("mistake", mistake)):
        (course / "submitted" / student / CHAPTER).mkdir(parents=True)
        nbformat.write(nb, course / "submitted" / student / CHAPTER / f"{CHAPTER}.ipynb")
    _nbgrader(course, "autograde", CHAPTER, "--force", "--create")
    _nbgrader(course, "generate_feedback", CHAPTER, "--force")
    return course, wrong


def test_a_korean_class_is_released_and_graded_with_the_english_grade_ids_and_points(korean_class):
    course, wrong = korean_class
    points = grade_cells(load(solution_path(CHAPTER)))
    released = nbformat.read(course / "notebooks" / CHAPTER / f"{CHAPTER}.ipynb", as_version=4)
    assert {nbgrader_meta(c)["grade_id"]: nbgrader_meta(c)["points"] for c in released.cells
            if nbgrader_meta(c).get("grade")} == points
    assert any("여기에 코드를 작성하세요" in c.source for c in released.cells)  # the Korean stub
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        scores = {s: gb.find_submission(CHAPTER, s).score for s in ("reference", "blank", "mistake")}
        mistake = gb.find_submission(CHAPTER, "mistake")
        lost = {g.name for nb in mistake.notebooks for g in nb.grades if g.cell_type == "code" and g.score != g.max_score}
    assert scores["reference"] == sum(points.values()) and scores["blank"] == 0, scores
    assert lost == set(wrong.fails), lost


def test_the_feedback_names_the_mistake_in_korean(korean_class):
    course, _ = korean_class
    html = (course / "feedback" / "mistake" / CHAPTER / f"{CHAPTER}.html").read_text(encoding="utf-8")
    assert "호스트 동기화" in html and "배치마다" in html, "the check's message is not Korean in the feedback"
    assert "a host sync runs once per batch" not in html
