"""The learner's and the instructor's JupyterLab views: what each folder in .jupyter/ turns on and off.

A view is a Jupyter config folder that `make lab` (learner) or `make lab-instructor` puts first on
JUPYTER_CONFIG_PATH: ``labconfig/page_config.json`` disables front-end plugins, and
``jupyter_server_config.json`` server extensions. Cheap checks of the files against the plugins that are
really installed; tests/e2e/test_lab.py checks the servers' endpoints, tests/e2e/test_browser.py what a page shows.
"""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from support.layout import ROOT

VIEWS = ROOT / ".jupyter"
NBGRADER = "@jupyter/nbgrader:"
NEWS = "@jupyterlab/apputils-extension:announcements"  # the first-run "Jupyter news?" question and update checks
INSTRUCTOR_ONLY = {f"{NBGRADER}create-assignment", f"{NBGRADER}formgrader", f"{NBGRADER}course-list"}
LEARNER_KEEPS = {f"{NBGRADER}assignment-list", f"{NBGRADER}validate-assignment", f"{NBGRADER}menu"}


def disabled(view: str) -> set[str]:
    config = json.loads((VIEWS / view / "labconfig" / "page_config.json").read_text())
    return {name for name, off in config["disabledExtensions"].items() if off}


def server_extensions(view: str) -> dict[str, bool]:
    config = json.loads((VIEWS / view / "jupyter_server_config.json").read_text())
    return config.get("ServerApp", {}).get("jpserver_extensions", {})


def installed_plugins() -> set[str]:
    """Plugin ids in the installed JupyterLab and nbgrader front ends (their built JavaScript)."""
    share = Path(sys.prefix) / "share" / "jupyter"
    scripts = [*(share / "labextensions" / "@jupyter" / "nbgrader" / "static").glob("*.js"),
               *(share / "lab" / "static").glob("jlab_core.*.js")]
    found = set()
    for script in scripts:
        found |= set(re.findall(r'"(@jupyter(?:lab)?/[a-z-]+(?:-extension)?:[a-z-]+)"', script.read_text()))
    return found


def test_learner_view_hides_what_only_an_instructor_uses():
    assert disabled("learner") == INSTRUCTOR_ONLY | {NEWS}
    assert not LEARNER_KEEPS & disabled("learner"), "the learner needs the Assignments list and Validate"
    assert server_extensions("learner") == {"nbgrader.server_extensions.formgrader": False,
                                            "nbgrader.server_extensions.course_list": False}


def test_instructor_view_adds_create_assignment_and_formgrader():
    assert disabled("instructor") == {NEWS}
    # formgrader is loaded by the course's guard, behind its Content-Security-Policy (course_tools/grading/formgrader_guard.py)
    assert server_extensions("instructor") == {"nbgrader.server_extensions.formgrader": False,
                                               "course_tools.grading.formgrader_guard": True}


@pytest.mark.parametrize("view", ["learner", "instructor"])
def test_views_name_real_plugins_and_fetch_no_news(view):
    missing = disabled(view) - installed_plugins()
    assert not missing, f"{view} view disables plugins that are not installed (renamed?): {missing}"
    lab = json.loads((VIEWS / view / "jupyter_server_config.json").read_text())["LabApp"]
    assert lab["news_url"] is None and lab["check_for_updates_class"] == "jupyterlab.NeverCheckForUpdate"


@pytest.mark.parametrize("target, view", [("lab", "learner"), ("lab-instructor", "instructor")])
def test_make_targets_open_their_view(target, view):
    plan = subprocess.run(["make", "-n", "-s", target], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    command = [line for line in plan.splitlines() if "jupyter lab" in line]
    assert command and f'JUPYTER_CONFIG_PATH="{VIEWS / view}' in command[-1], plan
    assert "notebooks/00_start/00_start.ipynb" in command[-1]
