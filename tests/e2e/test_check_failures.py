"""What a learner sees when a check fails, in a real browser: the message, not a traceback through the course.

Each edition's blank chapter 00 (``notebooks/00_start`` and ``ko/notebooks/00_start``) is opened in the learner's
JupyterLab (the Korean one as `make lab COURSE_LANG=ko` serves it), run with Run All, and the error outputs are read
as the page renders them: every failed check shows at most 12 lines, no frame of the course's own code
(``helpers/checks/``, ``course_tools/``) and, in Korean, the Korean message without the English one
(helpers/checks/display.py is what makes it so). Headless Chromium (Debian's) driven by Playwright, with the
server, fixtures and Run All of tests/e2e/test_browser.py; screenshots in ``test-artifacts/browser/``.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil

import nbformat
import pytest

from support.layout import ROOT
from test_browser import (  # noqa: F401 - chromium and shots are fixtures
    SERVER_START_S,
    SHOWN,
    TOKEN,
    chromium,
    lab_server,
    run_all_and_save,
    shots,
)

MAX_LINES = 12
COURSE_FRAME = re.compile(r"helpers[/\\]checks[/\\]|course_tools[/\\]")
#: the text of every error output on show, as rendered (textContent: JupyterLab may skip laying out cells
#: scrolled out of view, and innerText would read those as empty)
ERRORS = ("() => [...document.querySelectorAll('" + SHOWN + " .jp-OutputArea-output"
          "[data-mime-type=\"application/vnd.jupyter.stderr\"]')].map(e => e.textContent)")
EDITIONS = {
    "en": dict(notebooks=ROOT / "notebooks", view="learner", words={},
               message="is not written yet"),
    "ko": dict(notebooks=ROOT / "ko" / "notebooks", view=("learner", "korean"),
               words=dict(run="실행", run_all="모든 셀 실행", idle="대기"), message="아직 작성되지 않았습니다"),
}
ENGLISH_ONLY = "is not written yet"  # the English check message, which the Korean edition must not show


@pytest.mark.slow
@pytest.mark.parametrize("edition", sorted(EDITIONS))
def test_a_blank_chapters_failed_checks_show_their_message_not_a_traceback(edition, tmp_path, chromium, shots):
    chapter, settings = "00_start", EDITIONS[edition]
    home = tmp_path / "learner"
    home.mkdir()
    notebook = home / f"{chapter}.ipynb"
    shutil.copy(settings["notebooks"] / chapter / f"{chapter}.ipynb", notebook)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "JPY_"))}
    env.update(HOME=str(home), COURSE_LANG=edition, COURSE_DEVICE="cpu",
               JUPYTERLAB_SETTINGS_DIR=str(tmp_path / "settings"), JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "workspaces"))
    page = chromium.new_page(viewport={"width": 1400, "height": 900})
    try:
        with lab_server(home, env, settings["view"], tmp_path / f"{edition}-lab.log") as base:
            page.goto(f"{base}/lab/tree/{notebook.name}?token={TOKEN}")
            page.wait_for_selector("#jp-main-dock-panel", timeout=SERVER_START_S * 1000)
            run_all_and_save(page, **settings["words"])
            page.locator(f"{SHOWN} .jp-OutputArea-output", has_text="CheckFailed").first.scroll_into_view_if_needed()
            shots(page, f"{edition}-failed-check")
            shown = page.evaluate(ERRORS)
    except BaseException:
        with contextlib.suppress(Exception):
            shots(page, f"{edition}-failed")
        raise
    finally:
        page.close()

    saved = [o for c in nbformat.read(str(notebook), as_version=4).cells if c.cell_type == "code"
             for o in c.outputs if o.output_type == "error"]
    failed_checks = [o for o in saved if o.ename == "CheckFailed"]
    assert len(failed_checks) == 3, f"the blank chapter's three checks did not all fail: {[o.ename for o in saved]}"
    on_page = [text for text in shown if "CheckFailed" in text]
    assert len(on_page) == len(failed_checks), f"{len(failed_checks)} failed checks saved, {len(on_page)} on the page"
    for text in on_page:
        lines = text.rstrip("\n").splitlines()
        assert len(lines) <= MAX_LINES, f"a failed check shows {len(lines)} lines:\n{text}"
        assert not COURSE_FRAME.search(text), f"a failed check shows a frame of the course's code:\n{text}"
        assert settings["message"] in text, f"the check's message is not shown in {edition}:\n{text}"
        if edition == "ko":
            assert ENGLISH_ONLY not in text, f"the Korean edition shows the English message:\n{text}"
    for text in shown:
        assert not COURSE_FRAME.search(text), f"an error shows a frame of the course's code:\n{text}"


@pytest.mark.slow
@pytest.mark.parametrize("edition", sorted(EDITIONS))
def test_validate_shows_each_failed_checks_message_only(edition, monkeypatch):
    """The Validate button's dialog: nbgrader's validator runs the notebook and shows each failed cell's error
    outputs' traceback (as HTML), which is the short one."""
    import html

    from nbgrader.validator import Validator

    monkeypatch.setenv("COURSE_LANG", edition)
    monkeypatch.setenv("COURSE_DEVICE", "cpu")
    path = EDITIONS[edition]["notebooks"] / "00_start" / "00_start.ipynb"
    failed = Validator().validate(str(path))["failed"]
    assert len(failed) == 3, f"the blank chapter's three checks did not all fail: {failed}"
    for cell in failed:
        text = html.unescape(re.sub(r"<[^>]+>", "", cell["error"]))
        lines = text.strip("\n").splitlines()
        assert len(lines) <= MAX_LINES, f"Validate shows {len(lines)} lines for a failed check:\n{text}"
        assert not COURSE_FRAME.search(text), f"Validate shows a frame of the course's code:\n{text}"
        assert "CheckFailed" in text and EDITIONS[edition]["message"] in text, text


@pytest.mark.slow
def test_a_short_failure_still_costs_its_points_with_checks_in_the_kernel(tmp_path):
    """Grading unchanged: with ``c.GradingLimits.verdict_apart = False`` the grade cells run in the learner's
    kernel, where the short display is installed; nbgrader still scores a failed check, and a learner's error
    raised under a check, 0 (the matrix of tests/e2e/test_grading.py grades checks decided apart)."""
    from course_tools.cli import main as cli
    from course_tools.grading.course import Course
    from course_tools.grading.release.generate import generate_release
    from support import matrix

    root = tmp_path / "course"
    matrix.make_course(root, ROOT / "nbgrader_config.py")
    config = root / "nbgrader_config.py"
    config.write_text(config.read_text() + "\nc.GradingLimits.verdict_apart = False\n")
    course = Course(root)
    generate_release(root / "notebooks", [matrix.ASSIGNMENT], root=root, db_url=course.db_url)
    released = matrix.released(root)
    submissions = {
        "solved": (matrix.solved(released), 3.0),
        "wrong": (matrix.wrong(released), 2.0),  # the hidden check of square fails: CheckFailed
        "name_error": (matrix._solve(released, total="def total(xs):\n    return sum(xs) + oops\n"), 1.0),
    }
    with course.gradebook() as gb:
        for student in submissions:
            gb.update_or_create_student(student)
    for student, (notebook, _) in submissions.items():
        matrix.write_submission(root, student, matrix.ASSIGNMENT, notebook)
    assert cli(["grade", "--course", str(root), "--no-progress", "--jobs", "2"]) == 0
    with course.gradebook() as gb:
        scores = {s: gb.find_submission(matrix.ASSIGNMENT, s).score for s in submissions}
    assert scores == {s: points for s, (_, points) in submissions.items()}

    def error_of(student: str, grade_id: str) -> str:
        nb = nbformat.read(str(root / "autograded" / student / matrix.ASSIGNMENT / f"{matrix.ASSIGNMENT}.ipynb"), 4)
        cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)
        errors = [o for o in cell.outputs if o.output_type == "error"]
        assert errors, f"{student}'s {grade_id} has no error output"
        return re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(errors[0].traceback))

    failed = error_of("wrong", "square-check")  # shown short: the display ran in the grading kernel
    assert len(failed.splitlines()) <= MAX_LINES and not COURSE_FRAME.search(failed), failed
    assert failed.splitlines()[-1].startswith("CheckFailed: square(-4)"), failed
    theirs = error_of("name_error", "total-check")
    assert "NameError" in theirs and "return sum(xs) + oops" in theirs and not COURSE_FRAME.search(theirs), theirs
