"""A hostile submission opened by the instructor in a real browser runs nothing (issue 45).

A tiny course (tests/support/matrix.py) gets one submission, ``mallory``'s, solved and carrying every payload of
tests/support/hostile.py: markdown with ``<script>``, ``onerror``, ``javascript:`` links, ``<iframe srcdoc>``, SVG
with script, ``<meta http-equiv=refresh>``, ``<base>``, ``<object>``, a form and a stand-in for a score field; a raw
HTML cell; and code that displays HTML, JavaScript, markdown, SVG, a widget view, an isolated HTML output and images
with forged metadata and data. It is graded and its feedback written with the course's commands; then headless
Chromium, logged in to the instructor view (.jupyter/instructor) as the instructor:

1. opens the submission in formgrader, clicks the learner's links and buttons, and finds no marker, no title
   change, no dialog, no navigation, no ``pwned-*.txt`` (each payload asks the contents API for one, with the
   ``_xsrf`` cookie), and formgrader working: the check's score is shown and a manual score typed into it is saved;
2. opens the feedback page through the Jupyter server and from disk: the same.

A control renders the same autograded notebook with plain nbconvert (no sanitizer, no policy) into a blank page:
the payloads that nbconvert leaves live do run there, so the checks above can fail (and did, with the guard off).
Screenshots go to test-artifacts/hostile/. About two minutes.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time

import nbformat
import pytest
from nbconvert import HTMLExporter

from course_tools.cli import main as cli
from course_tools.grading.course import Course
from course_tools.grading.release.generate import generate_release
from support import hostile, matrix
from support.layout import ROOT
from test_browser import TOKEN, chromium, lab_server  # noqa: F401 - chromium is a fixture

pytestmark = pytest.mark.slow
ARTIFACTS = ROOT / "test-artifacts" / "hostile"
STUDENT = "mallory"
#: payloads nbconvert itself (7.17, no sanitizer) leaves able to run: the control must see each of these run
LIVE_UNGUARDED = {"md_script", "md_onerror", "md_javascript_url", "md_iframe_srcdoc", "md_svg", "out_html",
                  "out_html_onerror", "out_javascript", "out_markdown", "out_image_meta"}
WAIT_MS = 30_000


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile") / "course"
    matrix.make_course(root, ROOT / "nbgrader_config.py")
    course = Course(root)
    generate_release(root / "notebooks", [matrix.ASSIGNMENT], root=root, db_url=course.db_url)
    with course.gradebook() as gb:
        gb.update_or_create_student(STUDENT)
    nb = matrix.solved(matrix.released(root))
    nb.cells += hostile.cells()
    matrix.write_submission(root, STUDENT, matrix.ASSIGNMENT, nb)
    assert cli(["grade", "--course", str(root), "--no-progress"]) == 0
    assert cli(["feedback", "--course", str(root)]) == 0
    autograded = nbformat.read(str(root / "autograded" / STUDENT / matrix.ASSIGNMENT / f"{matrix.ASSIGNMENT}.ipynb"),
                               as_version=4)
    shown = {mime for c in autograded.cells if c.cell_type == "code" for o in c.outputs for mime in o.get("data", {})}
    assert {"application/javascript", "image/svg+xml", "text/markdown", "text/html"} <= shown, shown  # they ran
    with course.gradebook() as gb:
        submission_id = gb.find_submission_notebook(matrix.ASSIGNMENT, matrix.ASSIGNMENT, STUDENT).id
    return root, course, autograded, submission_id


@pytest.fixture
def shots():
    shutil.rmtree(ARTIFACTS, ignore_errors=True)
    ARTIFACTS.mkdir(parents=True)
    return lambda page, name: page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


class Watch:
    """What a page's payloads could have done: dialogs opened, files created."""

    def __init__(self, page, root):
        self.page, self.root, self.dialogs, self.console = page, root, [], []
        page.on("dialog", lambda dialog: (self.dialogs.append(dialog.message), dialog.dismiss()))
        page.on("console", lambda message: self.console.append(f"{message.type}: {message.text[:200]}"))

    def interact(self):
        """Click what an instructor might: the learner's links and buttons; then give late payloads (a 1 s refresh,
        an image load, a fetch) their chance."""
        for text in ("pwn-link", "pwn-button"):
            for element in self.page.get_by_text(text).all():
                with contextlib.suppress(Exception):
                    element.click(timeout=2_000, no_wait_after=True)
        self.page.wait_for_timeout(2_000)
        with contextlib.suppress(Exception):
            self.page.wait_for_load_state("networkidle", timeout=WAIT_MS)

    def ran(self) -> list[str]:
        return self.page.evaluate("() => window.__pwned || []")

    def assert_nothing_ran(self, url: str, title: str):
        assert self.ran() == [], f"learner code ran: {self.ran()}"
        assert self.dialogs == [], f"learner code opened dialogs: {self.dialogs}"
        here = self.page.url.split("?")[0]  # formgrader itself adds ?index=N
        assert here == url, "learner content navigated the page away"
        assert self.page.title() == title
        assert self.page.evaluate("() => document.baseURI").split("?")[0] == url, "learner content changed <base>"
        assert not list(self.root.rglob("pwned-*.txt")), "learner code created a file through the server"


def test_the_payloads_run_in_an_unguarded_rendering(course, chromium, shots):  # noqa: F811
    """The control: nbconvert's plain HTML of the same notebook, in a blank page, runs each LIVE_UNGUARDED payload."""
    _, _, autograded, _ = course
    page_html, _ = HTMLExporter(template_name="classic").from_notebook_node(autograded)
    page_html = page_html.replace("<head>", "<head><script>window.$=function(){return {}}</script>", 1)  # jQuery
    context = chromium.new_context()
    page = context.new_page()
    try:
        watch = Watch(page, ARTIFACTS)
        page.route("http*://**", lambda route: route.abort())  # no CDN
        page.set_content(page_html, wait_until="load")
        watch.interact()
        shots(page, "control-unguarded")
        assert LIVE_UNGUARDED <= set(watch.ran()), f"payloads that did not run unguarded: {LIVE_UNGUARDED - set(watch.ran())}"
        assert watch.dialogs
    finally:
        context.close()


def test_formgrader_and_feedback_run_nothing_a_learner_submitted(course, chromium, shots, tmp_path):  # noqa: F811
    root, course_, _, submission_id = course
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "JPY_", "COURSE_"))}
    env.update(HOME=str(tmp_path), JUPYTER_CONFIG_DIR=str(tmp_path / ".jupyter"), COURSE_DEVICE="cpu")
    with lab_server(root, env, "instructor", tmp_path / "instructor-lab.log") as base:
        context = chromium.new_context(viewport={"width": 1400, "height": 900})
        page = context.new_page()
        watch = Watch(page, root)
        try:
            page.goto(f"{base}/lab?token={TOKEN}", wait_until="commit")  # logged in: the cookie for every path
            url = f"{base}/formgrader/submissions/{submission_id}/"
            page.goto(url)
            watch.interact()
            shots(page, "formgrader")
            watch.assert_nothing_ran(url, matrix.ASSIGNMENT)
            score = page.locator("input.score#square-check")
            page.wait_for_function("() => document.querySelector('input.score#square-check').placeholder !== ''",
                                   timeout=WAIT_MS)  # formgrader's own scripts ran: they show the autograde's score
            assert score.get_attribute("placeholder") == "1"
            assert page.locator("#square-check").count() == 1  # the learner's stand-in lost its id

            score.fill("0.5")
            score.press("Tab")  # formgrader saves on change
            deadline = time.monotonic() + WAIT_MS / 1000
            while _manual_score(course_, "square-check") != 0.5:
                assert time.monotonic() < deadline, "formgrader did not save the manual score"
                page.wait_for_timeout(250)

            feedback = root / "feedback" / STUDENT / matrix.ASSIGNMENT / f"{matrix.ASSIGNMENT}.html"
            assert feedback.exists()
            for where in (f"{base}/files/feedback/{STUDENT}/{matrix.ASSIGNMENT}/{feedback.name}", feedback.as_uri()):
                page = context.new_page()  # a tab of its own, as the instructor would open it
                watch = Watch(page, root)
                page.goto(where, referer=f"{base}/lab")  # as from JupyterLab: /files/ wants a same-origin referer
                page.wait_for_load_state("load")
                assert page.get_by_text("Score:").count(), "not the feedback page"
                watch.interact()
                shots(page, "feedback-" + where.split(":")[0])
                watch.assert_nothing_ran(where, matrix.ASSIGNMENT)
        except BaseException:
            with contextlib.suppress(Exception):
                shots(page, "failed")
                (ARTIFACTS / "console.txt").write_text("\n".join(watch.console))
            raise
        finally:
            context.close()


def _manual_score(course: Course, grade_id: str):
    with course.gradebook() as gb:
        grade = gb.find_grade(grade_id, matrix.ASSIGNMENT, matrix.ASSIGNMENT, STUDENT)
        return grade.manual_score
