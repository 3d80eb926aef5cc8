"""Grading holds on a busy machine: with every core busy (three busy processes per core, started and ended
here), chapter 06, whose checks start DDP ranks, gives the reference solution full marks, and an answer that
loops forever in a rank a bounded, clearly labelled outcome that costs only its exercise's points.

Under the old wall-clock limit (15 s per check) this machine's load alone took 5 of 06's 8 points from the
reference at load 1.5, and all 8 at load 4-8. The limits are now CPU time (course_tools/grading/engine/watchdog.py).
"""

import os
import shutil
import subprocess
import sys
import time

import nbformat
import pytest

from support.layout import ROOT, grade_cells, load, nbgrader_meta, no_child_left, solution_path
from course_tools.grading.course import Course
from course_tools.grading.class_level.grade import grade
from course_tools.grading.release.generate import generate_release

#: `load`: make test runs it alone, after the rest (its busy processes would slow every test beside it)
pytestmark = [pytest.mark.slow, pytest.mark.load]

CHAPTER = "06_multi_gpu"
#: the exercise the looping answer gets wrong; every other answer is the reference's
LOOPING = "average-gradients"
LOOP = "def average_gradients(model):\n    while True:  # computes forever, in every rank\n        pass\n"
#: busy processes per core: the load the issue asks the grader to hold under
PER_CORE = 3
#: each busy process ends by itself after this long, whatever happens to the test
BUSY_FOR_S = 900


@pytest.fixture
def busy_machine():
    """Three processes per core that compute without end, ended after the test (and by themselves)."""
    spin = f"import time\nend = time.monotonic() + {BUSY_FOR_S}\nwhile time.monotonic() < end:\n    pass\n"
    busy = [subprocess.Popen([sys.executable, "-c", spin]) for _ in range(PER_CORE * (os.cpu_count() or 1))]
    time.sleep(1.0)
    try:
        yield len(busy)
    finally:
        for proc in busy:
            proc.kill()
        for proc in busy:
            proc.wait()


def _course(root):
    shutil.copy(ROOT / "nbgrader_config.py", root / "nbgrader_config.py")
    shutil.copytree(ROOT / "solutions" / CHAPTER, root / "solutions" / CHAPTER)
    course = Course(root)
    generate_release(root / "release", [CHAPTER], root=root, db_url=course.db_url)
    return course


def _submit(course, student, nb):
    folder = course.submitted_dir / student / CHAPTER
    folder.mkdir(parents=True)
    nbformat.write(nb, str(folder / f"{CHAPTER}.ipynb"))
    with course.gradebook() as gb:
        gb.update_or_create_student(student)


def _answered(course, **instead):
    """The released notebook with the reference answers typed in, but ``instead[grade_id]`` where given."""
    answers = {nbgrader_meta(c)["grade_id"]: c.source for c in load(solution_path(CHAPTER)).cells
               if nbgrader_meta(c).get("solution")}
    answers.update({gid.replace("_", "-"): source for gid, source in instead.items()})
    nb = load(course.root / "release" / CHAPTER / f"{CHAPTER}.ipynb")
    for cell in nb.cells:
        if nbgrader_meta(cell).get("solution"):
            cell.source = answers[nbgrader_meta(cell)["grade_id"]]
    return nb


def test_the_reference_keeps_full_marks_and_a_looping_answer_ends_labelled(tmp_path, busy_machine):
    course = _course(tmp_path)
    _submit(course, "reference", _answered(course))
    _submit(course, "looping", _answered(course, average_gradients=LOOP))
    points = grade_cells(load(solution_path(CHAPTER)))
    full = sum(points.values())
    lost = sum(p for gid, p in points.items() if gid.startswith(LOOPING))

    start = time.monotonic()
    with no_child_left():  # every rank of the looping answer is gone too
        outcomes = {o.student: o for o in grade(course, CHAPTER, progress=False, jobs=2)}
    took = time.monotonic() - start

    assert (outcomes["reference"].status, outcomes["reference"].score) == ("graded", full), outcomes["reference"]
    looping = outcomes["looping"]
    assert (looping.status, looping.score) == ("timed out", full - lost), looping
    assert "ran past its limit" in looping.detail and "of CPU" in looping.detail, looping.detail
    print(f"graded 2 submissions of {CHAPTER} beside {busy_machine} busy processes in {took:.0f} s")
