"""Class grading through real nbgrader: every submission in tests/support/matrix.py gets its documented outcome.

One temporary course (``matrix.make_course``) is graded once for the whole
module: a bystander first, then the matrix; the tests then read the outcomes,
the CSV, the feedback pages and the gradebook, and re-grade to prove nothing
changes.
"""

from __future__ import annotations

import csv
import json
import html
import re
import sys
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest

from support import matrix  # noqa: E402

from support.layout import no_child_left  # noqa: E402
from course_tools.cli import main as cli  # noqa: E402
from course_tools.grading.course import Course  # noqa: E402
from course_tools.grading.release.generate import generate_release  # noqa: E402
from course_tools.grading.class_level.status import tamper_findings  # noqa: E402

from support.layout import ROOT  # noqa: E402

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

    matrix.write_submission(root, "bystander", matrix.ASSIGNMENT, matrix.solved(released),
                            timestamp="2025-01-15 09:00:00.000000 UTC")  # before the due date: not late
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
    assert 'check_equal(solved(square, 3), 9, "square(3)")' in text  # the visible check
    assert "CheckFailed: square(-4)" in text  # the hidden check's message, without its source or traceback
    assert "Score: 0.0 / 1.0" in text and "Score: 2.0 / 2.0" in text
    assert "Traceback (most recent call last)" not in text.split("square-check")[1].split("total-check")[0]


def test_leak_check_ignores_lines_the_learner_was_given(graded):
    """A hidden test that repeats a line of the visible half (every check of 02_devices does) is
    no leak: counting it deleted every page of the chapter. A real hidden line still counts."""
    from course_tools.grading.class_level.feedback import hidden_lines, leaked_lines

    hidden = hidden_lines(graded.course, matrix.ASSIGNMENT)
    assert matrix.SHARED_LINE not in hidden
    secret = next(line for line in hidden if matrix.HIDDEN_MARK in line)
    assert leaked_lines(f"<pre>{matrix.SHARED_LINE}</pre>", hidden) == []
    assert leaked_lines(f"<pre>{html.escape(secret)}</pre>", hidden) == [secret]


def test_no_feedback_for_a_run_that_did_not_finish(graded):
    for student in ("bad_json", "all_stripped", "unknown_student"):
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
    from course_tools.grading.release.generate import release

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

    from course_tools.grading.engine.execute import LimitedExecute

    cfg = PyFileConfigLoader("nbgrader_config.py", path=str(ROOT)).load_config()
    assert LimitedExecute in cfg.Autograde.autograde_preprocessors
    assert cfg.Execute.timeout > 0 and cfg.GradingLimits.memory_mb > 0 and cfg.GradingLimits.output_kb > 0
    assert cfg.GradingLimits.notebook_timeout > cfg.Execute.timeout


def test_whole_submission_cap_stops_the_run_and_its_kernel(tmp_path, monkeypatch):
    """A submission past ``notebook_timeout`` is killed with every process under it: timed out, no score."""
    from course_tools.grading.class_level.grade import grade_one
    from course_tools.grading.settings import GradingLimits

    matrix.make_course(tmp_path, ROOT / "nbgrader_config.py")
    course = Course(tmp_path)
    generate_release(tmp_path / "notebooks", [matrix.ASSIGNMENT], root=tmp_path, db_url=course.db_url)
    with course.gradebook() as gb:
        gb.update_or_create_student("slow")
    slow = matrix._solve(matrix.released(tmp_path), square="import time\ntime.sleep(4.5)\nsquare = abs\n")
    matrix.write_submission(tmp_path, "slow", matrix.ASSIGNMENT, slow)
    monkeypatch.setattr(Course, "limits", lambda self: GradingLimits(notebook_timeout=6, memory_mb=512))
    with no_child_left(count_zombies=True):  # no kernel left behind, nor one left unreaped
        got = grade_one(course, "slow", matrix.ASSIGNMENT, ["slow"], [matrix.ASSIGNMENT])

    assert (got.status, got.score) == ("timed out", None)
    assert "6 s" in got.detail
    assert not (tmp_path / "autograded" / "slow" / matrix.ASSIGNMENT).exists()


def _autograded(graded, student) -> nbformat.NotebookNode:
    path = graded.root / "autograded" / student / matrix.ASSIGNMENT / f"{matrix.ASSIGNMENT}.ipynb"
    return nbformat.read(str(path), as_version=4)


def test_a_check_stopped_at_its_cpu_budget_says_what_the_reference_uses_here(graded):
    """The message of a check stopped at its CPU budget gives what the answer used against the reference
    solution's cost on this machine (measured once, in the sandbox, and kept)."""
    (cell,) = [c for c in _autograded(graded, "loop_in_check").cells
               if c.metadata.get("nbgrader", {}).get("grade_id") == "total-check"]
    (error,) = [o for o in cell.outputs if o.output_type == "error"]
    assert error.ename == "CellTimeoutError" and "s of CPU time (it used" in error.evalue, error.evalue
    assert "the reference solution uses" in error.evalue and "on this machine" in error.evalue, error.evalue
    kept = json.loads((graded.root / "autograded" / ".grading" / "reference-costs.json").read_text())
    assert set(kept[f"{matrix.ASSIGNMENT}/{matrix.ASSIGNMENT}"]["cpu_s"]) == {"square-check", "total-check"}


def test_a_check_whose_reference_needs_more_cpu_here_than_its_budget_costs_a_correct_answer_nothing(tmp_path):
    """The budget is relative to this machine: a check that needs 1-2 s of CPU here, under a 0.3 s budget, is
    graded again with 3x the reference's cost, and the reference answer scores full marks."""
    from course_tools.grading.class_level.grade import grade_one

    matrix.make_course(tmp_path, ROOT / "nbgrader_config.py")
    with open(tmp_path / "nbgrader_config.py", "a") as config:
        config.write("c.GradingLimits.grade_cell_cpu = 0.3\n")
    source = tmp_path / "solutions" / matrix.ASSIGNMENT / f"{matrix.ASSIGNMENT}.ipynb"
    nb = nbformat.read(str(source), as_version=4)
    heavy = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "total-check")
    heavy.source = heavy.source.replace('"""Check that total adds up."""\n', '"""Check that total adds up."""\n'
                                        "work = sum(i * i for i in range(12_000_000))  # a check that computes\n")
    nbformat.write(nb, str(source))
    course = Course(tmp_path)
    generate_release(tmp_path / "notebooks", [matrix.ASSIGNMENT], root=tmp_path, db_url=course.db_url)
    with course.gradebook() as gb:
        gb.update_or_create_student("solved")
    matrix.write_submission(tmp_path, "solved", matrix.ASSIGNMENT, matrix.solved(matrix.released(tmp_path)))
    got = grade_one(course, "solved", matrix.ASSIGNMENT, ["solved"], [matrix.ASSIGNMENT])
    assert (got.status, got.score) == ("graded", matrix.MAX_SCORE), got
    kept = json.loads((tmp_path / "autograded" / ".grading" / "reference-costs.json").read_text())
    assert kept[f"{matrix.ASSIGNMENT}/{matrix.ASSIGNMENT}"]["cpu_s"]["total-check"] > 0.3


def test_the_sandbox_gives_a_snooping_submission_nothing(graded):
    """It read no course file, wrote nothing beside them, reached no network; its own folder worked."""
    lines = [line for cell in _autograded(graded, "snoop").cells for out in cell.get("outputs", [])
             for line in str(out.get("text", "")).splitlines() if matrix.SNOOP_MARK in line]
    assert len([ln for ln in lines if "blocked" in ln]) == 15, lines
    assert not [ln for ln in lines if "LEAK" in ln], lines
    assert any("wrote scratch True" in ln for ln in lines), lines
    assert not list(graded.root.rglob("pwned.txt")) and not (ROOT / "helpers" / "pwned.txt").exists()
    assert not (graded.root / "autograded" / "snoop" / matrix.ASSIGNMENT / "scratch.txt").exists()


def test_feedback_shows_no_output_of_the_learner_only_capped_messages(graded):
    """rot13_leak printed what it could read, rot13-encoded (the check's source was refused to it); long_message
    raised a 5000-character error."""
    import codecs

    printed = str(_autograded(graded, "rot13_leak").cells)
    assert codecs.encode("square", "rot13") in printed  # it printed
    assert codecs.encode(matrix.HIDDEN_MARK, "rot13") not in printed  # the referee kept the check's frames from it
    leak = html.unescape(_page(graded, "rot13_leak"))
    assert codecs.encode(matrix.HIDDEN_MARK, "rot13") not in leak and codecs.encode("square", "rot13") not in leak
    long = html.unescape(_page(graded, "long_message"))
    assert "ValueError: AAAA" in long and "[... cut]" in long and "A" * 400 not in long


def test_csv_has_exercises_timestamp_and_late_flag(graded):
    rows = {r["student_id"]: r for r in graded.csv if r["assignment"] == matrix.ASSIGNMENT}
    assert (rows["wrong"]["square-check"], rows["wrong"]["total-check"]) == ("0.0", "2.0")
    assert (rows["hang_in_check"]["square-check"], rows["hang_in_check"]["total-check"]) == ("1.0", "0.0")
    assert rows["bad_json"]["square-check"] == "" and rows["bad_json"]["score"] == ""
    assert rows["wrong"]["timestamp"] == "2025-01-15 10:00:00 UTC" and rows["wrong"]["due"] == "2025-01-15 09:30:00 UTC"
    assert (rows["wrong"]["late"], rows["bystander"]["late"], rows["bad_json"]["late"]) == ("yes", "no", "yes")


def _nbgrader_export(root: Path) -> dict:
    import subprocess

    out = root / "nbgrader_export.csv"
    subprocess.run([sys.executable, "-m", "nbgrader", "export", f"--to={out}"], cwd=root, check=True,
                   capture_output=True, timeout=300)
    return {(r["student_id"], r["assignment"]): r for r in _csv(out)}


def test_scores_have_one_source_of_truth_resubmission_and_override(graded):
    """Runs last: it changes the course. A re-submission that no longer parses replaces the old score in the
    gradebook, nbgrader's export and ours; a manual override is honoured and listed everywhere."""
    root, key = graded.root, ("wrong", matrix.ASSIGNMENT)
    assert cli(["override", "wrong", matrix.ASSIGNMENT, "square-check", "1", "--why", "x*abs(x) accepted: the task"
                " only said non-negative", "--course", str(root)]) == 0
    assert cli(["override", "wrong", matrix.ASSIGNMENT, "square-check", "5", "--why", "x", "--course", str(root)]) == 2
    assert cli(["grade", "--course", str(root), "--student", "wrong", "--no-progress"]) == 0  # survives a re-grade
    assert cli(["export", "--course", str(root)]) == 0
    ours = {(r["student_id"], r["assignment"]): r for r in _csv(root / "grades.csv")}
    assert ours[key]["score"] == "3.0" and "manual" in ours[key]["detail"] and "x*abs(x) accepted" in ours[key]["detail"]
    assert float(_nbgrader_export(root)[key]["score"]) == 3.0

    (root / "submitted" / "solved" / matrix.ASSIGNMENT / f"{matrix.ASSIGNMENT}.ipynb").write_text("{ not json")
    assert cli(["grade", "--course", str(root), "--student", "solved", "--no-progress"]) == 0
    assert cli(["export", "--course", str(root)]) == 0
    ours = {(r["student_id"], r["assignment"]): r for r in _csv(root / "grades.csv")}
    assert (ours[("solved", matrix.ASSIGNMENT)]["status"], ours[("solved", matrix.ASSIGNMENT)]["score"]) == ("unreadable", "")
    assert float(_nbgrader_export(root)[("solved", matrix.ASSIGNMENT)]["score"]) == 0.0  # not the stale 3.0
    with graded.course.gradebook() as gb:
        assert "solved" not in [s.student.id for s in gb.find_assignment(matrix.ASSIGNMENT).submissions]
    assert not (root / "autograded" / "solved" / matrix.ASSIGNMENT).exists()


def test_cells_get_cpu_budgets_and_the_wall_clock_limit_is_only_the_outer_one():
    from traitlets.config import Config

    from course_tools.grading.engine.execute import LimitedExecute

    cfg = Config()
    cfg.Execute.timeout = 600
    cfg.GradingLimits.cell_cpu = 60
    cfg.GradingLimits.grade_cell_cpu = 20
    ex = LimitedExecute(config=cfg)
    grade = nbformat.v4.new_code_cell("pass", metadata=matrix._meta(grade=True, solution=False, locked=True,
                                                                     grade_id="g", points=1))
    plain = nbformat.v4.new_code_cell("pass")
    assert ex.cpu_budget(grade) == 20 and ex.cpu_budget(plain) == 60
    assert ex._get_timeout(grade) == ex._get_timeout(plain) == 600
    assert LimitedExecute(config=cfg, calibrating=True).cpu_budget(grade) is None  # measuring the reference


def test_without_a_sandbox_grading_stops_unless_the_instructor_opts_out(tmp_path, monkeypatch, capsys):
    from course_tools.grading.engine import sandbox

    matrix.make_course(tmp_path, ROOT / "nbgrader_config.py")
    course = Course(tmp_path)
    generate_release(tmp_path / "notebooks", [matrix.ASSIGNMENT], root=tmp_path, db_url=course.db_url)
    with course.gradebook() as gb:
        gb.update_or_create_student("solved")
    matrix.write_submission(tmp_path, "solved", matrix.ASSIGNMENT, matrix.solved(matrix.released(tmp_path)))
    monkeypatch.setattr(sandbox, "sandbox_problem", lambda: "bubblewrap (`bwrap`) is not installed")
    with pytest.raises(SystemExit, match="grading stopped: bubblewrap .* not installed.*--no-sandbox"):
        cli(["grade", "--course", str(tmp_path), "--no-progress"])
    assert not course.load_outcomes()  # nothing was graded
    with pytest.raises(sandbox.SandboxUnavailable, match="apt-get install bubblewrap"):
        sandbox.bwrap_command(["python"], tmp_path / "scratch", tmp_path, {})
    assert cli(["grade", "--course", str(tmp_path), "--no-progress", "--no-sandbox"]) == 0
    assert "the sandbox is off" in capsys.readouterr().err
    assert course.load_outcomes()[f"solved/{matrix.ASSIGNMENT}"]["status"] == "graded"


def test_the_sandbox_never_shows_a_course_folder_it_lies_in(tmp_path):
    from course_tools.grading.engine.sandbox import exposed_course_paths

    assert exposed_course_paths(tmp_path / "course", [tmp_path, Path("/usr")]) == [str(tmp_path)]
    assert exposed_course_paths(tmp_path, [tmp_path / ".venv"]) == []


def test_the_sandbox_mounts_no_course_folder_and_passes_no_secret(tmp_path, monkeypatch):
    from course_tools.grading.engine.sandbox import bwrap_command

    monkeypatch.setenv("GRADER_TOKEN", "s3cret")
    cmd = bwrap_command(["python", "-m", "ipykernel_launcher"], tmp_path / "scratch", ROOT,
                        {"JPY_SESSION_NAME": "x", "GRADER_TOKEN": "s3cret"})
    mounted = [cmd[i + 1] for i, arg in enumerate(cmd) if arg in ("--ro-bind", "--bind")]
    assert str(ROOT) not in mounted and not any(m.startswith(str(ROOT / "solutions")) for m in mounted)
    assert "s3cret" not in cmd and "--clearenv" in cmd and "--unshare-net" in cmd
    assert cmd[-3:] == ["python", "-m", "ipykernel_launcher"]


def _edit_source(root: Path, change) -> None:
    path = root / "solutions" / matrix.ASSIGNMENT / f"{matrix.ASSIGNMENT}.ipynb"
    nb = nbformat.read(str(path), as_version=4)
    change(nb)
    nbformat.write(nb, str(path))


def test_rerelease_after_a_test_fix_has_a_supported_path(tmp_path, capsys):
    """Points changed, then a check added, after grading: never a traceback, never a half-changed gradebook."""
    from course_tools.grading.release.generate import release

    matrix.make_course(tmp_path, ROOT / "nbgrader_config.py")
    release(root=tmp_path)
    course = Course(tmp_path)
    with course.gradebook() as gb:
        gb.update_or_create_student("alice")
        gb.add_submission(matrix.ASSIGNMENT, "alice")
    db = tmp_path / "gradebook.db"

    _edit_source(tmp_path, lambda nb: matrix._cell(nb, "total-check").metadata.nbgrader.update(points=4))
    assert cli(["release", "--course", str(tmp_path)]) == 0  # a second release, notebooks/ not committed: fine
    assert "run `python -m course_tools grade --assignment 01_tiny`" in capsys.readouterr().out
    with course.gradebook() as gb:
        assert gb.find_assignment(matrix.ASSIGNMENT).max_score == 5

    extra = nbformat.v4.new_code_cell('"""Check that square(0) is 0."""\nassert square(0) == 0\n', metadata=matrix._meta(
        solution=False, grade=True, locked=True, grade_id="zero-check", points=1))
    _edit_source(tmp_path, lambda nb: nb.cells.append(extra))
    before, released = db.read_bytes(), matrix.released(tmp_path)
    assert cli(["release", "--course", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "added zero-check" in err and "--rebuild" in err and "Traceback" not in err
    assert db.read_bytes() == before and matrix.released(tmp_path) == released  # nothing changed

    assert cli(["release", "--course", str(tmp_path), "--rebuild"]) == 0
    with course.gradebook() as gb:
        assert gb.find_assignment(matrix.ASSIGNMENT).max_score == 6
        assert not gb.find_assignment(matrix.ASSIGNMENT).submissions  # results dropped; submitted files stay


def test_a_points_change_by_the_instructor_is_not_tampering():
    from course_tools.grading.class_level.status import Evidence, classify

    log = "[AutogradeApp | WARNING] Attribute 'points' for cell total-check has changed! (should be: 4.0, got: 2.0)"
    got = classify("alice", matrix.ASSIGNMENT, Evidence(exit_code=0, log=log, score=5.0, max_score=5.0))
    assert got.status == "graded", got


def test_the_engine_leaves_a_run_record_that_status_reads(graded):
    """What happened to each cell is data the engine wrote (course_tools/grading/run_record.py), not words
    searched for in outputs: a CPU stop, a kernel death, both kinds of memory cap, a cut output, a tamper."""
    from course_tools.grading.run_record import read_record

    def record(student):
        found = read_record(graded.course.run_record_path(student, matrix.ASSIGNMENT, matrix.ASSIGNMENT))
        assert found is not None and found.finished, student
        return {cell.grade_id or cell.cell: cell for cell in found.cells}

    assert record("infinite_loop")["square"].stop == "cpu"
    assert record("infinite_loop")["square"].cpu_s >= 5
    assert record("dies")["square"].stop == "kernel_died"
    assert record("memory_bomb")["square"].stop == "memory"
    assert record("memory_spread")["square"].stop == "memory"
    assert record("memory_spread")["square"].ename == "MemoryCapReached"
    assert record("output_flood")["square"].output_cut or any(c.output_cut for c in record("output_flood").values())
    assert record("trojan")["square-check"].stop == "tampered"
    solved = record("solved")
    assert all(cell.stop == "" for cell in solved.values()) and solved["total-check"].cpu_s is not None
    assert not (graded.course.records_dir / "runs" / f"unknown_student__{matrix.ASSIGNMENT}").exists()
