"""The exchange route in a real browser: headless Chromium (Debian's package) driven by Playwright.

On the scratch shared machine of tests/support/shared_machine.py (02_devices released to the exchange):

1. the learner's JupyterLab (the learner view, .jupyter/learner) starts in the learner's home; the page
   shows the Nbgrader menu with the Assignment List only, no Create Assignment panel, no news question;
2. Assignments tab: Fetch 02_devices; the learner's answers are written into the fetched notebook (as
   typing them would); the notebook is opened from the list, run (Run All Cells, on the CPU:
   COURSE_DEVICE=cpu), saved; Validate says every test passes; Submit from the Assignments tab; a copy of
   the notebook as fetched, with nothing solved, is run too: Run All reaches the end, the failing checks
   being the cells the release tagged raises-exception;
3. the instructor collects and grades (`nbgrader collect`, `python -m course_tools grade`), opens the
   instructor view (.jupyter/instructor: Create Assignment and Formgrader are there) and formgrader's
   Manage Students page shows the learner's full score.

Screenshots (``NN-step.png``) go to ``<pytest tmp>/browser/`` and are copied to
``test-artifacts/browser/`` in the repository (ignored by git; emptied at the start), also when a step
fails. Every server and browser process started here is stopped, also on failure. Skips only when
/usr/bin/chromium is missing on a developer's machine; under CI (``CI`` set) that fails instead.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

from conftest import BROWSER_SKIP_REASON
from support.layout import ROOT, free_port, stop_process_group, wait_for_server
from support.shared_machine import LEARNER, set_up, solve

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = ROOT / "test-artifacts" / "browser"
TOKEN = "course-browser-test"
SERVER_START_S = 90
NOTEBOOK_RUN_MS = 120_000  # Run All and Validate each run the whole chapter on the CPU


@pytest.fixture
def chromium():
    if not CHROMIUM.exists():
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the browser test: {BROWSER_SKIP_REASON}")
        pytest.skip(BROWSER_SKIP_REASON)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def shots(tmp_path):
    """``shot(page, name)``: a screenshot in tmp_path/browser/ and test-artifacts/browser/."""
    folder = tmp_path / "browser"
    folder.mkdir()
    shutil.rmtree(ARTIFACTS, ignore_errors=True)
    ARTIFACTS.mkdir(parents=True)
    taken = []

    def shot(page, name):
        path = folder / f"{len(taken) + 1:02d}-{name}.png"
        page.screenshot(path=str(path))
        shutil.copy(path, ARTIFACTS / path.name)
        taken.append(path)

    return shot


@contextlib.contextmanager
def lab_server(cwd: Path, env: dict, view: str | tuple[str, ...], log: Path):
    """JupyterLab as `make lab` / `make lab-instructor` start it (that view first on the config path), in ``cwd``;
    ``("learner", "korean")``: the learner view of the Korean edition (`make lab COURSE_LANG=ko`)."""
    port = free_port()
    root = ["--allow-root"] if os.getuid() == 0 else []
    command = [str(Path(sys.executable).parent / "jupyter"), "lab", *root, "--ServerApp.root_dir=.", "--no-browser",
               f"--port={port}", "--ip=127.0.0.1", f"--IdentityProvider.token={TOKEN}"]
    views = (view,) if isinstance(view, str) else view
    env = dict(env, JUPYTER_CONFIG_PATH=os.pathsep.join(str(ROOT / ".jupyter" / v) for v in views))
    with open(log, "w") as out:
        proc = subprocess.Popen(command, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_for(base, proc, log)
        yield base
    finally:
        stop_process_group(proc)


def _wait_for(base: str, proc: subprocess.Popen, log: Path):
    request = urllib.request.Request(f"{base}/api/status", headers={"Authorization": f"token {TOKEN}"})
    wait_for_server(request, proc, log, "JupyterLab", SERVER_START_S)


def open_lab(page, base: str):
    page.goto(f"{base}/lab?token={TOKEN}")
    page.wait_for_selector("#jp-main-dock-panel", timeout=SERVER_START_S * 1000)
    page.get_by_role("menuitem", name="Nbgrader").wait_for()


def nbgrader_menu(page) -> list[str]:
    """The items of the Nbgrader menu (opened, read, closed)."""
    page.get_by_role("menuitem", name="Nbgrader").click()
    items = [t.strip() for t in page.locator("#jp-mainmenu-nbgrader").inner_text().splitlines() if t.strip()]
    page.keyboard.press("Escape")
    return items


def no_news_question(page):
    assert page.get_by_text("official Jupyter news").count() == 0, "JupyterLab asks to fetch news from the internet"


# the notebook on show: with several open, the others are hidden (lm-mod-hidden)
SHOWN = ".jp-NotebookPanel:not(.lm-mod-hidden)"
PROMPTS = ("() => [...document.querySelectorAll('" + SHOWN + " .jp-CodeCell .jp-InputPrompt')]"
           ".map(e => e.textContent)")


def run_all_and_save(page, run="Run", run_all="Run All Cells", idle="Idle"):
    """Run All Cells from the Run menu, wait until every code cell has its execution count, save. The menu's and
    the status bar's words are JupyterLab's, in its language (Korean: "실행", "모든 셀 실행", "대기")."""
    # the kernel is connected and idle (status bar "Python 3 (ipykernel) | Idle"); before that Run All does nothing
    page.locator(".jp-StatusBar-Widget").get_by_text(re.compile(rf"Python 3.* \| {idle}")).wait_for(
        timeout=SERVER_START_S * 1000)
    page.locator(f"{SHOWN} .jp-Notebook .jp-Cell").first.click()
    page.get_by_role("menuitem", name=run, exact=True).click()
    page.get_by_text(run_all, exact=True).click()
    deadline = time.monotonic() + NOTEBOOK_RUN_MS / 1000
    while True:
        prompts = page.evaluate(PROMPTS)
        if prompts and all(re.fullmatch(r"\[\d+\]:", p.strip()) for p in prompts):
            break
        assert time.monotonic() < deadline, f"Run All did not finish; the cells' prompts: {prompts}"
        page.wait_for_timeout(500)
    page.keyboard.press("Control+s")
    page.wait_for_function("() => !document.querySelector('.lm-TabBar-tab.jp-mod-current.jp-mod-dirty')",
                           timeout=30_000)


def assert_ran_to_the_end(notebook: Path):
    """Every code cell ran; the errors are only where a blank exercise makes them, in cells the release tagged
    raises-exception (JupyterLab's Run All goes on past those); and there are such errors."""
    nb = nbformat.read(str(notebook), as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(c.execution_count for c in code), "Run All stopped: the saved notebook has cells that did not run"
    failing = [c for c in code if any(o.output_type == "error" for o in c.outputs)]
    untagged = [c.source.splitlines()[0] for c in failing if "raises-exception" not in c.metadata.get("tags", [])]
    assert failing and not untagged, f"cells that failed with the exercises blank, untagged: {untagged}"


def assert_ran_without_error(notebook: Path):
    nb = nbformat.read(str(notebook), as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(c.execution_count for c in code), "the saved notebook has cells that did not run"
    errors = [o for c in code for o in c.outputs if o.output_type == "error"]
    assert not errors, f"cells raised: {[e.ename + ': ' + e.evalue for e in errors]}"


@pytest.mark.slow
def test_learner_fetches_runs_validates_submits_and_the_grade_appears(tmp_path, chromium, shots):
    machine = set_up(tmp_path)
    page = chromium.new_page(viewport={"width": 1400, "height": 900})
    try:
        with lab_server(machine.learner_home, machine.learner_env(), "learner", tmp_path / "learner-lab.log") as base:
            learner_fetches_runs_validates_submits(page, base, machine, shots)
        machine.instructor("nbgrader", "collect", machine.chapter)
        machine.instructor("course_tools", "grade", "--assignment", machine.chapter, "--no-progress")
        with lab_server(machine.course, machine.instructor_env(), "instructor", tmp_path / "instructor-lab.log") as base:
            instructor_sees_the_grade(page, base, machine, shots)
    except BaseException:
        with contextlib.suppress(Exception):
            shots(page, "failed")
        raise
    finally:
        page.close()


def learner_fetches_runs_validates_submits(page, base, machine, shots):
    open_lab(page, base)
    assert nbgrader_menu(page) == ["Assignment List"], "the learner view shows instructor tools"
    assert page.locator("[title='Nbgrader Create Assignment']").count() == 0
    no_news_question(page)
    shots(page, "learner-view")

    page.get_by_role("menuitem", name="Nbgrader").click()
    page.get_by_text("Assignment List").click()
    page.locator("#released_assignments_list").get_by_role("button", name="Fetch").click()
    fetched = page.locator("#fetched_assignments_list")
    fetched.locator("a.assignment-notebooks-link").wait_for()
    shots(page, "fetched")
    blank = machine.learner_home / "blank-run.ipynb"  # the chapter as fetched, run at the end with nothing solved
    shutil.copy(machine.fetched(), blank)
    assert solve(machine.fetched(), machine.chapter) > 0

    fetched.locator("a.assignment-notebooks-link").click()
    fetched.locator(".nested_list_item a").click()
    run_all_and_save(page)
    shots(page, "ran")
    assert_ran_without_error(machine.fetched())

    page.locator(".jp-NotebookPanel-toolbar").get_by_role("button", name="Validate").click()
    page.locator(".jp-Dialog").get_by_text("Success! Your notebook passes all the tests.").wait_for(
        timeout=NOTEBOOK_RUN_MS)
    shots(page, "validated")
    page.locator(".jp-Dialog").get_by_role("button", name="Ok").click()

    page.get_by_role("tab", name="Assignments").click()
    page.locator("#fetched_assignments_list").get_by_role("button", name="Submit").click()
    page.locator("#submitted_assignments_list .list_item").first.wait_for()
    no_news_question(page)
    shots(page, "submitted")

    # a learner who has not started: Run All still reaches the end. Opened from the file browser, not by
    # loading /lab/tree/<file>: that reload restores the workspace too, and on a loaded machine JupyterLab
    # then started two kernels for the notebook, shut one down and stayed connected to it ("No Kernel").
    page.locator(".jp-BreadCrumbs-home").first.click()
    page.locator(".jp-DirListing-item", has_text=blank.name).dblclick()
    page.locator(".lm-TabBar-tab.jp-mod-current", has_text=blank.name).wait_for(timeout=30_000)
    page.locator(".jp-StatusBar-Widget", has_text=blank.name).first.wait_for(timeout=30_000)
    run_all_and_save(page)
    shots(page, "ran-blank")
    assert_ran_to_the_end(blank)


def instructor_sees_the_grade(page, base, machine, shots):
    open_lab(page, base)
    menu = nbgrader_menu(page)
    assert {"Assignment List", "Formgrader", "Create assignment"} <= set(menu), menu
    assert page.locator("[title='Nbgrader Create Assignment']").count() == 1
    no_news_question(page)
    shots(page, "instructor-view")

    page.goto(f"{base}/formgrader/manage_students")
    full = f"{machine.max_score():g} / {machine.max_score():g}"
    page.locator("tr", has_text=LEARNER).get_by_text(full).wait_for(timeout=30_000)
    shots(page, "grade-in-formgrader")


@pytest.mark.slow
def test_a_korean_learner_gets_korean_menus_text_and_check_messages(tmp_path, chromium, shots):
    """The Korean learner path (`make lab COURSE_LANG=ko`): JupyterLab's menus in Korean, the chapter's text in
    Korean, and after Run All on the blank chapter its checks say in Korean what is missing."""
    from helpers import i18n

    home, chapter = tmp_path / "learner", "00_start"
    home.mkdir()
    notebook = home / f"{chapter}.ipynb"
    shutil.copy(ROOT / "ko" / "notebooks" / chapter / f"{chapter}.ipynb", notebook)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "JPY_"))}
    env.update(HOME=str(home), COURSE_LANG="ko", COURSE_DEVICE="cpu", JUPYTERLAB_SETTINGS_DIR=str(tmp_path / "settings"),
               JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "workspaces"))
    page = chromium.new_page(viewport={"width": 1400, "height": 900})
    try:
        with lab_server(home, env, ("learner", "korean"), tmp_path / "korean-lab.log") as base:
            page.goto(f"{base}/lab/tree/{notebook.name}?token={TOKEN}")
            page.wait_for_selector("#jp-main-dock-panel", timeout=SERVER_START_S * 1000)
            page.get_by_role("menuitem", name="실행", exact=True).wait_for(timeout=60_000)  # JupyterLab speaks Korean
            page.locator(f"{SHOWN} .jp-RenderedMarkdown h1", has_text="시작하기").first.wait_for(timeout=60_000)
            shots(page, "korean-lab")
            run_all_and_save(page, run="실행", run_all="모든 셀 실행", idle="대기")
            shots(page, "korean-ran")
    except BaseException:
        with contextlib.suppress(Exception):
            shots(page, "korean-failed")
        raise
    finally:
        page.close()
    assert_ran_to_the_end(notebook)
    before = i18n._chosen
    i18n.use("ko")
    try:
        unwritten = i18n._("`{name}` is not written yet: replace `raise NotImplementedError()` in its cell with your "
                           "code, run that cell, then run this check again.").format(name="count_parameters")
    finally:
        i18n._chosen = before
    assert unwritten.isascii() is False
    outputs = [o.get("evalue", "") + o.get("text", "") for c in nbformat.read(str(notebook), as_version=4).cells
               if c.cell_type == "code" for o in c.outputs]
    assert any(unwritten[:30] in text for text in outputs), f"no Korean check message among: {outputs[-3:]}"
