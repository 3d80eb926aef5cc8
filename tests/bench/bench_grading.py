"""Grading time per submission: checks in the learner's kernel against checks decided apart (issue 24).

Not a test (a timed assert would flake on a shared machine): a benchmark whose figures go into the notes.
It copies one chapter into a scratch course, hands in the reference solution, and grades it with real
``nbgrader autograde`` N times each way, interleaved, with ``c.GradingLimits.verdict_apart`` False and True:

    .venv/bin/python tests/bench/bench_grading.py 02_devices 3
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def main(chapter: str, n: int) -> None:
    from course_tools.grading.release.generate import generate_release

    course = Path(tempfile.mkdtemp(prefix="bench-course-"))
    try:
        shutil.copy(ROOT / "nbgrader_config.py", course / "nbgrader_config.py")
        shutil.copytree(ROOT / "solutions" / chapter, course / "solutions" / chapter)
        generate_release(course / "release", [chapter], root=course, db_url=f"sqlite:///{course / 'gradebook.db'}")
        handed_in = course / "submitted" / "reference" / chapter
        handed_in.mkdir(parents=True)
        shutil.copy(ROOT / "solutions" / chapter / f"{chapter}.ipynb", handed_in / f"{chapter}.ipynb")
        config = (course / "nbgrader_config.py").read_text()
        times: dict[str, list[float]] = {"kernel": [], "apart": []}
        for _ in range(n):
            for mode in times:
                (course / "nbgrader_config.py").write_text(f"{config}\nc.GradingLimits.verdict_apart = {mode == 'apart'}\n")
                start = time.perf_counter()
                done = subprocess.run([sys.executable, "-m", "nbgrader", "autograde", chapter, "--force", "--create",
                                       "--log-level=WARN", f"--CourseDirectory.root={course}"],
                                      cwd=course, capture_output=True, text=True)
                times[mode].append(time.perf_counter() - start)
                if done.returncode != 0:
                    raise SystemExit(done.stderr[-2000:])
        for mode, seconds in times.items():
            print(f"{chapter} {mode}: {[round(s, 1) for s in seconds]} s, median {statistics.median(seconds):.1f} s")
        ratio = statistics.median(times["apart"]) / statistics.median(times["kernel"])
        print(f"{chapter} decided apart / in the kernel (medians): {ratio:.2f}")
    finally:
        shutil.rmtree(course, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 3)
