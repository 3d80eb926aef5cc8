"""The grading run of one notebook: the caps, a sandboxed kernel, and one fatal cell costing only its own points.

``LimitedExecute`` is nbgrader's ``Execute`` (nbconvert's ExecutePreprocessor) with:

- the memory cap and the sandbox on the kernel (``CappedKernelManager``);
- the output cap, applied while output arrives;
- a shorter time limit for grade cells (``c.GradingLimits.grade_cell_timeout``),
  so an answer that loops forever, called by every check, costs
  (grade cells) x (that limit), not (grade cells) x ``c.Execute.timeout``;
- recovery from a *fatal* cell: one that kills the kernel (``os._exit``, a
  signal, a segfault) or ignores the interrupt at its time limit. The run
  starts again with a fresh kernel from the first cell, that cell blanked and
  given an error output that names it and says why (so a grade cell scores 0
  and nothing else is lost), at most ``MAX_FATAL`` times.

The error outputs carry ``FATAL_ENAMES``; ``course_tools.grading.status`` reads them.
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbformat.v4 import new_output

from nbgrader.preprocessors import Execute

from course_tools.grading.limits import OUTPUT_CUT_MARK, CappedKernelManager, GradingLimits

__all__ = ["LimitedExecute", "FATAL_ENAMES", "KERNEL_DIED", "INTERRUPT_IGNORED"]

KERNEL_DIED = "KernelDiedInThisCell"
INTERRUPT_IGNORED = "InterruptIgnored"
FATAL_ENAMES = (KERNEL_DIED, INTERRUPT_IGNORED)
#: Fatal cells recovered from in one notebook before the rest is given up (each costs a kernel start and a replay).
MAX_FATAL = 20


class FatalCell(Exception):
    """A cell the kernel did not survive; ``index`` is its position, ``ename``/``why`` what to record."""

    def __init__(self, index: int, ename: str, why: str):
        super().__init__(why)
        self.index, self.ename, self.why = index, ename, why


def _size(msg) -> int:
    """Bytes an output message would add to the notebook (close enough to count a flood)."""
    content = msg.get("content", {})
    if msg.get("msg_type") == "stream":
        return len(content.get("text", ""))
    return len(json.dumps(content.get("data", content), default=str))


def is_grade_cell(cell) -> bool:
    return bool(cell.get("metadata", {}).get("nbgrader", {}).get("grade")) and cell.get("cell_type") == "code"


class LimitedExecute(Execute):
    """nbgrader's ``Execute`` with the caps of ``GradingLimits``, the sandbox, and fatal-cell recovery.

    Error outputs are always kept (shortened if huge): they are the evidence of
    what happened to the cell.
    """

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("kernel_manager_class", CappedKernelManager)
        super().__init__(*args, **kwargs)
        self.limits = GradingLimits(config=self.config)
        self._emitted: dict[int, int] = {}
        self._fatal: dict[int, FatalCell] = {}
        self.shutdown_kernel = "immediate"  # nothing to save in a grading kernel; a hung one must not wait

    def create_kernel_manager(self):
        km = super().create_kernel_manager()
        if isinstance(km, CappedKernelManager):
            km.memory_mb = self.limits.memory_mb
            if self.limits.sandbox:
                km.course_root = str(Path(self.config.get("CourseDirectory", {}).get("root") or os.getcwd()))
                km.use_sandbox()
        return km

    # --- time limits ------------------------------------------------------------------------
    def _get_timeout(self, cell):
        timeout = super()._get_timeout(cell)
        if cell is not None and is_grade_cell(cell) and self.limits.grade_cell_timeout > 0:
            timeout = min(timeout or self.limits.grade_cell_timeout, self.limits.grade_cell_timeout)
        return timeout

    # --- fatal cells ------------------------------------------------------------------------
    def preprocess(self, nb, resources=None, km=None):
        """Run the notebook; after a fatal cell, run it again from the start with that cell blanked."""
        original = copy.deepcopy(nb)
        self._fatal = {}
        while True:
            self._emitted = {}  # counts are per run: cell indices repeat across notebooks and runs
            work = copy.deepcopy(original)
            try:
                result = super().preprocess(work, resources, km=km)
            except FatalCell as fatal:
                self.log.warning("cell %d: %s; grading again without it", fatal.index + 1, fatal.why)
                self._fatal[fatal.index] = fatal
                if len(self._fatal) >= MAX_FATAL:
                    raise RuntimeError(f"{MAX_FATAL} cells killed the kernel or ignored the interrupt; gave up") from fatal
                continue
            nb.cells[:] = result[0].cells
            nb.metadata = result[0].metadata
            return nb, result[1]

    def preprocess_cell(self, cell, resources, index):
        fatal = self._fatal.get(index)
        if fatal is not None:
            cell.outputs = [new_output("error", ename=fatal.ename, evalue=fatal.why,
                                       traceback=[f"{fatal.ename}: {fatal.why}"])]
            return cell, resources
        try:
            return super().preprocess_cell(cell, resources, index)
        except DeadKernelError:
            self.shutdown_kernel = "immediate"
            raise FatalCell(index, KERNEL_DIED, "the kernel died while this cell ran (os._exit, a signal or a "
                                                "crash); this cell was skipped and the rest graded") from None
        except CellTimeoutError as err:
            if "IOPub" not in str(err):
                raise
            self.shutdown_kernel = "immediate"
            raise FatalCell(index, INTERRUPT_IGNORED, f"this cell ran past its {self._get_timeout(cell)} s limit "
                                                      "and ignored the interrupt; it was skipped and the rest "
                                                      "graded") from None

    # --- output cap ---------------------------------------------------------------------------
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
            # Not a stream output: nbgrader's LimitOutput runs after this and drops every stream
            # output past its first 1000 lines, so after a flood of short lines a stream note
            # vanished and nobody learned that output was cut. It keeps other outputs.
            note = new_output(
                "display_data",
                data={"text/plain": f"{OUTPUT_CUT_MARK}: this cell printed more than {self.limits.output_kb} KiB;"
                                    " the rest is not kept]"},
            )
            outs.append(note)
            return note
        return None
