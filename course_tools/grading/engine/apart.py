"""Grade cells decided apart: the kernel hands over only the definitions a grade cell reads; a worker the
learner's cells never ran in (``apart_worker.py``) runs the cell and reports, so what those cells changed in
their own process cannot turn a wrong answer into points.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from nbformat.v4 import new_code_cell, new_output

from course_tools.grading.engine.apart_worker import VerdictWorker, WorkerGone, export_code, free_names
from course_tools.grading.engine.budgets import error_output
from course_tools.grading.engine.output_cap import cut_note
from course_tools.grading.engine.watchdog import CellWatch
from course_tools.grading.outcome_words import KERNEL_DIED, TAMPERED

__all__ = ["GradeCellsApart"]


class GradeCellsApart:
    """Mixin: run a grade cell in the worker, on what the learner's kernel exports.

    Needs ``self.limits``, ``self.course_root``, ``self.in_kernel`` (run a cell in the learner's kernel),
    ``self.cpu_budget``, ``self.mark_stopped``; fills ``self.cell_cpu``,
    ``self.stops`` and ``self.cut_cells`` for the run record.
    """

    _worker: VerdictWorker | None = None

    def close_worker(self) -> None:
        if self._worker is not None:
            self._worker.close()
            self._worker = None

    def verdict_worker(self, wait: bool = True) -> VerdictWorker:
        if self._worker is None or not self._worker.alive():
            self.close_worker()
            self._worker = VerdictWorker(sandbox=self.limits.sandbox, course_root=self.course_root,
                                         memory_mb=self.limits.memory_mb).launch()
        return self._worker.wait_ready() if wait else self._worker

    def _export(self, cell, resources, index) -> tuple[bytes | None, list]:
        """The definitions the grade cell reads, from the learner's kernel; or the error outputs of trying."""
        names = free_names(cell.source)
        scratch = getattr(self.km, "scratch", "")  # the sandbox: the kernel's work folder, the same path inside
        folder = Path(scratch) / "work" if scratch else Path(tempfile.gettempdir())
        path = folder / f".grader-export-{os.getpid()}-{index}-{os.urandom(4).hex()}.pkl"
        asking = new_code_cell(export_code(str(path), names))
        try:
            asked, _ = self.in_kernel(asking, resources, index)
        finally:
            self.nb.cells[index] = cell  # nbclient puts the cell it ran in the notebook: the grade cell stays
        try:
            errors = [o for o in asked.outputs if o.get("output_type") == "error"]
            if errors:
                return None, errors
            try:
                return path.read_bytes(), []
            except OSError as err:
                why = f"the grader could not read your definitions back from the kernel ({err})"
                return None, [new_output("error", ename="RuntimeError", evalue=why, traceback=[why])]
        finally:
            path.unlink(missing_ok=True)

    def judge_apart(self, cell, resources, index):
        """Run a grade cell in the verdict worker on the definitions the learner's kernel hands over."""
        blob, errors = self._export(cell, resources, index)
        if blob is None:
            cell.outputs = errors
            return cell, resources
        try:
            worker = self.verdict_worker()
        except WorkerGone as err:
            raise RuntimeError(str(err)) from None
        cap = self.limits.output_kb * 1024 if self.limits.output_kb > 0 else 1 << 30
        watch = CellWatch(worker.pid, self.cpu_budget(cell), self.limits.stall, self.limits.interrupt_grace,
                          on_stop=worker.stop_leftovers, memory_mb=self.limits.memory_mb)
        with watch:
            report = worker.judge(cell.source, blob, cap)
        self.cell_cpu[index] = round(watch.cpu_s, 3)
        cell.outputs = self._outputs(report, worker, cap, index)
        if report is None:
            self.close_worker()
        if watch.stop is not None:
            self.mark_stopped(cell, index, watch.stop)
        return cell, resources

    def _outputs(self, report: dict | None, worker: VerdictWorker, cap: int, index: int) -> list:
        """A grade cell's outputs from the worker's report: what it printed, and its error if it failed."""
        if report is None:
            self.stops[index] = "kernel_died"
            return [error_output(KERNEL_DIED, "the process running this check died (your code stopped it, or a "
                                              "crash) before it finished; this check scores 0 and the rest was "
                                              f"graded. {worker.log_tail(200)}".strip())]
        outputs = [new_output("stream", name=name, text=report[name]) for name in ("stdout", "stderr") if report[name]]
        if report.get("cut"):
            self.cut_cells.add(index)
            outputs.append(cut_note(cap // 1024))
        result = report.get("result")
        if result is None:
            self.stops[index] = "kernel_died"
            how = f"signal {report['signal']}" if report.get("signal") else f"exit code {report.get('exit')}"
            outputs.append(error_output(KERNEL_DIED, f"the process running this check ended ({how}) before the "
                                                     "check finished (os._exit, sys.exit, a signal or a crash); this "
                                                     "check scores 0 and the rest was graded"))
        elif result.get("tampered"):
            self.stops[index] = "tampered"
            replaced = ", ".join(result["tampered"][:6]) + (" ..." if len(result["tampered"]) > 6 else "")
            outputs.append(error_output(TAMPERED, f"while this check ran, your code replaced or reached into part "
                                                  f"of the grader ({replaced}); this check scores 0. A check judges "
                                                  "what your functions return and do: leave the course's checks, "
                                                  "their frames and records, torch and Python's own modules as "
                                                  "they are"))
        elif result.get("error"):
            err = result["error"]
            outputs.append(new_output("error", ename=err["ename"], evalue=err["evalue"][:cap],
                                      traceback=[line[:cap] for line in err["traceback"]]))
        return outputs
