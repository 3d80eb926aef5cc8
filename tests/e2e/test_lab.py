"""`make lab` and `make lab-instructor` serve the course in JupyterLab with nbgrader's extensions, without a GPU.

Starts each README open command for real (with --no-browser on a free port), asks its REST API for a
chapter and the list of lab extensions, and checks which of nbgrader's endpoints answer: both views list
assignments from the course's exchange (no "exchange directory does not exist"), only the instructor's
serves the formgrader; then stops it. What the pages show is tests/e2e/test_browser.py's.
"""

import json
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from support.layout import ROOT, free_port, stop_process_group
from course_tools.grading.exchange import DEFAULT_COURSE_ID

TOKEN = "course-test-token"


def _get(url):
    request = urllib.request.Request(url, headers={"Authorization": f"token {TOKEN}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.status, response.read().decode()


@pytest.fixture(scope="module", params=["lab", "lab-instructor"])
def lab(request):
    port = free_port()
    args = f"--no-browser --port={port} --ip=127.0.0.1 --IdentityProvider.token={TOKEN}"
    proc = subprocess.Popen(["make", "-s", request.param, f"LAB_ARGS={args}"], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    try:
        while True:
            try:
                _get(f"{base}/api/status")
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"JupyterLab did not start:\n{proc.stdout.read() if proc.poll() is not None else ''}")
                time.sleep(0.5)
        yield request.param, base
    finally:
        stop_process_group(proc)


@pytest.mark.slow
def test_lab_serves_the_course_with_nbgrader(lab):
    target, lab = lab
    status, body = _get(f"{lab}/api/contents/notebooks/00_start/00_start.ipynb")
    assert status == 200 and json.loads(body)["type"] == "notebook"
    status, body = _get(f"{lab}/lab/api/extensions")
    names = [ext["name"] for ext in json.loads(body)]
    assert "jupyter-nbgrader" in names, f"nbgrader's lab extension is not loaded: {names}"
    enabled = [ext for ext in json.loads(body) if ext["name"] == "jupyter-nbgrader"][0]
    assert enabled.get("enabled", True)
    status, body = _get(f"{lab}/assignments?course_id={DEFAULT_COURSE_ID}")
    assert json.loads(body)["success"], f"`make {target}`: the Assignments tab gets an error: {body[:300]}"
    if target == "lab-instructor":
        status, _ = _get(f"{lab}/formgrader")
        assert status == 200, "nbgrader's formgrader server extension does not answer in the instructor view"
    else:
        with pytest.raises(urllib.error.HTTPError, match="404"):
            _get(f"{lab}/formgrader")
