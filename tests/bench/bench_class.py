"""Grading a class with ``--jobs 1`` against ``--jobs 2``: time, spread, and the same outcomes either way.

Not a test (a timed assert would flake on a shared machine): a benchmark whose figures go into the notes.
It builds a scratch course with one chapter and a class of N learners (two in three hand in the released notebook
with the reference answers pasted in, the rest the released notebook untouched, so both "graded" and "wrong" are graded), then grades the
whole class with real ``nbgrader autograde`` processes, R times with each ``jobs``, interleaved
(1, 2, 2, 1, ...), and prints each time, the medians, the ratio, and whether the outcomes agree:

    .venv/bin/python tests/bench/bench_class.py 00_start 20 2
"""

from __future__ import annotations

import copy
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[2]


def build(course: Path, chapter: str, learners: int) -> None:
    from course_tools.grading.course import Course
    from course_tools.grading.release.generate import generate_release

    shutil.copy(ROOT / "nbgrader_config.py", course / "nbgrader_config.py")
    shutil.copytree(ROOT / "solutions" / chapter, course / "solutions" / chapter)
    released = course / "release"
    generate_release(released, [chapter], root=course, db_url=Course(course).db_url)
    with Course(course).gradebook() as gb:
        for i in range(learners):
            gb.update_or_create_student(f"learner{i:02d}")
    blank = nbformat.read(str(released / chapter / f"{chapter}.ipynb"), as_version=4)
    answers = {c.metadata["nbgrader"]["grade_id"]: c.source
               for c in nbformat.read(str(ROOT / "solutions" / chapter / f"{chapter}.ipynb"), as_version=4).cells
               if c.get("metadata", {}).get("nbgrader", {}).get("solution")}
    solved = copy.deepcopy(blank)
    for cell in solved.cells:  # the released notebook with the reference answers pasted in, as a learner would
        gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if gid in answers:
            cell.source = answers[gid]
    for i in range(learners):
        folder = course / "submitted" / f"learner{i:02d}" / chapter
        folder.mkdir(parents=True)
        nbformat.write(solved if i % 3 != 2 else blank, str(folder / f"{chapter}.ipynb"))


def main(chapter: str, learners: int, repeats: int) -> None:
    from course_tools.grading.class_level.grade import grade
    from course_tools.grading.course import Course

    course_dir = Path(tempfile.mkdtemp(prefix="bench-class-"))
    try:
        build(course_dir, chapter, learners)
        course = Course(course_dir)
        times: dict[int, list[float]] = {1: [], 2: []}
        outcomes: dict[int, set] = {}
        order = [j for r in range(repeats) for j in ((1, 2) if r % 2 == 0 else (2, 1))]
        for jobs in order:
            start = time.perf_counter()
            got = grade(course, progress=False, jobs=jobs)
            times[jobs].append(time.perf_counter() - start)
            outcomes.setdefault(jobs, set()).update((o.student, o.status, o.score) for o in got)
            print(f"jobs {jobs}: {times[jobs][-1]:.0f} s (load {os.getloadavg()[0]:.1f})", flush=True)
        for jobs, seconds in times.items():
            spread = f"{min(seconds):.0f}-{max(seconds):.0f} s" if len(seconds) > 1 else "one run"
            print(f"{learners} learners, jobs {jobs}: median {statistics.median(seconds):.0f} s ({spread})")
        ratio = statistics.median(times[1]) / statistics.median(times[2])
        print(f"jobs 1 / jobs 2 (medians): {ratio:.2f} on {os.cpu_count()} cores")
        statuses = sorted({s for _, s, _ in outcomes[1]})
        print(f"outcomes agree: {outcomes[1] == outcomes[2]} (statuses: {', '.join(statuses)})")
    finally:
        shutil.rmtree(course_dir, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 20, int(sys.argv[3]) if len(sys.argv) > 3 else 2)
