"""nbgrader preprocessors that close gaps measured in docs/STACK_NOTES.md ("nbgrader 0.9.6")."""

from __future__ import annotations

from nbgrader.preprocessors import NbGraderPreprocessor

import re

__all__ = ["DEMO_TAG", "RAISES_TAG", "SkipDemoCells", "FeedbackOutputs", "TagCellsThatMayStop", "is_demo_cell",
           "is_nbgrader_cell", "may_stop"]

#: Tag on a heavy demonstration cell (a sweep, a training curve). No exercise may depend on it.
DEMO_TAG = "demo"

#: Tag JupyterLab, the classic notebook, nbclient and nbval read as "an error here is expected: go on".
RAISES_TAG = "raises-exception"

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


_RUNS_AN_EXERCISE = re.compile(r"\bsolved\(")  # not solved_or(: it falls back to the course's version


def may_stop(cell) -> bool:
    """A cell that raises while the learner's exercise is not written (or not right) yet: a grade cell, a
    solution cell (a stub at the top level raises ``NotImplementedError``), or a cell that runs an exercise
    through ``helpers.checks.solved`` (which says "`name` is not written yet")."""
    if cell.get("cell_type") != "code":
        return False
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return bool(meta.get("grade") or meta.get("solution") or _RUNS_AN_EXERCISE.search(cell.get("source", "")))


class TagCellsThatMayStop(NbGraderPreprocessor):
    """In the learner's notebook, tag every cell that may stop (:func:`may_stop`) ``raises-exception``.

    Run All in JupyterLab (and ``jupyter nbconvert --execute``) stops at the first error: a learner who
    runs a chapter with an exercise still blank would see nothing after its first check. With the tag, the
    check shows its message and the run goes on to the end. Only the released notebook is tagged: in
    ``solutions/`` every cell must pass, and nbval, which honours the tag too, would stop noticing.
    """

    def preprocess_cell(self, cell, resources, index):
        if may_stop(cell):
            tags = cell.setdefault("metadata", {}).setdefault("tags", [])
            if RAISES_TAG not in tags:
                tags.append(RAISES_TAG)
        return cell, resources


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


class FeedbackOutputs(NbGraderPreprocessor):
    """In feedback, each check's message alone, capped; no other output of any cell.

    Everything a kernel sends is under the learner's control: a learner's
    function called by a check can print that check's source (hidden tests
    included, encoded so no text search finds them), or keep it and print it
    from a later cell of their own. So the page keeps, for a grade cell, only
    ``ExceptionName: message`` of its error (the course's checks put what to
    fix into the message; see ``helpers.checks``), cut at
    ``c.GradingLimits.feedback_message_chars``; no traceback (its lines show
    hidden code), no printed or displayed output, and no output at all of the
    other cells (the learner has them in their own notebook).
    """

    def preprocess(self, nb, resources):
        from course_tools.grading.limits import GradingLimits

        self._cap = GradingLimits(config=self.config).feedback_message_chars
        return super().preprocess(nb, resources)

    def preprocess_cell(self, cell, resources, index):
        if cell.get("cell_type") != "code":
            return cell, resources
        is_grade = bool(cell.get("metadata", {}).get("nbgrader", {}).get("grade"))
        kept = []
        for output in cell.get("outputs", []) if is_grade else []:
            if output.get("output_type") == "error":
                message = _capped(f"{output.get('ename', 'Error')}: {output.get('evalue', '')}", self._cap)
                output["evalue"] = message.split(": ", 1)[1] if ": " in message else ""
                output["traceback"] = [message]
                kept.append(output)
        cell.outputs = kept[:1]
        return cell, resources


def _capped(text: str, cap: int) -> str:
    return text if cap <= 0 or len(text) <= cap else text[:cap] + " [... cut]"
