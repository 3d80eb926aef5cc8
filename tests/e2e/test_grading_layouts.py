"""Grading works wherever the course package is installed (issue 37).

The sandboxed kernel and the verdict worker must import the `helpers` the grading process imports: the course
folder's own, an editable install from another clone, or a regular install in site-packages. Each layout is
built here the way an instructor makes it, and the grader is run in it as a separate process (its imports are
what is tested), with the environment's editable install of this repository still in place, as in the
instructor's report: a copy of the course beside the clone the packages were installed from.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support.layout import ROOT

#: what the grader process prints: the helpers it imports, and what the sandbox check said ("" = the same there)
PROBE = """import json, os, sys
from pathlib import Path
import helpers
from course_tools.grading.engine.sandbox import helpers_in_sandbox
print(json.dumps({"mine": os.path.realpath(helpers.__path__[0]), "problem": helpers_in_sandbox(Path(sys.argv[1]))}))
"""


def _copy_package(target: Path, *names: str) -> None:
    for name in names:
        shutil.copytree(ROOT / name, target / name, ignore=shutil.ignore_patterns("__pycache__"))


def _grader(cwd: Path, course: Path, pythonpath: Path | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    proc = subprocess.run([sys.executable, "-c", PROBE, str(course)], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _course_folder(tmp_path: Path, with_packages: bool) -> Path:
    course = tmp_path / "course"
    course.mkdir()
    shutil.copy(ROOT / "nbgrader_config.py", course / "nbgrader_config.py")
    if with_packages:  # the repository's tracked files copied to a new folder
        _copy_package(course, "helpers", "course_tools")
    return course


def test_the_course_folders_own_helpers_are_what_the_sandbox_imports(tmp_path):
    course = _course_folder(tmp_path, with_packages=True)
    seen = _grader(course, course)
    assert seen == {"mine": str((course / "helpers").resolve()), "problem": ""}


def test_an_editable_install_from_another_clone_is_what_the_sandbox_imports(tmp_path):
    course = _course_folder(tmp_path, with_packages=False)  # the course apart from the clone installed from
    seen = _grader(course, course)
    assert seen["problem"] == "" and not Path(seen["mine"]).is_relative_to(course), seen  # the install's own clone


def test_a_regular_install_in_site_packages_is_what_the_sandbox_imports(tmp_path):
    site = tmp_path / "env" / "lib" / "site-packages"  # stands in for a non-editable `pip install`
    site.mkdir(parents=True)
    _copy_package(site, "helpers", "course_tools")
    course = _course_folder(tmp_path, with_packages=False)
    seen = _grader(course, course, pythonpath=site)
    assert seen == {"mine": str((site / "helpers").resolve()), "problem": ""}


def test_the_verdict_worker_starts_on_the_course_folders_own_helpers(tmp_path):
    course = _course_folder(tmp_path, with_packages=True)
    program = ("import sys; from course_tools.grading.engine.apart_worker import VerdictWorker\n"
               "w = VerdictWorker(sandbox=True, course_root=sys.argv[1]).start()\n"
               "print('started', w.ready); w.close()\n")
    proc = subprocess.run([sys.executable, "-c", program, str(course)], cwd=course, capture_output=True, text=True,
                          timeout=300, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert proc.returncode == 0 and "started True" in proc.stdout, proc.stderr[-2000:]


def test_grading_stops_before_the_first_submission_when_the_sandbox_would_not_import_the_checks(monkeypatch):
    from course_tools.grading.class_level import grade
    from course_tools.grading.engine import sandbox

    monkeypatch.setattr(sandbox, "sandbox_problem", lambda: "")
    monkeypatch.setattr(sandbox, "helpers_in_sandbox", lambda root: "the sandbox does not import the grader's "
                        "`helpers` (/x/helpers): ModuleNotFoundError: No module named 'helpers'. Install ...")

    class Course:
        root = ROOT

        @staticmethod
        def limits():
            return type("Limits", (), {"sandbox": True})()

    with pytest.raises(SystemExit, match=r"stopped before the first submission: the sandbox does not import "
                                         r"the grader's `helpers` \(/x/helpers\)"):
        grade.require_sandbox(Course())


def test_the_sandbox_refuses_to_guess_between_two_helpers(monkeypatch, tmp_path):
    from course_tools.grading.engine import sandbox

    monkeypatch.setattr(sandbox, "_package_dirs", lambda: [tmp_path / "a" / "helpers", tmp_path / "b" / "helpers"])
    with pytest.raises(sandbox.SandboxUnavailable, match="cannot tell which `helpers`"):
        sandbox.helpers_root()


@pytest.mark.slow
def test_a_class_graded_in_a_copied_course_folder_scores_full_marks_and_nothing_crashes(tmp_path):
    """The instructor's report, end to end: a copy of the course, graded from it, the packages installed from
    another clone. Before the fix every submission ended "crashed" (No module named 'helpers')."""
    course = _course_folder(tmp_path, with_packages=True)
    shutil.copytree(ROOT / "solutions" / "00_start", course / "solutions" / "00_start")
    shutil.copytree(ROOT / "notebooks" / "00_start", course / "notebooks" / "00_start")
    answered = course / "submitted" / "alice" / "00_start"
    answered.mkdir(parents=True)
    shutil.copy(ROOT / "solutions" / "00_start" / "00_start.ipynb", answered / "00_start.ipynb")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    run = lambda *args: subprocess.run([sys.executable, "-m", *args], cwd=course, env=env, capture_output=True,  # noqa: E731
                                       text=True, timeout=600)
    assert run("nbgrader", "db", "student", "add", "alice").returncode == 0
    graded = run("course_tools", "grade", "--course", str(course), "--assignment", "00_start")
    assert graded.returncode == 0, graded.stderr[-3000:]
    row = next(line for line in graded.stdout.splitlines() if line.startswith("alice"))
    assert "3/3" in row and "crashed" not in graded.stdout, graded.stdout
