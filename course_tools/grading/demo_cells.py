"""Demonstration cells: what grading skips, and what never counts as one (a learner cannot skip a test).

A heavy demonstration (a sweep, a training curve) is tagged ``demo`` in ``solutions/``; grading blanks it before
the notebook runs (``SkipDemoCells``, wired in ``nbgrader_config.py``), and the reference calibration does the same
(``engine/calibrate.py``), so both run what a learner's submission runs. Ground of the grading package: the engine
and the course rules (``tests/``) both read it.
"""

from __future__ import annotations

from nbgrader.preprocessors import NbGraderPreprocessor

__all__ = ["DEMO_TAG", "SKIPPED_SOURCE", "SkipDemoCells", "is_demo_cell", "is_nbgrader_cell"]

#: Tag on a heavy demonstration cell (a sweep, a training curve). No exercise may depend on it.
DEMO_TAG = "demo"

SKIPPED_SOURCE = "# demonstration cell: skipped while grading (tag 'demo'); it earns no points"


def is_nbgrader_cell(cell) -> bool:
    """A grade, solution, task or read-only cell: one whose content grading depends on."""
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return any(meta.get(key) for key in ("grade", "solution", "locked", "task"))


def is_demo_cell(cell) -> bool:
    """A code cell tagged ``demo`` that is not an nbgrader cell.

    The nbgrader check matters: a learner who tags a test cell ``demo`` must
    not be able to skip it.
    """
    return (
        cell.get("cell_type") == "code"
        and DEMO_TAG in cell.get("metadata", {}).get("tags", [])
        and not is_nbgrader_cell(cell)
    )


class SkipDemoCells(NbGraderPreprocessor):
    """Blank out demonstration cells before a grading run executes the notebook.

    Based on ``NbGraderPreprocessor`` because it is enabled by default: a plain
    nbconvert ``Preprocessor`` is registered disabled and silently never runs.
    """

    def preprocess_cell(self, cell, resources, index):
        if is_demo_cell(cell):
            cell.source = SKIPPED_SOURCE
            cell.outputs = []
        return cell, resources
