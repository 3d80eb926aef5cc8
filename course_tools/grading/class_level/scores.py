"""Scores as the gradebook has them: per exercise, with manual overrides, the one source of truth.

``grade`` stores a status per submission (``course_tools.grading.class_level.status``), but the
score shown anywhere (the table, ``export``'s CSV) is read from nbgrader's
gradebook at that moment, so ``nbgrader export``, formgrader and the course's
export always agree: a manual score entered in formgrader counts, and a run
with no score removes the old one from the gradebook (``grade.forget_score``).

An override is a manual score for one grade cell, with a reason:
``python -m course_tools override STUDENT ASSIGNMENT CELL POINTS --why TEXT``. It
is written to the gradebook (``manual_score``, which nbgrader keeps through
every later autograde and which formgrader shows) and to
``autograded/.grading/overrides.json`` (who, when, why), from which ``grade``
writes it back if the submission had to be removed and graded again.
"""

from __future__ import annotations

import datetime as dt
import getpass
import json
import os
from dataclasses import dataclass, field

from course_tools.grading.course import Course

__all__ = ["SubmissionScores", "apply_overrides", "load_overrides", "override", "submission_scores"]


@dataclass
class SubmissionScores:
    """One submission in the gradebook: total, per grade cell, timestamp, and every manual score."""

    score: float
    max_score: float
    cells: dict[str, float | None] = field(default_factory=dict)  # grade_id -> points (manual when set)
    manual: list[str] = field(default_factory=list)  # "cell: auto A -> manual M (why)"
    timestamp: str = ""


def _overrides_path(course: Course):
    return course.records_dir / "overrides.json"


def load_overrides(course: Course) -> dict[str, dict]:
    path = _overrides_path(course)
    return json.loads(path.read_text()) if path.is_file() else {}


def _grades(gb, assignment: str, student: str):
    sub = gb.find_submission(assignment, student)
    for nb in sub.notebooks:
        yield from nb.grades


def submission_scores(gb, course: Course, assignment: str, student: str) -> SubmissionScores | None:
    """The gradebook's scores for one submission, or None when it holds none."""
    try:
        sub = gb.find_submission(assignment, student)
    except Exception:  # noqa: BLE001 - nbgrader's MissingEntry
        return None
    reasons = load_overrides(course)
    result = SubmissionScores(float(sub.score), float(sub.max_score),
                              timestamp=sub.timestamp.strftime("%Y-%m-%d %H:%M:%S UTC") if sub.timestamp else "")
    for grade in _grades(gb, assignment, student):
        if grade.max_score_gradecell is None:  # a task cell: not an exercise of this course
            continue
        result.cells[grade.name] = None if grade.score is None else float(grade.score)
        if grade.manual_score is not None:
            why = reasons.get(f"{student}/{assignment}/{grade.name}", {}).get("why", "entered in formgrader")
            auto = "none" if grade.auto_score is None else f"{grade.auto_score:g}"
            result.manual.append(f"`{grade.name}`: auto {auto} -> manual {grade.manual_score:g} ({why})")
    return result


def _set_manual(gb, assignment: str, student: str, cell: str, points: float) -> None:
    for grade in _grades(gb, assignment, student):
        if grade.name == cell:
            if not 0 <= points <= float(grade.max_score):
                raise ValueError(f"`{cell}` is worth {grade.max_score:g} points: give 0 to {grade.max_score:g}")
            grade.manual_score = points
            grade.needs_manual_grade = False
            gb.db.commit()
            return
    names = sorted(g.name for g in _grades(gb, assignment, student) if g.max_score_gradecell is not None)
    raise ValueError(f"{assignment} has no grade cell {cell!r}; its grade cells: {', '.join(names)}")


def override(course: Course, student: str, assignment: str, cell: str, points: float, why: str) -> str:
    """Give ``points`` for grade cell ``cell`` of a graded submission; return the line that lists it."""
    if not why.strip():
        raise ValueError("say why (--why TEXT): the reason is listed beside the score in every export")
    with course.gradebook() as gb:
        try:
            gb.find_submission(assignment, student)
        except Exception:  # noqa: BLE001
            raise ValueError(f"{student}/{assignment} has no score in the gradebook: grade it first "
                             f"(`python -m course_tools grade --student {student} --assignment {assignment}`)") from None
        _set_manual(gb, assignment, student, cell, points)
    records = load_overrides(course)
    records[f"{student}/{assignment}/{cell}"] = {
        "points": points, "why": why.strip(), "by": os.environ.get("USER") or getpass.getuser(),
        "at": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
    }
    course.records_dir.mkdir(parents=True, exist_ok=True)
    tmp = _overrides_path(course).with_suffix(".tmp")
    tmp.write_text(json.dumps(dict(sorted(records.items())), indent=1))
    os.replace(tmp, _overrides_path(course))
    return f"{student}/{assignment}: `{cell}` set to {points:g} ({why.strip()})"


def apply_overrides(course: Course, gb, student: str, assignment: str) -> list[str]:
    """Write the recorded overrides of one submission back into the gradebook; return those that no longer apply."""
    stale = []
    for key, rec in load_overrides(course).items():
        who, what, cell = key.split("/", 2)
        if (who, what) != (student, assignment):
            continue
        try:
            _set_manual(gb, assignment, student, cell, float(rec["points"]))
        except ValueError as err:
            stale.append(f"the override of `{cell}` no longer applies ({err})")
    return stale
