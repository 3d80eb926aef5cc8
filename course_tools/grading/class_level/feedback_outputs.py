"""Feedback shows a check's message alone, capped: nothing a learner's code printed, no hidden test."""

from __future__ import annotations

from nbgrader.preprocessors import NbGraderPreprocessor

from course_tools.grading.settings import GradingLimits

__all__ = ["FeedbackOutputs"]


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
