"""What the tests know about the course: its chapters, cells and wrong submissions.

One place for the layout rules (``solutions/NN_topic/NN_topic.ipynb``, grade
cells, demo cells, the submission file header), so every test reads the
course the same way and a new chapter is picked up without editing a test.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import psutil

from course_tools.paths import assignments
from helpers.processes import free_port  # noqa: F401 - re-exported: the one free_port, for the servers tests start


ROOT = Path(__file__).resolve().parents[2]
SOLUTIONS = ROOT / "solutions"
NOTEBOOKS = ROOT / "notebooks"
SUBMISSIONS = ROOT / "tests" / "submissions"


def chapters() -> list[str]:
    """Assignment names, e.g. ``["00_start", "02_devices"]``, in course order (course_tools.paths, the tooling's rule)."""
    return assignments(ROOT)


def solution_path(chapter: str) -> Path:
    return SOLUTIONS / chapter / f"{chapter}.ipynb"


def load(path: Path) -> nbformat.NotebookNode:
    return nbformat.read(str(path), as_version=4)


def nbgrader_meta(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def grade_cells(nb) -> dict[str, int]:
    """grade_id -> points, for every autograded test cell."""
    return {nbgrader_meta(c)["grade_id"]: nbgrader_meta(c)["points"] for c in nb.cells if nbgrader_meta(c).get("grade") and c.cell_type == "code"}


def solution_ids(nb) -> list[str]:
    return [nbgrader_meta(c)["grade_id"] for c in nb.cells if nbgrader_meta(c).get("solution")]


@dataclass
class Submission:
    """A learner's version of one solution cell, with the outcome it must get.

    File ``tests/submissions/<chapter>/<name>.py`` starts with a header::

        # solution: time-on-device             (grade_id of the solution cell it replaces)
        # fails: time-on-device-sync           (grade cells that must fail; empty = full marks)
        # says: synchronis                     (text every failure message must contain)
        # leaks: time.perf_counter             (optional: global state the submission itself leaves changed,
                                                on purpose; anything else left changed fails the test)
    """

    chapter: str
    name: str
    solution: str
    fails: list[str]
    says: str
    source: str
    leaks: str = ""
    path: Path = field(repr=False, default=None)


def submissions() -> list[Submission]:
    found = []
    for path in sorted(SUBMISSIONS.glob("*/*.py")):
        text = path.read_text()
        header = dict(re.findall(r"^# (solution|fails|says|leaks):[ \t]*(.*)$", text, flags=re.M))
        if "solution" not in header:
            raise ValueError(f"{path}: the header needs a '# solution: <grade_id>' line")
        found.append(
            Submission(
                chapter=path.parent.name,
                name=path.stem,
                solution=header["solution"].strip(),
                fails=header.get("fails", "").split(),
                says=header.get("says", "").strip(),
                leaks=header.get("leaks", "").strip(),
                source=text,
                path=path,
            )
        )
    return found


@dataclass
class CellResult:
    passed: bool
    message: str = ""


@dataclass
class RunResult:
    """One run of a chapter's graded cells: each grade cell's outcome, and what the run left changed."""

    cells: dict[str, CellResult]
    leaks: list[str]
    seconds: float = 0.0
    stops: list[str] = field(default_factory=list)  # other cells that raised: "first line: error"


RUNNER = Path(__file__).resolve().parent / "cell_runner.py"
WORKER_TIMEOUT_S = 900


def _job_cells(nb) -> list[dict]:
    """The non-demo code cells, as nbgrader runs them while grading (demo cells are blanked there)."""
    from course_tools.grading.demo_cells import is_demo_cell  # imports nbgrader: see chapters()

    return [{"source": cell.source, "grade_id": nbgrader_meta(cell).get("grade_id", ""),
             "grade": bool(nbgrader_meta(cell).get("grade")), "solution": bool(nbgrader_meta(cell).get("solution"))}
            for cell in nb.cells if cell.cell_type == "code" and not is_demo_cell(cell)]


def _defined(source: str) -> set[str]:
    """Every name a cell binds anywhere (an over-approximation: more grade cells run, never fewer)."""
    import ast

    from course_tools.grading.engine.apart_worker import bound_anywhere

    try:
        return bound_anywhere(ast.parse(source))
    except SyntaxError:
        return set()


def grade_cells_seeing(nb, replacements: dict[str, str]) -> list[str] | None:
    """The grade cells a change of solution cells can reach: those reading a name the changed cells bind (in
    either version), or one bound by a solution cell that reads such a name, transitively. None: all of them.

    Everything else of a run is the reference's: a grade cell that reads nothing the change binds sees the
    same definitions. Side effects beyond names (torch's global state) are what the run's leak check is for.
    The real nbgrader round trip runs every cell (tests/e2e/test_roundtrip.py).
    """
    if not replacements:
        return None
    cells = [c for c in nb.cells if c.cell_type == "code"]
    solutions = {nbgrader_meta(c)["grade_id"]: c.source for c in cells if nbgrader_meta(c).get("solution")}
    if set(replacements) >= set(solutions):
        return None
    touched: set[str] = set()
    for gid, source in replacements.items():
        touched |= _defined(source) | _defined(solutions.get(gid, ""))
    grown = True
    while grown:  # a solution that reads a changed name changes too (exercise B calls exercise A's function)
        grown = False
        for gid, source in solutions.items():
            if gid not in replacements and not _defined(source) <= touched and touched & _reads(source):
                touched |= _defined(source)
                grown = True
    return [nbgrader_meta(c)["grade_id"] for c in cells
            if nbgrader_meta(c).get("grade") and touched & _reads(c.source)]


def _reads(source: str) -> set[str]:
    from course_tools.grading.engine.apart_worker import free_names

    try:
        return set(free_names(source))
    except SyntaxError:
        return set()


def run_submissions(nb, runs: dict[str, dict[str, str]], warnings_as_errors: tuple[str, ...] = (),
                    only_reachable: bool = False) -> dict[str, RunResult]:
    """Run a chapter's graded cells once per entry of ``runs`` (key -> {solution grade_id: source}).

    All runs share one worker process (tests/support/cell_runner.py), so torch is imported once per chapter,
    and none of them can change the test process: a submission that crashes the interpreter, loops
    in a way the per-cell alarm cannot stop, or leaves torch changed, affects only the worker. A run
    that kills its worker is reported as its every grade cell failing with the reason, and a new
    worker takes the remaining runs. With ``only_reachable`` a run skips the grade cells its replacements
    cannot reach (:func:`grade_cells_seeing`), and its result holds only the cells it ran.
    """
    cells = _job_cells(nb)
    grade_ids = [c["grade_id"] for c in cells if c["grade"]]
    only = {key: grade_cells_seeing(nb, replacements) if only_reachable else None for key, replacements in runs.items()}
    pending = list(runs.items())
    results: dict[str, RunResult] = {}
    with tempfile.TemporaryDirectory() as tmp:
        while pending:
            job, out = Path(tmp) / "job.json", Path(tmp) / "results.jsonl"
            job.write_text(json.dumps({"cells": cells, "warnings_as_errors": list(warnings_as_errors),
                                       "runs": [{"key": k, "replacements": r, "only": only[k]} for k, r in pending]}))
            out.write_text("")
            proc = subprocess.run([sys.executable, str(RUNNER), str(job), str(out)], capture_output=True,
                                  text=True, timeout=WORKER_TIMEOUT_S, cwd=ROOT)
            for line in out.read_text().splitlines():
                done = json.loads(line)
                results[done["key"]] = RunResult({g: CellResult(*v) for g, v in done["cells"].items()},
                                                 done["leaks"], done["seconds"], done.get("stops", []))
            pending = [(k, r) for k, r in pending if k not in results]
            if pending:
                key = pending.pop(0)[0]
                why = (f"the grading process died during this submission (exit {proc.returncode}): "
                       f"{proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else 'no message'}")
                results[key] = RunResult({g: CellResult(False, why) for g in grade_ids}, [])
    return results


def run_graded_cells(nb, replacements: dict[str, str] | None = None,
                     warnings_as_errors: tuple[str, ...] = ()) -> dict[str, CellResult]:
    """Run a chapter's code cells once, as a grader would, with ``replacements`` for solution cells.

    Demonstration cells (tag ``demo``) are skipped, exactly as ``SkipDemoCells`` skips them under
    nbgrader; like nbgrader, execution goes on after a failing cell. Returns the outcome of every
    grade cell. This is the fast path: the same cells and hidden tests nbgrader runs, in one worker
    process instead of a kernel per submission (see :func:`run_submissions`).
    """
    result = run_submissions(nb, {"run": dict(replacements or {})}, warnings_as_errors)["run"]
    if "__unknown__" in result.cells:
        raise KeyError(result.cells["__unknown__"].message)
    return result.cells


def wait_for_server(request, proc: subprocess.Popen, log: Path, what: str, timeout_s: float) -> None:
    """Until ``request`` (a URL or ``urllib.request.Request``) answers; fails with the log's tail when ``proc`` ends
    or ``timeout_s`` passes (a server a test started: JupyterLab, JupyterHub)."""
    import urllib.request

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            urllib.request.urlopen(request, timeout=5).close()
            return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"{what} did not start:\n{log.read_text()[-4000:]}") from None
            time.sleep(0.5)


def skip_unless_ci(reason: str | None, what: str) -> None:
    """Skip for an allowed ``reason`` (conftest's list) on a developer's machine; under CI (``CI`` set), fail."""
    import pytest

    if reason:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run {what}: {reason}")
        pytest.skip(reason)


def stop_process_group(proc: subprocess.Popen, timeout: float = 20) -> None:
    """SIGTERM the process group a test started (``start_new_session=True``), SIGKILL it if it lingers."""
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _children(count_zombies: bool) -> list[psutil.Process]:
    """This process's children and grandchildren; a zombie (ended, not yet waited for) only if counted."""
    found = []
    for p in psutil.Process().children(recursive=True):
        try:
            if count_zombies or p.status() != psutil.STATUS_ZOMBIE:
                found.append(p)
        except psutil.NoSuchProcess:  # ended between the listing and the look
            pass
    return found


@contextlib.contextmanager
def no_child_left(count_zombies: bool = False, wait: float = 5.0) -> Iterator[None]:
    """After the block, no child (nor grandchild) that the block started is left.

    Children there before are another test's (a kernel, multiprocessing's
    resource tracker, in the same pytest-xdist worker), not the block's. One
    that is exiting gets ``wait`` seconds to go. A zombie runs nothing, so it
    is not counted unless ``count_zombies``: for code whose job is also to
    reap what it started.
    """
    before = {p.pid for p in _children(count_zombies=True)}
    yield
    deadline = time.monotonic() + wait
    while (left := [p for p in _children(count_zombies) if p.pid not in before]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert left == [], f"processes left behind: {left}"
