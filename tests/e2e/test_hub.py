"""The classroom's JupyterHub, for real: learners and the instructor log in through the hub in a browser.

tests/support/classroom.py makes the accounts and the secured exchange; the instructor releases 02_devices; then
``python -m course_tools classroom hub`` starts JupyterHub (PAM logins, npm's configurable-http-proxy) and
headless Chromium logs in:

1. as alice: JupyterLab opens in her own server, which runs as her (umask 077); the Nbgrader menu has the
   Assignment List only and it lists 02_devices from the exchange; the course's formgrader service is refused;
2. as the instructor: the course's formgrader (a hub service running as the instructor in the course folder)
   shows the assignment.

Learners' servers run a Python that imports the course from the student edition (``course_tools handout``), as
INSTRUCTORS.md tells an administrator to install it; here that environment is made from this machine's own
packages (a venv whose ``.pth`` adds the edition and the course venv's site-packages, which hold no course code
of their own), so nothing is downloaded. The hub refuses to start for learners whose Python imports the course
from a checkout that holds ``solutions/`` (issue 45: the red team read every hidden test from there).

Screenshots go to test-artifacts/hub/. About a minute. Skips only without root (users), Chromium or the proxy;
under CI (``CI`` set) those fail instead.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from support.classroom import can_make_users, classroom
from conftest import BROWSER_SKIP_REASON, PROXY_SKIP_REASON
from support.layout import ROOT, free_port, skip_unless_ci, stop_process_group, wait_for_server
from course_tools.classroom.hub import find_proxy
from test_browser import CHROMIUM, nbgrader_menu

pytestmark = pytest.mark.slow
ARTIFACTS = ROOT / "test-artifacts" / "hub"
START_S = 120
PASSWORD = "correct horse battery staple 38"


def stop_proxy(pid_file: Path) -> None:
    """The hub starts its proxy in a session of its own and may leave it running when stopped: stop it too."""
    if pid_file.exists():
        with contextlib.suppress(ValueError, psutil.Error):
            proxy = psutil.Process(int(pid_file.read_text().strip()))
            if "configurable-http-proxy" in " ".join(proxy.cmdline()):
                proxy.kill()
                proxy.wait(10)


def _needs() -> str | None:
    return can_make_users() or (None if CHROMIUM.exists() else BROWSER_SKIP_REASON) or (
        None if find_proxy() else PROXY_SKIP_REASON)


def learner_python(base: Path, course: Path) -> Path:
    """A Python that imports ``helpers`` from ``course`` and everything else from the course's own venv."""
    env = base / f"env-{course.name}"
    subprocess.run([str(Path(sys.base_prefix) / "bin" / "python3"), "-m", "venv", "--without-pip", str(env)], check=True)
    site = next((env / "lib").glob("python3*/site-packages"))
    site.joinpath("course.pth").write_text(f"{course}\n{next(iter(site_packages()))}\n")
    for folder in ("share", "etc"):  # JupyterLab's files, and the server extensions the course's venv enables
        (env / folder).mkdir(exist_ok=True)
        (env / folder / "jupyter").symlink_to(Path(sys.prefix) / folder / "jupyter")
    subprocess.run(["chmod", "-R", "a+rX", str(env)], check=True)
    return env / "bin" / "python"


def site_packages() -> list[str]:
    import site

    return [p for p in site.getsitepackages() if p.startswith(sys.prefix)]


def write_settings(room, path: Path, python: Path, port: int, state: str = "hub") -> Path:
    path.write_text(json.dumps({
        "exchange": str(room.exchange),
        "courses": {room.course_id: str(room.course), f"{room.course_id}-ko": f"{room.course}-ko"},
        "instructor": room.instructor.login, "learners": [p.login for p in room.learners.values()],
        "port": port, "state": str(room.base / state), "first_service_port": free_port(),
        "hub_port": free_port(), "proxy_api_port": free_port(), "learner_python": str(python),
    }))
    return path


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    skip_unless_ci(_needs(), "the login through the classroom's hub")
    with classroom() as room:
        room.release()
        for person in (room.instructor, room.learners["alice"]):
            room.set_password(person, PASSWORD)
        edition = room.base / "gpu-course"  # the student edition, where every learner may read it
        subprocess.run([sys.executable, "-m", "course_tools", "handout", "--out", str(edition)], check=True,
                       capture_output=True)
        subprocess.run(["chmod", "-R", "a+rX", str(edition)], check=True)
        port = free_port()
        settings = write_settings(room, room.base / "classroom.json", learner_python(room.base, edition), port)
        log = room.base / "hub.log"
        with open(log, "w") as out:
            proc = subprocess.Popen([sys.executable, "-m", "course_tools", "classroom", "hub", "--settings", str(settings)],
                                    cwd=room.base, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        base = f"http://127.0.0.1:{port}"
        try:
            wait_for_server(f"{base}/hub/api", proc, log, "JupyterHub", START_S)
            yield room, base, log
        finally:
            stop_process_group(proc)
            stop_proxy(room.base / "hub" / "proxy.pid")
            shutil.copy(log, ARTIFACTS / "hub.log") if ARTIFACTS.is_dir() else None


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    shutil.rmtree(ARTIFACTS, ignore_errors=True)
    ARTIFACTS.mkdir(parents=True)
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        try:
            yield chromium
        finally:
            chromium.close()


def _log_in(browser, base: str, login: str, log: Path, shot: str):
    page = browser.new_context().new_page()
    page.goto(f"{base}/hub/login")
    page.fill("#username_input", login)
    page.fill("#password_input", PASSWORD)
    page.click("#login_submit")
    try:
        page.wait_for_selector("#jp-main-dock-panel", timeout=START_S * 1000)
    except Exception:
        page.screenshot(path=str(ARTIFACTS / f"{shot}-failed.png"))
        raise AssertionError(f"{login} got no JupyterLab:\n{log.read_text()[-4000:]}")
    page.get_by_role("menuitem", name="Nbgrader").wait_for()
    return page


def test_a_learner_logs_in_to_her_own_server_with_the_learner_view(hub, browser):
    room, base, log = hub
    alice = room.learners["alice"]
    page = _log_in(browser, base, alice.login, log, "01-alice")
    assert f"/user/{alice.login}/lab" in page.url
    assert nbgrader_menu(page) == ["Assignment List"], "the learner view shows instructor tools"
    page.get_by_role("menuitem", name="Nbgrader").click()
    page.get_by_text("Assignment List").click()
    page.locator("#released_assignments_list").get_by_text(room.chapter).wait_for(timeout=60_000)
    page.screenshot(path=str(ARTIFACTS / "01-alice-assignments.png"))
    servers = [p for p in psutil.process_iter(["username", "cmdline"])
               if p.info["username"] == alice.login and "jupyterhub.singleuser" in (p.info["cmdline"] or [])]
    assert servers, "alice's server does not run as alice"
    umask = [line for line in Path(f"/proc/{servers[0].pid}/status").read_text().splitlines() if line.startswith("Umask")]
    assert umask == ["Umask:\t0077"], umask
    refused = page.request.get(f"{base}/services/{room.course_id}/formgrader", max_redirects=5)
    assert refused.status == 403 and "permission to access JupyterHub service" in refused.text(), (
        f"a learner reached the course's formgrader: {refused.status} {refused.url}")


def test_the_instructor_reaches_the_courses_formgrader(hub, browser):
    room, base, log = hub
    page = _log_in(browser, base, room.instructor.login, log, "02-instructor")
    page.goto(f"{base}/services/{room.course_id}/formgrader")
    page.get_by_text("Manage Assignments").first.wait_for(timeout=START_S * 1000)
    page.locator("tr", has_text=room.chapter).get_by_text("released").wait_for(timeout=START_S * 1000)
    page.screenshot(path=str(ARTIFACTS / "02-instructor-formgrader.png"))
    routes = log.read_text()
    for course_id in (room.course_id, f"{room.course_id}-ko"):  # both editions' formgraders on one hub
        assert f"Route added /services/{course_id} " in routes, f"no service for {course_id}"


def test_learners_can_read_the_exchange_config_the_hub_wrote_for_them(hub):
    room, _, _ = hub
    config = room.base / "hub-learners" / "config" / "nbgrader_config.py"
    shown = room.run(room.learners["alice"], "/bin/cat", str(config))
    assert str(room.exchange) in shown.stdout
    room.fails(room.learners["alice"], "ls", str(room.base / "hub"))  # the hub's own state stays root's


def test_the_hub_refuses_learners_a_python_that_imports_the_course_from_a_checkout_with_solutions(hub):
    room, _, _ = hub
    checkout = room.base / "opt-checkout"  # INSTRUCTORS.md's old layout: the course checked out in a shared folder
    checkout.mkdir()
    shutil.copytree(ROOT / "helpers", checkout / "helpers")
    shutil.copy(ROOT / "pyproject.toml", checkout)
    shutil.copytree(room.course / "solutions", checkout / "solutions")
    subprocess.run(["chmod", "-R", "a+rX", str(checkout)], check=True)
    bad = write_settings(room, room.base / "bad.json", learner_python(room.base, checkout), free_port(),
                         state="bad-hub")
    proc = subprocess.run([sys.executable, "-m", "course_tools", "classroom", "hub", "--settings", str(bad), "--check"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"{checkout}/solutions/{room.chapter}/{room.chapter}.ipynb is readable by" in proc.stderr, proc.stderr
    assert "nothing started" in proc.stderr
