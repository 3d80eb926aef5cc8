"""The output cap, applied while output arrives: past ``c.GradingLimits.output_kb`` per cell, nothing is kept.

nbgrader's own ``LimitOutput`` trims a cell after it ran, by which time a flood has already been held in the
grader's memory; this cap drops it as it comes.
"""

from __future__ import annotations

import json

from nbformat.v4 import new_output

from course_tools.grading.outcome_words import OUTPUT_CUT_MARK

__all__ = ["OutputCap", "cut_note"]


def _size(msg) -> int:
    """Bytes an output message would add to the notebook (close enough to count a flood)."""
    content = msg.get("content", {})
    if msg.get("msg_type") == "stream":
        return len(content.get("text", ""))
    return len(json.dumps(content.get("data", content), default=str))


def cut_note(kb: int):
    """The output that stands for what was cut. Not a stream output: nbgrader's LimitOutput runs after the
    engine and drops every stream output past its first 1000 lines, so after a flood of short lines a stream
    note vanished and nobody learned that output was cut. It keeps other outputs."""
    return new_output("display_data",
                      data={"text/plain": f"{OUTPUT_CUT_MARK}: this cell printed more than {kb} KiB; the rest is not kept]"})


class OutputCap:
    """Mixin for nbclient's ``output``: count each cell's output bytes; past the cap keep what fits, say so once.

    Needs ``self.limits`` (``GradingLimits``); sets ``self.cut_cells`` (indices of cells whose output was cut).
    Error outputs are always kept (shortened if huge): they are the evidence of what happened to the cell.
    """

    def start_counting(self) -> None:
        """Counts are per run: cell indices repeat across notebooks and runs."""
        self._emitted: dict[int, int] = {}
        self.cut_cells: set[int] = set()

    def output(self, outs, msg, display_id, cell_index):
        cap = self.limits.output_kb * 1024
        if cap <= 0:
            return super().output(outs, msg, display_id, cell_index)
        if msg.get("msg_type") == "error":
            content = msg["content"]
            content["evalue"] = content.get("evalue", "")[:cap]
            content["traceback"] = [line[:cap] for line in content.get("traceback", [])[:200]]
            return super().output(outs, msg, display_id, cell_index)
        used = self._emitted.get(cell_index, 0)
        size = _size(msg)
        self._emitted[cell_index] = used + size
        if used + size <= cap:
            return super().output(outs, msg, display_id, cell_index)
        if used <= cap:  # first output past the cap: keep what fits, say so, once
            if msg.get("msg_type") == "stream" and used < cap:
                msg["content"]["text"] = msg["content"]["text"][: cap - used]
                super().output(outs, msg, display_id, cell_index)
            self.cut_cells.add(cell_index)
            note = cut_note(self.limits.output_kb)
            outs.append(note)
            return note
        return None
