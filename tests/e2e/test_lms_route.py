"""The laptop-and-LMS route, end to end with nbgrader's own command (INSTRUCTORS.md, "Laptops and an LMS"):

the student edition's notebook -> each learner's work as the LMS hands it back (one download, holding a
file per learner named `<id>_<notebook>` or an archive per learner) -> `nbgrader zip_collect` with the
course's `FileNameCollectorPlugin.named_regexp` -> `python -m course_tools grade` -> scores. One chapter
(00_start), two learners: about 15 s. The name rule itself is checked in-process, in many shapes.
"""

import copy
import io
import re
import shutil
import subprocess
import sys
import zipfile

import nbformat
import pytest
from traitlets.config.loader import PyFileConfigLoader

from support.layout import ROOT, grade_cells, load, nbgrader_meta, solution_path
from course_tools.grading.course import Course
from course_tools.handout import build

REGEXP = PyFileConfigLoader("nbgrader_config.py", path=str(ROOT)).load_config().FileNameCollectorPlugin.named_regexp
EXTRACTED = "/course/downloaded/02_devices/extracted/"


@pytest.mark.parametrize("path, student, notebook", [
    ("pat_smith_02_devices.ipynb", "pat_smith", "02_devices.ipynb"),                 # a file per learner, id first
    ("class_download/pat_smith_02_devices.ipynb", "pat_smith", "02_devices.ipynb"),  # inside the LMS's one zip
    ("class_download/lee_wong/02_devices.ipynb", "lee_wong", "02_devices.ipynb"),    # an archive per learner
    ("lee_wong/02_devices/02_devices.ipynb", "lee_wong", "02_devices.ipynb"),        # the learner zipped the folder
    ("02_devices/kim_02_devices.ipynb", "kim", "02_devices.ipynb"),
])
def test_the_collector_reads_the_student_id_from_either_shape(path, student, notebook):
    found = re.match(REGEXP, EXTRACTED + path)
    assert found and found["student_id"] == student and found["file_id"] == notebook, found and found.groupdict()


@pytest.mark.parametrize("path", [
    "02_devices/02_devices.ipynb",             # no learner in the name: skipped, never graded as "02_devices"
    "pat_smith_02_devices-Copy1.ipynb",        # a renamed copy: skipped (zip_collect warns), so rename and collect again
    "lee_wong/.ipynb_checkpoints/02_devices-checkpoint.ipynb",
    "__MACOSX/lee_wong/._02_devices.ipynb",
])
def test_the_collector_skips_what_is_no_submission(path):
    assert re.match(REGEXP, EXTRACTED + path) is None


def _lms_download(folder, solved, blank):
    """What the LMS hands back: one zip holding pat_smith's file and lee_wong's own archive."""
    learner_zip = io.BytesIO()
    with zipfile.ZipFile(learner_zip, "w") as z:
        z.writestr("00_start.ipynb", nbformat.writes(blank))
    folder.mkdir(parents=True)
    with zipfile.ZipFile(folder / "00_start_submissions.zip", "w") as z:
        z.writestr("pat_smith_00_start.ipynb", nbformat.writes(solved))
        z.writestr("lee_wong.zip", learner_zip.getvalue())


@pytest.mark.slow
def test_handed_back_zips_are_collected_by_nbgrader_and_graded(released_course, tmp_path):
    course = tmp_path / "course"
    shutil.copytree(released_course, course, ignore=shutil.ignore_patterns("submitted", "autograded", "feedback"))
    edition = build(ROOT, tmp_path / "handout" / "gpu-course")
    handed_out = load(edition.folder / "notebooks" / "00_start" / "00_start.ipynb")
    answers = {nbgrader_meta(c)["grade_id"]: c.source for c in load(solution_path("00_start")).cells
               if nbgrader_meta(c).get("solution")}
    solved = copy.deepcopy(handed_out)
    for cell in solved.cells:
        cell.source = answers.get(nbgrader_meta(cell).get("grade_id"), cell.source)
    _lms_download(course / "downloaded" / "00_start" / "archive", solved, handed_out)

    def run(*args):
        return subprocess.run([sys.executable, "-m", *args], cwd=course, capture_output=True, text=True, timeout=600)

    with Course(course).gradebook() as gb:  # the roster (INSTRUCTORS.md section 1), in-process: not the route under test
        for student in ("pat_smith", "lee_wong"):
            gb.add_student(student)
    collected = run("nbgrader", "zip_collect", "00_start")
    assert collected.returncode == 0, collected.stdout + collected.stderr
    for student in ("pat_smith", "lee_wong"):
        assert (course / "submitted" / student / "00_start" / "00_start.ipynb").is_file(), collected.stderr
    graded = run("course_tools", "grade", "--assignment", "00_start", "--no-progress")
    assert graded.returncode == 0, graded.stdout + graded.stderr
    full = sum(grade_cells(load(solution_path("00_start"))).values())
    assert re.search(rf"pat_smith +{full}/{full} graded", graded.stdout), graded.stdout
    assert re.search(rf"lee_wong +0/{full} wrong", graded.stdout), graded.stdout


def test_the_guide_s_example_for_folders_named_by_full_name_and_number_works():
    guide = (ROOT / "INSTRUCTORS.md").read_text()
    example = re.search(r'named_regexp = \(\n\s+r"(.+?)"\n\)', guide).group(1)
    found = re.match(example, EXTRACTED + "class/Pat Smith_12345_assignsubmission_file_/02_devices.ipynb")
    assert found and found["student_id"] == "12345" and found["file_id"] == "02_devices.ipynb"
    assert re.match(example, EXTRACTED + "class/Pat Smith_12345_assignsubmission_file_/notes.ipynb") is None
