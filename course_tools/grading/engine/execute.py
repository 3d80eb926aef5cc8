"""The grading run of one notebook: the caps, a sandboxed kernel, and one fatal cell costing only its own points.

``LimitedExecute`` is nbgrader's ``Execute`` (nbconvert's ExecutePreprocessor), put together from one mixin per
concern, each in its own module:

- ``kernel.CappedKernelManager``: the per-process memory cap and the sandbox on the kernel;
- ``output_cap.OutputCap``: the output cap, applied while output arrives;
- ``budgets.CpuBudgets``: limits in CPU time per cell, held by ``watchdog.CellWatch`` (with the submission's
  memory as a whole), and a grade cell's budget raised where this machine's reference solution needs more;
- ``apart.GradeCellsApart``: grade cells decided in a worker the learner's code never ran in;
- here, recovery from a *fatal* cell: one that kills the kernel (``os._exit``, a signal, a segfault) or ignores
  the interrupt at its time limit. The run starts again with a fresh kernel from the first cell, that cell
  blanked and given an error output that names it and says why (so a grade cell scores 0 and nothing else is
  lost), at most ``MAX_FATAL`` times;
- and the run record (``course_tools.grading.run_record``): what happened to each cell, written as data for the
  class level, beside the words the learner reads in the cell's outputs (``outcome_words``).

nbgrader builds this class: ``nbgrader_config.py`` puts it in place of ``Execute`` in
``c.Autograde.autograde_preprocessors``, so ``nbgrader autograde`` (which the class level's ``grade`` starts, one
process per submission) runs every notebook through it. ``calibrate.py`` runs it too, on the reference solution.
"""

from __future__ import annotations

import contextlib
import copy
import os
from pathlib import Path

from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbgrader.preprocessors import Execute

from course_tools.grading.course import Course
from course_tools.grading.engine.apart import GradeCellsApart
from course_tools.grading.engine.apart_worker import supported
from course_tools.grading.engine.budgets import CpuBudgets, GradeAgain, error_output, grade_id, is_grade_cell
from course_tools.grading.engine.kernel import CappedKernelManager
from course_tools.grading.engine.output_cap import OutputCap
from course_tools.grading.engine.watchdog import CellWatch
from course_tools.grading.outcome_words import INTERRUPT_IGNORED, KERNEL_DIED, MEMORY_CAPPED, is_memory_error
from course_tools.grading.run_record import CellRun, RunRecord, write_record
from course_tools.grading.settings import GradingLimits

__all__ = ["LimitedExecute", "MAX_FATAL"]

#: Fatal cells recovered from in one notebook before the rest is given up (each costs a kernel start and a replay).
MAX_FATAL = 20


class FatalCell(Exception):
    """A cell the kernel did not survive; ``index`` is its position, ``ename``/``why`` what to record, ``stop`` its
    kind of stop in the run record."""

    def __init__(self, index: int, ename: str, why: str, stop: str):
        super().__init__(why)
        self.index, self.ename, self.why, self.stop = index, ename, why, stop


def _where(config, resources: dict) -> dict:
    """The course root, assignment, notebook and student being graded (nbgrader's resources)."""
    found = dict(resources.get("nbgrader", {}))
    found["root"] = config.get("CourseDirectory", {}).get("root") or os.getcwd()
    return found


def cell_name(cell, index: int) -> str:
    """How a status table names a cell: its grade id, or its position."""
    gid = grade_id(cell)
    return f"`{gid}`" if gid else f"cell {index + 1}"


class LimitedExecute(GradeCellsApart, CpuBudgets, OutputCap, Execute):
    """nbgrader's ``Execute`` with the caps of ``GradingLimits``, the sandbox, fatal-cell recovery and a run record."""

    def __init__(self, *args, calibrating: bool = False, **kwargs):
        kwargs.setdefault("kernel_manager_class", CappedKernelManager)
        super().__init__(*args, **kwargs)
        self.limits = GradingLimits(config=self.config)
        self.calibrating = calibrating  # measuring the reference (calibrate.py): no CPU budget, costs recorded
        self.course_root = str(Path(self.config.get("CourseDirectory", {}).get("root") or os.getcwd()))
        self.grade_cell_cpu: dict[str, float] = {}  # grade_id -> CPU seconds its last run used
        self.raised_budgets: dict[str, float] = {}  # grade_id -> a CPU budget raised for this machine's reference
        self._fatal: dict[int, FatalCell] = {}
        self._reference: dict[str, float] | None = None
        self.where: dict = {}
        self._said: set[str] = set()
        self._current = -1
        self.start_counting()
        self._start_record()
        self.shutdown_kernel = "immediate"  # nothing to save in a grading kernel; a hung one must not wait

    def create_kernel_manager(self):
        km = super().create_kernel_manager()
        if isinstance(km, CappedKernelManager):
            km.memory_mb = self.limits.memory_mb
            km.scratch_mb = self.limits.scratch_mb
            if self.limits.sandbox:
                km.course_root = self.course_root
                km.use_sandbox()
        return km

    def kernel_pid(self) -> int | None:
        provisioner = getattr(self.km, "provisioner", None)
        process = getattr(provisioner, "process", None)
        return getattr(process, "pid", None)

    # --- the run, started over after a fatal cell ----------------------------------------------------
    def preprocess(self, nb, resources=None, km=None):
        """Run the notebook; after a fatal cell, run it again from the start with that cell blanked (after a
        budget raised for this machine, run it again as it is). Write the run record either way."""
        original = copy.deepcopy(nb)
        self._fatal = {}
        self.where = _where(self.config, resources or {})
        restarts = 0
        try:
            while True:
                self.start_counting()
                self._start_record()
                work = copy.deepcopy(original)
                try:
                    if self.limits.verdict_apart and supported() and any(is_grade_cell(c) for c in work.cells):
                        self.verdict_worker(wait=False)  # its imports overlap the kernel's start
                    result = super().preprocess(work, resources, km=km)
                except GradeAgain as again:
                    self.log.warning("`%s` needs more CPU on this machine than its budget; grading again", again)
                    restarts += 1
                    continue
                except FatalCell as fatal:
                    self.log.warning("cell %d: %s; grading again without it", fatal.index + 1, fatal.why)
                    self._fatal[fatal.index] = fatal
                    restarts += 1
                    if len(self._fatal) >= MAX_FATAL:
                        raise RuntimeError(f"{MAX_FATAL} cells killed the kernel or ignored the interrupt; "
                                           "gave up") from fatal
                    continue
                finally:
                    self.close_worker()  # a fresh worker for each run, as the kernel is fresh
                nb.cells[:] = result[0].cells
                nb.metadata = result[0].metadata
                self._finished = True
                return nb, result[1]
        finally:
            self._write_record(restarts)

    def preprocess_cell(self, cell, resources, index):
        fatal = self._fatal.get(index)
        if fatal is not None:
            cell.outputs = [error_output(fatal.ename, fatal.why)]
            self.stops[index] = fatal.stop
            self._record_cell(cell, index)
            return cell, resources
        if is_grade_cell(cell) and self.limits.verdict_apart:
            if supported():
                result = self.judge_apart(cell, resources, index)
                self._record_cell(result[0], index)
                return result
            self._say_once("grade cells run in the learner's kernel here (no os.fork on this system), where the "
                           "learner's code can change what checks do: grade on Linux or macOS to prevent that")
        result = self.in_kernel(cell, resources, index)
        self._record_cell(result[0], index)
        return result

    def _say_once(self, text: str) -> None:
        if text not in self._said:
            self._said.add(text)
            self.log.warning(text)

    # --- a cell in the learner's kernel ---------------------------------------------------------------
    def in_kernel(self, cell, resources, index):
        pid = self.kernel_pid()
        watch = CellWatch(pid, self.cpu_budget(cell), self.limits.stall, self.limits.interrupt_grace,
                          memory_mb=self.limits.memory_mb) if (pid is not None and cell.get("cell_type") == "code") else None
        self._current = index
        try:
            with watch or contextlib.nullcontext():
                result = super().preprocess_cell(cell, resources, index)
        except DeadKernelError:
            self.shutdown_kernel = "immediate"
            if watch is not None and watch.stop is not None and watch.stop.reason == "memory":
                raise FatalCell(index, MEMORY_CAPPED, f"{self.stop_message(cell, watch.stop)}; the kernel did not "
                                                      "survive, so this cell was skipped and the rest graded",
                                "memory") from None
            if watch is not None and watch.stop is not None:
                raise FatalCell(index, INTERRUPT_IGNORED, f"{self.stop_message(cell, watch.stop)}; it ignored the "
                                                          "interrupt, so it was skipped and the rest graded",
                                "interrupt_ignored") from None
            raise FatalCell(index, KERNEL_DIED, "the kernel died while this cell ran (os._exit, a signal or a "
                                                "crash); this cell was skipped and the rest graded", "kernel_died") from None
        except CellTimeoutError as err:
            if "IOPub" not in str(err):
                raise
            self.shutdown_kernel = "immediate"
            raise FatalCell(index, INTERRUPT_IGNORED, f"this cell ran past its {self._get_timeout(cell)} s limit "
                                                      "and ignored the interrupt; it was skipped and the rest "
                                                      "graded", "interrupt_ignored") from None
        if watch is not None:
            self.cell_cpu[index] = round(watch.cpu_s, 3)
            if watch.stop is not None:
                self.mark_stopped(result[0], index, watch.stop)
        return result

    async def _async_handle_timeout(self, timeout, cell=None):
        """nbclient's wall-clock limit (``c.Execute.timeout``) reached: record it, then let nbclient interrupt."""
        self.stops.setdefault(self._current, "wall")
        return await super()._async_handle_timeout(timeout, cell)

    # --- the run record -----------------------------------------------------------------------------
    def _start_record(self) -> None:
        self.stops: dict[int, str] = {}  # index -> kind of stop (outcome_words.STOPS)
        self.cell_cpu: dict[int, float] = {}  # index -> CPU seconds
        self._cells: dict[int, CellRun] = {}
        self._finished = False

    def _record_cell(self, cell, index: int) -> None:
        if cell.get("cell_type") != "code":
            return
        errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        ename, evalue = (errors[-1].get("ename", ""), str(errors[-1].get("evalue", ""))[:300]) if errors else ("", "")
        stop = self.stops.get(index, "")
        if not stop and errors and is_memory_error(ename, evalue):
            stop = "memory"
        gid = grade_id(cell)
        if gid and index in self.cell_cpu and is_grade_cell(cell):
            self.grade_cell_cpu[gid] = self.cell_cpu[index]
        self._cells[index] = CellRun(index, cell_name(cell, index), gid, stop, ename, evalue,
                                     self.cell_cpu.get(index), index in self.cut_cells)

    def _write_record(self, restarts: int) -> None:
        """The record of this notebook's last run, where grading knows whose it is (not while calibrating)."""
        where = self.where
        if self.calibrating or not all(where.get(k) for k in ("student", "assignment", "notebook")):
            return
        try:
            path = Course(Path(where["root"])).run_record_path(where["student"], where["assignment"], where["notebook"])
            record = RunRecord(where["notebook"], [self._cells[i] for i in sorted(self._cells)], restarts,
                               self._finished)
            write_record(path, record)
        except (OSError, ValueError) as err:  # no record: the class level says the run left none
            self.log.error("could not write the run record: %s", err)
