"""Measure the reference solution's CPU cost per grade cell on this machine: ``python -m`` this module.

``reference.reference_costs`` runs it in a process of its own (nbclient cannot run a notebook inside a running
one) and stores what it prints: ``{grade_id: CPU seconds}`` as one JSON line. It runs the reference as grading runs
a submission: demonstrations skipped, the same kernel, sandbox and caps, but no CPU budget.

    python -m course_tools.grading.engine.calibrate <course root> <assignment> <notebook>
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

import nbformat

from course_tools.grading.course import Course
from course_tools.grading.demo_cells import SKIPPED_SOURCE, is_demo_cell
from course_tools.grading.engine.execute import LimitedExecute

__all__ = ["measure_reference", "main"]


def measure_reference(root: Path, assignment: str, notebook: str) -> dict[str, float]:
    """{grade_id: CPU seconds} of the reference solution, from a scratch copy of its folder's files."""
    course = Course(root)
    folder = course.source_dir / assignment
    nb = nbformat.read(str(folder / f"{notebook}.ipynb"), as_version=4)
    for cell in nb.cells:
        if is_demo_cell(cell):
            cell.source, cell.outputs = SKIPPED_SOURCE, []
    with tempfile.TemporaryDirectory(prefix="reference-") as work:
        for item in folder.iterdir():
            if item.is_file() and item.suffix != ".ipynb":
                shutil.copy2(item, Path(work) / item.name)
        ex = LimitedExecute(config=course.config, calibrating=True)
        ex.preprocess(nb, {"metadata": {"path": work}})
    return ex.grade_cell_cpu


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    print(json.dumps(measure_reference(Path(argv[0]), argv[1], argv[2])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
