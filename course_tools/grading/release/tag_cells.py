"""Release-time tagging: every cell of a learner's notebook that may stop Run All is tagged so the run goes on."""

from __future__ import annotations

import re

from nbgrader.preprocessors import NbGraderPreprocessor

__all__ = ["RAISES_TAG", "TagCellsThatMayStop", "may_stop"]

#: Tag JupyterLab, the classic notebook, nbclient and nbval read as "an error here is expected: go on".
RAISES_TAG = "raises-exception"

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
