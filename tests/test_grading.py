"""Class grading through real nbgrader: every submission in tests/grading_cases/matrix.py gets its documented outcome.

One temporary course (``matrix.make_course``) is graded once for the whole
module: a bystander first, then the matrix; the tests then read the outcomes,
the CSV, the feedback pages and the gradebook, and re-grade to prove nothing
changes.
"""

from __future__ import annotations

import csv
import html
import re
import sys
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "grading_cases"))
import matrix  # noqa: E402

from helpers.grading.cli import main as cli  # noqa: E402
from helpers.grading.course import Course  # noqa: E402
from helpers.grading.release import generate_release  # noqa: E402
from helpers.grading.status import tamper_findings  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow


def _csv(path: Path) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """The course after: bystander graded, the whole matrix graded, CSV exported, feedback written."""
    root = tmp_path_factory.mktemp("course")
    matrix.make_course(root, ROOT / "nbgrader_config.py")
    course = Course(root)
    generate_release(root / "notebooks", [matrix.ASSIGNMENT], root=root, db_url=course.db_url)
    with course.gradebook() as gb:
        for student in matrix.ROSTER:
            gb.update_or_create_student(student)
    released = matrix.released(root)

    matrix.write_submission(root, "bystander", matrix.ASSIGNMENT, matrix.solved(released))
    assert cli(["grade", "--course", str(root), "--no-progress"]) == 0
    with course.gradebook() as gb:
        bystander_before = gb.find_submission(matrix.ASSIGNMENT, "bystander").score

    for student, make in matrix.CASES.items():
        matrix.write_submission(root, student, matrix.ASSIGNMENT, make(released))
    matrix.write_submission(root, "solved", matrix.GHOST_ASSIGNMENT, matrix.solved(released))
    renamed = matrix.write_submission(root, "renamed", matrix.ASSIGNMENT, matrix.solved(released))
    renamed.rename(renamed.with_name(f"{matrix.ASSIGNMENT}-Copy1.ipynb"))  # Jupyter's "Duplicate"
    assert cli(["grade", "--course", str(root), "--no-progress", "--jobs", "3"]) == 0
    assert cli(["export", "--course", str(root)]) == 0
    feedback_rc = cli(["feedback", "--course", str(root)])
    return SimpleNamespace(root=root, course=course, bystander_before=bystander_before, feedback_rc=feedback_rc,
                           outcomes=course.load_outcomes(), csv=_csv(root / "grades.csv"))


@pytest.mark.parametrize("student", sorted(matrix.OUTCOMES))
def test_each_submission_gets_its_documented_outcome(graded, student):
    status, score, says = matrix.OUTCOMES[student]
    got = graded.outcomes[f"{student}/{matrix.ASSIGNMENT}"]
    assert (got["status"], got["score"]) == (status, score), got
    assert says.lower() in got["detail"].lower(), got
    if score is not None:
        assert got["max_score"] == matrix.MAX_SCORE


def test_unknown_assignment_is_reported_not_graded(graded):
    got = graded.outcomes[f"solved/{matrix.GHOST_ASSIGNMENT}"]
    assert got["status"] == "unknown" and got["score"] is None
    assert matrix.GHOST_ASSIGNMENT in got["detail"]
    assert f"rename the folder to one of {matrix.ASSIGNMENT}" in got["detail"]  # says what to do next


def test_a_renamed_notebook_says_which_file_to_rename(graded):
    got = graded.outcomes[f"renamed/{matrix.ASSIGNMENT}"]
    assert (got["status"], got["score"]) == ("unreadable", None)
    assert f"{matrix.ASSIGNMENT}-Copy1.ipynb: rename it to {matrix.ASSIGNMENT}.ipynb" in got["detail"], got


def test_csv_has_status_beside_score_and_never_a_plain_zero_for_a_failed_run(graded):
    rows = {(r["student_id"], r["assignment"]): r for r in graded.csv}
    assert len(rows) == len(graded.csv), "duplicate rows"
    for student, (status, score, _) in matrix.OUTCOMES.items():
        row = rows[(student, matrix.ASSIGNMENT)]
        assert row["status"] == status
        assert row["score"] == ("" if score is None else str(score)), row
    for row in graded.csv:
        if row["status"] in ("crashed", "unreadable", "unknown") and row["score"] == "":
            assert row["detail"], row  # says why there is no score


def _page(graded, student) -> str:
    return (graded.root / "feedback" / student / matrix.ASSIGNMENT / f"{matrix.ASSIGNMENT}.html").read_text()


def test_feedback_shows_code_and_checks_but_no_hidden_test(graded):
    assert graded.feedback_rc == 0
    pages = sorted((graded.root / "feedback").glob(f"*/{matrix.ASSIGNMENT}/*.html"))
    finished = [s for s, (_, score, _) in matrix.OUTCOMES.items() if score is not None]
    assert sorted(p.parent.parent.name for p in pages) == sorted(finished + ["bystander"])
    for page in pages:
        raw = page.read_text()
        assert matrix.HIDDEN_MARK not in raw, page  # neither source nor traceback line
        assert "BEGIN HIDDEN TESTS" not in raw
    text = html.unescape(re.sub(r"<[^>]+>", "", _page(graded, "wrong")))
    assert "return x * abs(x)" in text  # the learner's code
    assert "square(3) gave" in text  # the visible check
    assert "AssertionError" in text  # the hidden check's result, without its source or traceback
    assert "Score: 0.0 / 1.0" in text and "Score: 2.0 / 2.0" in text
    assert "Traceback (most recent call last)" not in text.split("square-check")[1].split("total-check")[0]


def test_leak_check_ignores_lines_the_learner_was_given(graded):
    """A hidden test that repeats a line of the visible half (every check of 02_devices does) is
    no leak: counting it deleted every page of the chapter. A real hidden line still counts."""
    from helpers.grading.feedback import hidden_lines, leaked_lines

    hidden = hidden_lines(graded.course, matrix.ASSIGNMENT)
    assert matrix.SHARED_LINE not in hidden
    secret = next(line for line in hidden if matrix.HIDDEN_MARK in line)
    assert leaked_lines(f"<pre>{matrix.SHARED_LINE}</pre>", hidden) == []
    assert leaked_lines(f"<pre>{html.escape(secret)}</pre>", hidden) == [secret]


def test_no_feedback_for_a_run_that_did_not_finish(graded):
    for student in ("dies", "bad_json", "swallow_interrupt", "unknown_student"):
        assert not (graded.root / "feedback" / student / matrix.ASSIGNMENT).exists()


def test_regrading_changes_nothing_and_bystander_is_intact(graded, capsys):
    root = graded.root
    for student in ("bystander", "assert_true", "dies", "bad_json"):
        assert cli(["grade", "--course", str(root), "--student", student, "--no-progress"]) == 0
    assert "per minute" in capsys.readouterr().err  # the rate is printed without the progress bar too
    assert cli(["export", "--course", str(root)]) == 0
    assert graded.course.load_outcomes() == graded.outcomes
    assert _csv(root / "grades.csv") == graded.csv
    with graded.course.gradebook() as gb:
        assert gb.find_submission(matrix.ASSIGNMENT, "bystander").score == graded.bystander_before == matrix.MAX_SCORE
        students = [s.student.id for s in gb.find_assignment(matrix.ASSIGNMENT).submissions]
        assert len(students) == len(set(students))


def test_release_keeps_a_learners_edits(tmp_path):
    from helpers.grading.release import release

    matrix.make_course(tmp_path, ROOT / "nbgrader_config.py")
    first = release(root=tmp_path)
    target = tmp_path / "notebooks" / matrix.ASSIGNMENT / f"{matrix.ASSIGNMENT}.ipynb"
    assert target in first.written and not first.kept
    assert not release(root=tmp_path).written  # unchanged: nothing rewritten

    nb = nbformat.read(str(target), as_version=4)
    nb.cells[3].source = "def square(x):\n    return x * x  # my work\n"
    nbformat.write(nb, str(target))
    edited = target.read_bytes()
    assert cli(["release", "--course", str(tmp_path)]) == 1  # refuses, says so
    assert target.read_bytes() == edited

    forced = release(root=tmp_path, force=True)
    assert target in forced.written and forced.backups[0].read_bytes() == edited
    assert b"my work" not in target.read_bytes()


def test_a_test_changed_after_release_is_not_tampering():
    """Re-grading after the instructor fixed a test must not flag the class: the learner's cell
    still matches the checksum it was released with."""
    from nbgrader import utils

    old = "assert square(3) == 9\n"
    learner = nbformat.v4.new_code_cell(old, metadata=matrix._meta(grade=True, solution=False, locked=True,
                                                                    grade_id="square-check", points=1))
    learner.metadata.nbgrader["checksum"] = utils.compute_checksum(learner)
    nb = nbformat.v4.new_notebook(cells=[learner])
    fixed = [SimpleNamespace(name="square-check", locked=True, source="assert square(3) == 9.0\n")]
    assert tamper_findings(nb, fixed) == []
    learner.source = "assert True\n"
    assert "changed" in tamper_findings(nb, fixed)[0]
    assert "deleted" in tamper_findings(nbformat.v4.new_notebook(cells=[]), fixed)[0]


def test_repo_config_applies_the_caps():
    from traitlets.config.loader import PyFileConfigLoader

    from helpers.grading.limits import LimitedExecute

    cfg = PyFileConfigLoader("nbgrader_config.py", path=str(ROOT)).load_config()
    assert LimitedExecute in cfg.Autograde.autograde_preprocessors
    assert cfg.Execute.timeout > 0 and cfg.GradingLimits.memory_mb > 0 and cfg.GradingLimits.output_kb > 0
    assert cfg.GradingLimits.notebook_timeout > cfg.Execute.timeout


def test_whole_submission_cap_stops_the_run_and_its_kernel(tmp_path, monkeypatch):
    """A submission past ``notebook_timeout`` is killed with every process under it: timed out, no score."""
    import psutil

    from helpers.grading.grade import grade_one
    from helpers.grading.limits import GradingLimits

    matrix.make_course(tmp_path, ROOT / "nbgrader_config.py")
    course = Course(tmp_path)
    generate_release(tmp_path / "notebooks", [matrix.ASSIGNMENT], root=tmp_path, db_url=course.db_url)
    with course.gradebook() as gb:
        gb.update_or_create_student("slow")
    slow = matrix._solve(matrix.released(tmp_path), square="import time\ntime.sleep(4.5)\nsquare = abs\n")
    matrix.write_submission(tmp_path, "slow", matrix.ASSIGNMENT, slow)
    monkeypatch.setattr(Course, "limits", lambda self: GradingLimits(notebook_timeout=6, memory_mb=512))
    before = {p.pid for p in psutil.Process().children(recursive=True)}

    got = grade_one(course, "slow", matrix.ASSIGNMENT, ["slow"], [matrix.ASSIGNMENT])

    assert (got.status, got.score) == ("timed out", None)
    assert "6 s" in got.detail
    assert {p.pid for p in psutil.Process().children(recursive=True)} <= before  # no kernel left behind
    assert not (tmp_path / "autograded" / "slow" / matrix.ASSIGNMENT).exists()
