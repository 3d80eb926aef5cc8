"""HTML feedback for graded submissions, checked to contain no hidden test before it is handed out.

nbgrader's ``generate_feedback`` renders the autograded notebook: the learner's
code, every check cell with its score and its output. ``nbgrader_config.py``
hides hidden tests (``ClearHiddenTests`` removes their source,
``HideHiddenTestOutput`` reduces a failed test's traceback to its message).
This module then reads every page it produced, as text, and deletes any page
that still contains a line of a hidden test: a leak becomes an error the
instructor sees, never a page a learner gets.

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

from helpers.grading.course import Course

__all__ = ["FeedbackResult", "feedback", "hidden_lines", "leaked_lines"]

HIDDEN_RE = re.compile(r"### BEGIN HIDDEN TESTS\n(.*?)### END HIDDEN TESTS", re.S)


@dataclass
class FeedbackResult:
    student: str
    assignment: str
    path: Path | None
    problem: str = ""


def hidden_lines(course: Course, assignment: str) -> list[str]:
    """Every non-trivial line of every hidden test of an assignment, as the gradebook has it."""
    lines = []
    with course.gradebook() as gb:
        for nb in gb.find_assignment(assignment).notebooks:
            for cell in nb.source_cells:
                for block in HIDDEN_RE.findall(cell.source or ""):
                    lines += [ln.strip() for ln in block.splitlines() if len(ln.strip()) >= 8]
    return lines


def _visible_text(page: str) -> str:
    """The text a reader sees: tags removed (pygments splits code into spans), entities decoded."""
    return html.unescape(re.sub(r"<[^>]+>", "", page))


def leaked_lines(page: str, hidden: list[str]) -> list[str]:
    text = _visible_text(page)
    return [line for line in hidden if line in text]


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
                results.append(FeedbackResult(o["student"], name, None, "nbgrader wrote no page: " + " | ".join(tail)))
            for page in pages:
                leaks = leaked_lines(page.read_text(errors="replace"), hidden)
                if leaks:
                    page.unlink()
                    results.append(FeedbackResult(o["student"], name, None, f"{page.name} showed a hidden test ({leaks[0]!r}); deleted"))
                else:
                    results.append(FeedbackResult(o["student"], name, page))
    for o in chosen:
        if o["score"] is None:
            stale = course.feedback_dir / o["student"] / o["assignment"]
            shutil.rmtree(stale, ignore_errors=True)  # a page from an earlier run would be wrong now
            results.append(FeedbackResult(o["student"], o["assignment"], None, f"no feedback: {o['status']} ({o['detail']})"))
    return results
