"""nbgrader preprocessors that close gaps measured in NBGRADER_NOTES.md."""

from __future__ import annotations

from nbgrader.preprocessors import NbGraderPreprocessor

__all__ = ["DEMO_TAG", "SkipDemoCells", "HideHiddenTestOutput", "is_demo_cell", "is_nbgrader_cell"]

#: Tag on a heavy demonstration cell (a sweep, a training curve). No exercise may depend on it.
DEMO_TAG = "demo"

HIDDEN_BEGIN = "### BEGIN HIDDEN TESTS"
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


class HideHiddenTestOutput(NbGraderPreprocessor):
    """In feedback, reduce a failed hidden test's output to the failure message alone.

    ``ClearHiddenTests`` removes the hidden source, but a traceback still
    prints the failing lines. The course's checks put everything a learner
    needs into the exception message (see ``helpers.checks``), so the
    traceback is dropped and only ``ExceptionName: message`` stays.
    """

    def preprocess_cell(self, cell, resources, index):
        if cell.get("cell_type") != "code" or HIDDEN_BEGIN not in cell.get("source", ""):
            return cell, resources
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                output["traceback"] = [f"{output.get('ename', 'Error')}: {output.get('evalue', '')}"]
        return cell, resources
