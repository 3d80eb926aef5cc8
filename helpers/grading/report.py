"""The grades of a class: a student x assignment table for the terminal, and a CSV with a status column.

Both read the stored outcomes (``helpers.grading.course``), never nbgrader's
raw score alone: a run that crashed, timed out or could not be read has no
score, so it can never look like a plain 0. Rows: every student on the roster
or with a submission, times every assignment in the gradebook or submitted.
"""

from __future__ import annotations

import csv
from pathlib import Path

from helpers.grading.course import Course
from helpers.grading.status import MISSING, NOT_GRADED

__all__ = ["CSV_COLUMNS", "rows", "format_table", "write_csv"]

CSV_COLUMNS = ["student_id", "first_name", "last_name", "assignment", "score", "max_score", "status", "detail"]


def rows(course: Course, assignment: str | None = None, student: str | None = None) -> list[dict]:
    """One row per (student, assignment), sorted; stable between runs."""
    stored = course.load_outcomes()
    submitted = set(course.submissions())
    with course.gradebook() as gb:
        people = {s.id: (s.first_name or "", s.last_name or "") for s in gb.students}
        assignments = {a.name for a in gb.assignments}
    in_gradebook = set(assignments)
    students = set(people) | {s for s, _ in submitted} | {r["student"] for r in stored.values()}
    assignments |= {a for _, a in submitted} | {r["assignment"] for r in stored.values()}
    table = []
    for sid in sorted(students):
        for name in sorted(assignments):
            if (assignment and name != assignment) or (student and sid != student):
                continue
            rec = stored.get(f"{sid}/{name}")
            if rec is None:
                if (sid, name) in submitted:
                    rec = {"status": NOT_GRADED, "score": None, "max_score": None, "detail": "submitted; run grade"}
                elif sid in people and name in in_gradebook:
                    rec = {"status": MISSING, "score": None, "max_score": None, "detail": "nothing submitted"}
                else:
                    continue
            first, last = people.get(sid, ("", ""))
            table.append({
                "student_id": sid, "first_name": first, "last_name": last, "assignment": name,
                "score": rec["score"], "max_score": rec["max_score"], "status": rec["status"], "detail": rec["detail"],
            })
    return table


def _cell(row: dict) -> str:
    if row["score"] is None:
        return row["status"]
    return f"{row['score']:g}/{row['max_score']:g} {row['status']}"


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
             if r["detail"] and r["status"] not in (MISSING, NOT_GRADED)]
    if notes:
        lines += ["", "details:", *notes]
    return "\n".join(lines)


def write_csv(course: Course, path: Path) -> int:
    """Write every row to ``path`` (replaced, never appended); return the number of rows."""
    table = rows(course)
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        for row in table:
            writer.writerow({k: ("" if row[k] is None else row[k]) for k in CSV_COLUMNS})
    return len(table)
