"""``classroom check`` finds every solution a learner can read on the course paths (course_tools/classroom/exposure.py).

The learner here is this test's own login and the modes decide (the search reads mode bits, never ``access()``,
so it judges for a learner even when run as root): what they may pass through and read is found, what a folder
above closes is not.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from course_tools.classroom.exposure import course_secrets, exposed

ME = __import__("pwd").getpwuid(os.getuid()).pw_name
SECRET = "assert torch.allclose(answer(x), reference(x), atol=1e-6)"


def _notebook(path: Path, *lines: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    cells = [{"cell_type": "code", "source": "\n".join(lines), "metadata": {}, "outputs": [], "execution_count": None}]
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    return path


def _course(root: Path) -> Path:
    _notebook(root / "solutions" / "02_devices" / "02_devices.ipynb",
              "### BEGIN HIDDEN TESTS", SECRET, "### END HIDDEN TESTS")
    return root


def test_the_secret_lines_come_from_the_courses_solutions(tmp_path):
    assert SECRET in course_secrets([_course(tmp_path / "course")])


def test_a_readable_copy_of_the_solutions_is_found_and_a_closed_folder_hides_it(tmp_path):
    share = tmp_path / "opt-course"
    _course(share)
    tmp_path.chmod(0o755)
    secrets = [SECRET]
    found = exposed([share], [ME], secrets)
    assert len(found) == 1 and "02_devices.ipynb is readable by " + ME in found[0], found
    assert "solutions folder" in found[0]
    (share / "solutions").chmod(0o600)  # the learner (its owner here) may no longer pass through
    assert exposed([share], [ME], secrets) == []
    (share / "solutions").chmod(0o755)


def test_a_hidden_test_line_anywhere_readable_is_found_whatever_the_file(tmp_path):
    share = tmp_path / "edition"
    leak = share / "helpers" / "checks" / "ch02.py"
    leak.parent.mkdir(parents=True)
    leak.write_text(f"def check():\n    {SECRET}  # copied from the hidden test\n")
    (share / "README.md").write_text("nothing secret here\n")
    found = exposed([share], [ME], [SECRET])
    assert len(found) == 1 and "ch02.py" in found[0] and "hidden test or a reference answer" in found[0], found
    leak.chmod(0o200)  # no read bit for its owner, the learner here
    assert exposed([share], [ME], [SECRET]) == []


def test_a_gradebook_and_a_git_history_are_secret_by_what_they_are(tmp_path):
    share = tmp_path / "checkout"
    (share / ".git" / "objects").mkdir(parents=True)
    (share / "gradebook.db").write_bytes(b"SQLite format 3\0")
    found = "\n".join(exposed([share], [ME], []))
    assert "a git repository" in found and "the gradebook" in found, found


def test_a_path_that_does_not_exist_is_no_finding(tmp_path):
    assert exposed([tmp_path / "missing"], [ME], [SECRET]) == []
