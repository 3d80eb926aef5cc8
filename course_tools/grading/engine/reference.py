"""What the reference solution costs on this machine: CPU seconds per grade cell, measured once and kept.

A grade cell's CPU budget starts at ``c.GradingLimits.grade_cell_cpu``. When an answer spends it, the
verdict compares the answer with the reference solution, run the same way (the same kernel, sandbox and
caps, demonstrations skipped) on the same machine: if the reference needs more than the budget there, the
budget was wrong for this machine and the answer is graded again with ``cpu_factor`` times the reference's
cost; otherwise the timeout's message says what the answer used against what the reference uses.

The reference runs only when some answer spends a budget, once per notebook, in a process of its own
(``python -m course_tools.grading.engine.execute ROOT ASSIGNMENT NOTEBOOK``), and is kept in ``autograded/.grading/reference-costs.json``
keyed by the solution notebook's content and the machine, so an edited solution or another machine is
measured anew. A lock file makes concurrent graders measure it once.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

from course_tools.grading.course import Course

__all__ = ["machine_id", "reference_costs"]

FILE = "reference-costs.json"


def machine_id() -> str:
    """Which machine measured it: its name, CPU count and processor, so another machine measures anew."""
    return f"{platform.node()}/{os.cpu_count()}/{platform.processor() or platform.machine()}"


@contextlib.contextmanager
def _locked(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def reference_costs(root: Path, assignment: str, notebook: str, timeout_s: float = 1800) -> dict[str, float]:
    """{grade_id: CPU seconds} of the reference solution of ``assignment/notebook`` on this machine."""
    course = Course(root)
    source = course.source_dir / assignment / f"{notebook}.ipynb"
    if not source.is_file():
        return {}
    signature = f"{hashlib.sha256(source.read_bytes()).hexdigest()}@{machine_id()}"
    path, key = course.records_dir / FILE, f"{assignment}/{notebook}"
    with _locked(path):
        data = json.loads(path.read_text()) if path.is_file() else {}
        if data.get(key, {}).get("signature") != signature:
            data[key] = {"signature": signature, "cpu_s": _measure(course.root, assignment, notebook, timeout_s)}
            path.write_text(json.dumps(data, indent=1, sort_keys=True))
    return data[key]["cpu_s"]


def _measure(root: Path, assignment: str, notebook: str, timeout_s: float) -> dict[str, float]:
    """Run the reference in a process of its own (nbclient cannot run a notebook inside a running one)."""
    proc = subprocess.run([sys.executable, "-m", "course_tools.grading.engine.calibrate", str(root), assignment, notebook],
                          capture_output=True, text=True, timeout=timeout_s)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        return {}  # no reference figure: the budget stays as configured, and the message says none is known
    return json.loads(lines[-1])
