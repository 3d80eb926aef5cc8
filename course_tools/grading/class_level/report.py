"""The grades of a class: a student x assignment table for the terminal, and a CSV with a status column.

The status and its detail come from the stored outcomes (``course_tools.grading.class_level.status``);
the score comes from nbgrader's gradebook, read now (``course_tools.grading.class_level.scores``),
so a manual score entered in formgrader or with ``python -m course_tools override``
counts here exactly as in ``nbgrader export``, and is listed in the detail. A
run that crashed, timed out or could not be read has no score (and ``grade``
removed any old one from the gradebook), so it can never look like a plain 0.
Rows: every student on the roster or with a submission, times every
assignment in the gradebook or submitted; and every (student, assignment)
that collect refused a folder for (``course_tools.grading.class_level.collect``): status
``refused`` where nothing was collected, else a note in the detail.

CSV columns: the student, the assignment, score, max_score, status, detail,
the submission's ``timestamp`` (nbgrader's ``timestamp.txt``), ``due`` and
``late`` (``c.Deadlines.due``: assignment -> "YYYY-MM-DD HH:MM:SS UTC"; else
the gradebook's due date, ``nbgrader db assignment add A --duedate``), then one
column per grade cell of every assignment (its points; empty for another
assignment's row or a run with no score).
"""

from __future__ import annotations

import csv
from pathlib import Path

from traitlets import Dict
from traitlets.config import Configurable

from course_tools.grading.course import Course
from course_tools.grading.class_level.scores import submission_scores
from course_tools.grading.class_level.collect import load_refusals
from course_tools.grading.class_level.status import MISSING, NOT_GRADED, REDATED_NOTE, REFUSED, REFUSED_NOTE

__all__ = ["CSV_COLUMNS", "Deadlines", "rows", "format_table", "write_csv"]

CSV_COLUMNS = ["student_id", "first_name", "last_name", "assignment", "score", "max_score", "status", "detail",
               "timestamp", "due", "late"]


class Deadlines(Configurable):
    """Due dates for the CSV's ``late`` column (``c.Deadlines.due`` in nbgrader_config.py)."""

    due = Dict(help='assignment -> due date, e.g. {"02_devices": "2026-12-14 23:59:00 UTC"}').tag(config=True)


def _timestamp(course: Course, student: str, assignment: str):
    """When the learner handed it in (``submitted/<student>/<assignment>/timestamp.txt``), or None."""
    from nbgrader.utils import parse_utc

    path = course.submitted_dir / student / assignment / "timestamp.txt"
    try:
        return parse_utc(path.read_text().strip()) if path.is_file() else None
    except (ValueError, OverflowError):
        return None


def _due_dates(course: Course, gb) -> dict:
    from nbgrader.utils import parse_utc

    dates = {a.name: a.duedate for a in gb.assignments if a.duedate}
    for name, text in Deadlines(config=course.config).due.items():
        dates[name] = parse_utc(text)
    return dates


def _fmt(when) -> str:
    return when.strftime("%Y-%m-%d %H:%M:%S UTC") if when else ""


def _refused(course: Course) -> dict[tuple[str, str], str]:
    """(student, assignment) -> what collect refused or re-dated in that student's name, and why (newest first).

    A re-dated submission was collected (as arriving when the exchange saw it, not when its name says): its note
    says so without ``refused at collect``, so the row's status stays what grading found.
    """
    found: dict[tuple[str, str], dict[str, list[str]]] = {}
    for r in sorted(load_refusals(course.autograded_dir), key=lambda r: r["folder"], reverse=True):
        kinds = found.setdefault((r["student"], r["assignment"]), {})
        kinds.setdefault(r["kind"], []).append(f"{r['folder']}: {r['reason']}")
    notes = {"refused": REFUSED_NOTE, "re-dated": REDATED_NOTE}
    return {key: "; ".join(f"{notes.get(kind, kind)}: " + "; ".join(reasons) for kind, reasons in sorted(kinds.items()))
            for key, kinds in found.items()}


def _with_note(detail: str, note: str) -> str:
    return "; ".join(d for d in (detail, note) if d)


def _record(course, gb, stored, submitted, people, in_gradebook, sid, name, refused="") -> dict | None:
    rec = stored.get(f"{sid}/{name}")
    if rec is None:
        if (sid, name) in submitted:
            return {"status": NOT_GRADED, "score": None, "max_score": None,
                    "detail": _with_note("submitted; run grade", refused)}
        if REFUSED_NOTE in refused:
            return {"status": REFUSED, "score": None, "max_score": None, "detail": refused}
        if sid in people and name in in_gradebook:
            return {"status": MISSING, "score": None, "max_score": None, "detail": "nothing submitted"}
        return None
    rec = dict(rec, cells={}, detail=_with_note(rec["detail"], refused))
    if rec["score"] is not None:
        live = submission_scores(gb, course, name, sid)
        if live is None:
            rec.update(score=None, max_score=None, status=NOT_GRADED,
                       detail="its score was removed from the gradebook; run grade again")
        else:
            rec.update(score=live.score, max_score=live.max_score, cells=live.cells)
            if live.manual:
                rec["detail"] = "; ".join([d for d in [rec["detail"]] if d] + ["manual: " + ", ".join(live.manual)])
    return rec


def rows(course: Course, assignment: str | None = None, student: str | None = None) -> list[dict]:
    """One row per (student, assignment), sorted; stable between runs."""
    stored = course.load_outcomes()
    submitted = set(course.submissions())
    refused = _refused(course)
    with course.gradebook() as gb:
        people = {s.id: (s.first_name or "", s.last_name or "") for s in gb.students}
        in_gradebook = {a.name for a in gb.assignments}
        due = _due_dates(course, gb)
        students = set(people) | {s for s, _ in submitted} | {r["student"] for r in stored.values()} | {
            s for s, _ in refused}
        assignments = in_gradebook | {a for _, a in submitted} | {r["assignment"] for r in stored.values()} | {
            a for _, a in refused}
        table = []
        for sid in sorted(students):
            for name in sorted(assignments):
                if (assignment and name != assignment) or (student and sid != student):
                    continue
                rec = _record(course, gb, stored, submitted, people, in_gradebook, sid, name,
                              refused.get((sid, name), ""))
                if rec is None:
                    continue
                when = _timestamp(course, sid, name) if (sid, name) in submitted else None
                first, last = people.get(sid, ("", ""))
                late = "" if when is None or name not in due else ("yes" if when > due[name] else "no")
                table.append({
                    "student_id": sid, "first_name": first, "last_name": last, "assignment": name,
                    "score": rec["score"], "max_score": rec["max_score"], "status": rec["status"],
                    "detail": rec["detail"], "timestamp": _fmt(when), "due": _fmt(due.get(name)), "late": late,
                    "cells": rec.get("cells", {}),
                })
    return table


def _cell(row: dict) -> str:
    if row["score"] is None:
        return row["status"]
    return f"{row['score']:g}/{row['max_score']:g} {row['status']}" + (" late" if row["late"] == "yes" else "")


def format_table(table: list[dict]) -> str:
    """Students down, assignments across: ``score/max status`` or the status alone."""
    if not table:
        return "no submissions found"
    students = sorted({r["student_id"] for r in table})
    assignments = sorted({r["assignment"] for r in table})
    cells = {(r["student_id"], r["assignment"]): _cell(r) for r in table}
    widths = [max(len("student"), *(len(s) for s in students))]
    widths += [max(len(a), *(len(cells.get((s, a), "")) for s in students)) for a in assignments]
    lines = ["  ".join(h.ljust(w) for h, w in zip(["student", *assignments], widths))]
    lines.append("  ".join("-" * w for w in widths))
    for s in students:
        lines.append("  ".join(v.ljust(w) for v, w in zip([s, *(cells.get((s, a), "") for a in assignments)], widths)))
    notes = [f"  {r['student_id']}/{r['assignment']}: {r['status']}: {r['detail']}" for r in table
             if r["detail"] and (r["status"] not in (MISSING, NOT_GRADED) or REFUSED_NOTE in r["detail"]
                                 or REDATED_NOTE in r["detail"])]
    if notes:
        lines += ["", "details:", *notes]
    return "\n".join(lines)


def exercise_columns(course: Course) -> list[str]:
    """Every grade cell of every assignment in the gradebook, in notebook order (grade ids are unique)."""
    names: list[str] = []
    with course.gradebook() as gb:
        for a in sorted(gb.assignments, key=lambda a: a.name):
            for nb in a.notebooks:
                names += [c.name for c in sorted(nb.grade_cells, key=lambda c: c.id)]
    return list(dict.fromkeys(names))


def write_csv(course: Course, path: Path) -> int:
    """Write every row to ``path`` (replaced, never appended); return the number of rows."""
    table = rows(course)
    exercises = exercise_columns(course)
    # UTF-8 whatever the locale (Korean names); every learner-chosen name in it is already escaped (shown.py)
    with open(path, "w", newline="", encoding="utf-8", errors="backslashreplace") as fh:
        writer = csv.DictWriter(fh, fieldnames=CSV_COLUMNS + exercises)
        writer.writeheader()
        for row in table:
            values = {k: ("" if row[k] is None else row[k]) for k in CSV_COLUMNS}
            values.update({c: "" if row["cells"].get(c) is None else row["cells"][c] for c in exercises})
            writer.writerow(values)
    return len(table)
