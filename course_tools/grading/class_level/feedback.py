"""HTML feedback for graded submissions, checked to contain no hidden test before it is handed out.

nbgrader's ``generate_feedback`` renders the autograded notebook: the learner's
code, every check cell with its score and its output. ``nbgrader_config.py``
hides hidden tests (``ClearHiddenTests`` removes their source,
``FeedbackOutputs`` keeps of each check only its message, capped, and drops
every printed output, which a learner's code controls).
This module then reads every page it produced, as text, and deletes any page
that still contains a line of a hidden test: a leak becomes an error the
instructor sees, never a page a learner gets.

Nothing in a page runs (issue 45): ``nbgrader_config.py`` renders through
``safe_html.SafeNotebookHTML`` (a learner's markdown and HTML sanitized), and
each page kept gets a Content-Security-Policy in its ``<head>`` (:data:`PAGE_POLICY`:
no script at all, no frames, no forms, images only inline), which holds wherever
the page is opened: from disk, from Jupyter's file view, by the learner.

Submissions whose run did not finish (crashed, timed out with no score,
unreadable, unknown) have no autograded notebook and get no page; their
status in ``grade``/``export`` says why.
"""

from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat

from course_tools.grading.course import Course
from course_tools.grading.hidden import HIDDEN_RE, MIN_CHARS, released_source

__all__ = ["PAGE_POLICY", "FeedbackResult", "feedback", "hidden_lines", "leaked_lines", "released_lines", "with_policy"]

#: A feedback page needs no script: MathJax (a CDN script) does not load either, so math shows as TeX.
PAGE_POLICY = ("default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; "
               "form-action 'none'")

@dataclass
class FeedbackResult:
    student: str
    assignment: str
    path: Path | None
    problem: str = ""


def _lines(text: str) -> set[str]:
    return {ln.strip() for ln in text.splitlines() if ln.strip()}


def released_lines(course: Course, assignment: str) -> set[str]:
    """Every line a learner was given: each test cell as released (hidden tests removed), every
    other cell of the assignment's notebooks in ``solutions/`` (hidden tests removed)."""
    seen: set[str] = set()
    with course.gradebook() as gb:
        for nb in gb.find_assignment(assignment).notebooks:
            for cell in nb.source_cells:
                seen |= _lines(released_source(cell.source or ""))
    for path in sorted((course.source_dir / assignment).glob("*.ipynb")):
        try:
            nb = nbformat.read(str(path), as_version=4)
        except Exception:  # noqa: BLE001 - the gradebook's copy above is what matters
            continue
        for cell in nb.cells:
            seen |= _lines(HIDDEN_RE.sub("", cell.get("source", "")))
    return seen


def hidden_lines(course: Course, assignment: str) -> list[str]:
    """Every non-trivial line of every hidden test of an assignment that the learner was not given.

    A line that also stands in a visible part of the notebook (``with fake_machine(cuda=1):``
    in a check's visible half and again in its hidden half) is no secret: finding it in a page
    proves nothing, and counting it would reject every page of the assignment.
    """
    public = released_lines(course, assignment)
    lines = []
    with course.gradebook() as gb:
        for nb in gb.find_assignment(assignment).notebooks:
            for cell in nb.source_cells:
                for block in HIDDEN_RE.findall(cell.source or ""):
                    lines += [ln.strip() for ln in block.splitlines() if len(ln.strip()) >= MIN_CHARS and ln.strip() not in public]
    return list(dict.fromkeys(lines))


def submitted_lines(course: Course, student: str, assignment: str) -> set[str]:
    """Every line of the learner's own submission: text they wrote (or were given) is no leak."""
    seen: set[str] = set()
    for path in sorted((course.submitted_dir / student / assignment).glob("*.ipynb")):
        try:
            nb = nbformat.read(str(path), as_version=4)
        except Exception:  # noqa: BLE001 - an unreadable submission has no page anyway
            continue
        for cell in nb.cells:
            seen |= _lines(cell.get("source", ""))
    return seen


def _visible_text(page: str) -> str:
    """The text a reader sees: tags removed (pygments splits code into spans), entities decoded."""
    return html.unescape(re.sub(r"<[^>]+>", "", page))


def leaked_lines(page: str, hidden: list[str]) -> list[str]:
    text = _visible_text(page)
    return [line for line in hidden if line in text]


def with_policy(page: str) -> str | None:
    """The page with :data:`PAGE_POLICY` first in its ``<head>`` (before any script or content), or None without
    a ``<head>``."""
    head = re.search(r"<head(\s[^>]*)?>", page, re.IGNORECASE)
    if not head:
        return None
    meta = f'\n<meta http-equiv="Content-Security-Policy" content="{PAGE_POLICY}">'
    return page[:head.end()] + meta + page[head.end():]


def feedback(course: Course, assignment: str | None = None, student: str | None = None) -> list[FeedbackResult]:
    """Generate feedback for finished runs; return one result per page, with any problem."""
    outcomes = course.load_outcomes().values()
    chosen = [o for o in outcomes if (not assignment or o["assignment"] == assignment) and (not student or o["student"] == student)]
    results = []
    for name in sorted({o["assignment"] for o in chosen if o["score"] is not None}):
        cmd = [sys.executable, "-m", "nbgrader", "generate_feedback", name, "--force"]
        if student:
            cmd += ["--student", student]
        proc = subprocess.run(cmd, cwd=course.root, env=dict(os.environ, PYTHONWARNINGS="ignore"),
                              capture_output=True, text=True, timeout=600)
        hidden = hidden_lines(course, name)
        for o in chosen:
            if o["assignment"] != name or o["score"] is None:
                continue
            folder = course.feedback_dir / o["student"] / name
            pages = sorted(folder.glob("*.html"))
            if not pages:
                tail = (proc.stdout + proc.stderr).strip().splitlines()[-3:]
                results.append(FeedbackResult(o["student"], name, None, "nbgrader wrote no page: " + " | ".join(tail)
                                              + "; run `nbgrader generate_feedback "
                                              + f"{name} --student {o['student']}` to see the whole error"))
            own = submitted_lines(course, o["student"], name)
            for page in pages:
                text = page.read_text(errors="replace")
                leaks = leaked_lines(text, [ln for ln in hidden if ln not in own])
                guarded = with_policy(text)
                if guarded is None:
                    page.unlink()
                    results.append(FeedbackResult(o["student"], name, None, f"{page.name} has no <head> to carry its "
                                                  "Content-Security-Policy; deleted. Check c.HTMLExporter.template_name"))
                elif leaks:
                    page.unlink()
                    results.append(FeedbackResult(
                        o["student"], name, None,
                        f"{page.name} showed a line of a hidden test ({leaks[0]!r}); deleted. Check that "
                        "nbgrader_config.py still lists FeedbackOutputs and ClearHiddenTests in "
                        "c.GenerateFeedback.preprocessors and that the test keeps it between "
                        "### BEGIN/END HIDDEN TESTS, then run feedback again"))
                else:
                    page.write_text(guarded)
                    results.append(FeedbackResult(o["student"], name, page))
    for o in chosen:
        if o["score"] is None:
            stale = course.feedback_dir / o["student"] / o["assignment"]
            shutil.rmtree(stale, ignore_errors=True)  # a page from an earlier run would be wrong now
            results.append(FeedbackResult(o["student"], o["assignment"], None, f"no feedback: {o['status']} ({o['detail']})"))
    return results
