"""CPU budgets per cell, and what a cell stopped at its limit is told.

``c.GradingLimits.cell_cpu`` per cell and ``grade_cell_cpu`` per grade cell, in CPU time, which a busy machine
hardly changes (``watchdog.py``). A grade cell that spends its budget is compared with the reference solution on
this machine (``reference.reference_costs``): where the reference needs more, the notebook is graded again with
``cpu_factor`` times the reference's cost (``GradeAgain``); otherwise its message says what the answer used
against what the reference uses.
"""

from __future__ import annotations

from pathlib import Path

from nbformat.v4 import new_output

from course_tools.grading.engine.reference import reference_costs
from course_tools.grading.engine.watchdog import Stop
from course_tools.grading.outcome_words import MEMORY_CAPPED, STALLED, TIMED_OUT

__all__ = ["CpuBudgets", "GradeAgain", "error_output", "grade_id", "is_grade_cell"]


class GradeAgain(Exception):
    """A grade cell's budget proved too small for this machine's reference solution: grade the notebook again."""


def error_output(ename: str, why: str) -> dict:
    return new_output("error", ename=ename, evalue=why, traceback=[f"{ename}: {why}"])


def grade_id(cell) -> str:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", "")


def is_grade_cell(cell) -> bool:
    return bool(cell.get("metadata", {}).get("nbgrader", {}).get("grade")) and cell.get("cell_type") == "code"


class CpuBudgets:
    """Mixin: each cell's CPU budget, and the message (or ``GradeAgain``) of a cell the watch stopped.

    Needs ``self.limits``, ``self.calibrating`` and ``self.where`` (the course root, assignment and notebook);
    keeps ``self.raised_budgets`` across runs of one notebook.
    """

    def cpu_budget(self, cell) -> float | None:
        if self.calibrating:
            return None
        if is_grade_cell(cell):
            return self.raised_budgets.get(grade_id(cell), self.limits.grade_cell_cpu)
        return self.limits.cell_cpu

    def _reference_cpu(self, gid: str) -> float | None:
        """What the reference solution's run of this grade cell costs on this machine (None: not known)."""
        if self._reference is None:
            where = self.where
            try:
                self._reference = reference_costs(Path(where["root"]), where["assignment"], where["notebook"])
            except (KeyError, OSError, ValueError) as err:
                self.log.warning("no reference cost for this notebook: %s", err)
                self._reference = {}
        return self._reference.get(gid)

    def stop_message(self, cell, stop: Stop) -> str:
        """The message of a cell stopped at its limit; or GradeAgain where the budget was this machine's fault."""
        if stop.reason == "stall":
            return (f"this cell {STALLED}: it used {stop.cpu_s:.1f} s of CPU in {stop.wall_s:.0f} s "
                    f"(a sleep, a deadlock, or a wait for input?), so it was interrupted")
        if stop.reason == "memory":
            return (f"this cell's processes together used {stop.memory_mb:.0f} MiB, past the submission's memory "
                    f"cap of {self.limits.memory_mb} MiB (c.GradingLimits.memory_mb: the kernel and every process "
                    "it starts, DataLoader workers and DDP ranks included, counted together), so it was stopped: "
                    "use fewer or smaller worker processes, or less data at once")
        budget = self.cpu_budget(cell)
        text = f"this cell ran past its limit of {budget:g} s of CPU time (it used {stop.cpu_s:.1f} s in " \
               f"{stop.wall_s:.0f} s): a loop that never ends, or far more work than the task needs"
        if not is_grade_cell(cell):
            return text
        gid = grade_id(cell)
        reference = self._reference_cpu(gid)
        if reference is None:
            return text
        if self.limits.cpu_factor * reference > budget:
            self.raised_budgets[gid] = self.limits.cpu_factor * reference
            raise GradeAgain(gid)
        return f"{text}; the reference solution uses {reference:.1f} s of CPU for this check on this machine"

    def mark_stopped(self, cell, index: int, stop: Stop) -> None:
        """Replace the cell's error with the stop's, and record the kind of stop."""
        message = self.stop_message(cell, stop)
        kept = [o for o in cell.outputs if o.get("output_type") != "error"]
        ename = MEMORY_CAPPED if stop.reason == "memory" else TIMED_OUT
        cell.outputs = [*kept, error_output(ename, message)]
        self.stops[index] = stop.reason
