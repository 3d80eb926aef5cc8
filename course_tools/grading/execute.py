"""The grading run of one notebook: the caps, a sandboxed kernel, and one fatal cell costing only its own points.

``LimitedExecute`` is nbgrader's ``Execute`` (nbconvert's ExecutePreprocessor) with:

- the memory cap and the sandbox on the kernel (``CappedKernelManager``);
- the output cap, applied while output arrives;
- limits in CPU time, which a busy machine cannot turn against a correct answer
  (``watchdog.CellWatch``): ``c.GradingLimits.cell_cpu`` per cell, and
  ``grade_cell_cpu`` per grade cell, so an answer that loops forever, called by
  every check, costs (grade cells) x (that budget); a cell that stalls (almost
  no CPU for ``stall`` seconds) is interrupted too. A grade cell that spends its
  budget is compared with the reference solution on this machine
  (``reference.reference_costs``): where the reference needs more, the notebook
  is graded again with ``cpu_factor`` times the reference's cost; otherwise its
  message says what the answer used against what the reference uses;
- grade cells decided apart (``verdict.py``): the kernel hands over only the definitions a grade cell
  reads; a worker the learner's cells never ran in runs the cell and reports, so what those cells
  changed in their own process cannot turn a wrong answer into points;
- recovery from a *fatal* cell: one that kills the kernel (``os._exit``, a
  signal, a segfault) or ignores the interrupt at its time limit. The run
  starts again with a fresh kernel from the first cell, that cell blanked and
  given an error output that names it and says why (so a grade cell scores 0
  and nothing else is lost), at most ``MAX_FATAL`` times.

The error outputs carry ``FATAL_ENAMES``; ``course_tools.grading.status`` reads them.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
from pathlib import Path

from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbformat.v4 import new_code_cell, new_output

from nbgrader.preprocessors import Execute

from course_tools.grading.limits import OUTPUT_CUT_MARK, CappedKernelManager, GradingLimits
from course_tools.grading.verdict import VerdictWorker, WorkerGone, export_code, free_names, supported
from course_tools.grading.watchdog import CellWatch, Stop

__all__ = ["LimitedExecute", "FATAL_ENAMES", "KERNEL_DIED", "INTERRUPT_IGNORED"]

KERNEL_DIED = "KernelDiedInThisCell"
#: the ename of a grade cell whose check found the grader's surface replaced (verdict.Guard)
TAMPERED = "GraderReplaced"
INTERRUPT_IGNORED = "InterruptIgnored"
FATAL_ENAMES = (KERNEL_DIED, INTERRUPT_IGNORED)
#: Fatal cells recovered from in one notebook before the rest is given up (each costs a kernel start and a replay).
MAX_FATAL = 20


#: the words of a stall's message (status.py reads them: a stall may be the machine's load, so it is graded again)
STALLED = "stopped making progress"
#: the ename of a cell stopped at its limit (nbclient's own name for a cell past its time, which status reads)
TIMED_OUT = "CellTimeoutError"


class GradeAgain(Exception):
    """A grade cell's budget proved too small for this machine's reference solution: grade the notebook again."""


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


def _grade_id(cell) -> str:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", "")


def _where(config, resources: dict) -> dict:
    """The course root, assignment and notebook being graded (nbgrader's resources), for the reference."""
    found = dict(resources.get("nbgrader", {}))
    found["root"] = config.get("CourseDirectory", {}).get("root") or os.getcwd()
    return found


def is_grade_cell(cell) -> bool:
    return bool(cell.get("metadata", {}).get("nbgrader", {}).get("grade")) and cell.get("cell_type") == "code"


class LimitedExecute(Execute):
    """nbgrader's ``Execute`` with the caps of ``GradingLimits``, the sandbox, and fatal-cell recovery.

    Error outputs are always kept (shortened if huge): they are the evidence of
    what happened to the cell.
    """

    def __init__(self, *args, calibrating: bool = False, **kwargs):
        kwargs.setdefault("kernel_manager_class", CappedKernelManager)
        super().__init__(*args, **kwargs)
        self.limits = GradingLimits(config=self.config)
        self.calibrating = calibrating  # measuring the reference (reference.py): no CPU budget, costs recorded
        self.grade_cell_cpu: dict[str, float] = {}  # grade_id -> CPU seconds its last run used
        self._emitted: dict[int, int] = {}
        self._fatal: dict[int, FatalCell] = {}
        self._budget: dict[str, float] = {}  # grade_id -> a CPU budget raised for this machine's reference
        self._reference: dict[str, float] | None = None
        self._where: dict = {}
        self._worker: VerdictWorker | None = None
        self._said: set[str] = set()
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
    def _cpu_budget(self, cell) -> float | None:
        if self.calibrating:
            return None
        if is_grade_cell(cell):
            return self._budget.get(_grade_id(cell), self.limits.grade_cell_cpu)
        return self.limits.cell_cpu

    def _kernel_pid(self) -> int | None:
        provisioner = getattr(self.km, "provisioner", None)
        process = getattr(provisioner, "process", None)
        return getattr(process, "pid", None)

    def _reference_cpu(self, grade_id: str) -> float | None:
        """What the reference solution's run of this grade cell costs on this machine (None: not known)."""
        if self._reference is None:
            from course_tools.grading.reference import reference_costs

            where = self._where
            try:
                self._reference = reference_costs(Path(where["root"]), where["assignment"], where["notebook"])
            except (KeyError, OSError, ValueError) as err:
                self.log.warning("no reference cost for this notebook: %s", err)
                self._reference = {}
        return self._reference.get(grade_id)

    def _stopped(self, cell, stop: Stop) -> str:
        """The message of a cell stopped at its limit; or GradeAgain where the budget was this machine's fault."""
        if stop.reason == "stall":
            return (f"this cell {STALLED}: it used {stop.cpu_s:.1f} s of CPU in {stop.wall_s:.0f} s "
                    f"(a sleep, a deadlock, or a wait for input?), so it was interrupted")
        budget = self._cpu_budget(cell)
        text = f"this cell ran past its limit of {budget:g} s of CPU time (it used {stop.cpu_s:.1f} s in " \
               f"{stop.wall_s:.0f} s): a loop that never ends, or far more work than the task needs"
        if not is_grade_cell(cell):
            return text
        gid = _grade_id(cell)
        reference = self._reference_cpu(gid)
        if reference is None:
            return text
        if self.limits.cpu_factor * reference > budget:
            self._budget[gid] = self.limits.cpu_factor * reference
            raise GradeAgain(gid)
        return f"{text}; the reference solution uses {reference:.1f} s of CPU for this check on this machine"

    def _mark_stopped(self, cell, stop: Stop) -> None:
        message = self._stopped(cell, stop)
        kept = [o for o in cell.outputs if o.get("output_type") != "error"]
        cell.outputs = [*kept, _error(TIMED_OUT, message)]

    # --- fatal cells ------------------------------------------------------------------------
    def preprocess(self, nb, resources=None, km=None):
        """Run the notebook; after a fatal cell, run it again from the start with that cell blanked (after a
        budget raised for this machine, run it again as it is)."""
        original = copy.deepcopy(nb)
        self._fatal = {}
        self._where = _where(self.config, resources or {})
        while True:
            self._emitted = {}  # counts are per run: cell indices repeat across notebooks and runs
            work = copy.deepcopy(original)
            try:
                if self.limits.verdict_apart and supported() and any(is_grade_cell(c) for c in work.cells):
                    self._verdict_worker(wait=False)  # its imports overlap the kernel's start
                result = super().preprocess(work, resources, km=km)
            except GradeAgain as again:
                self.log.warning("`%s` needs more CPU on this machine than its budget; grading again", again)
                continue
            except FatalCell as fatal:
                self.log.warning("cell %d: %s; grading again without it", fatal.index + 1, fatal.why)
                self._fatal[fatal.index] = fatal
                if len(self._fatal) >= MAX_FATAL:
                    raise RuntimeError(f"{MAX_FATAL} cells killed the kernel or ignored the interrupt; gave up") from fatal
                continue
            finally:
                self._close_worker()  # a fresh worker for each run, as the kernel is fresh
            nb.cells[:] = result[0].cells
            nb.metadata = result[0].metadata
            return nb, result[1]

    def preprocess_cell(self, cell, resources, index):
        fatal = self._fatal.get(index)
        if fatal is not None:
            cell.outputs = [_error(fatal.ename, fatal.why)]
            return cell, resources
        if is_grade_cell(cell) and self.limits.verdict_apart:
            if supported():
                return self._judge_apart(cell, resources, index)
            self._say_once("grade cells run in the learner's kernel here (no os.fork on this system), where the "
                           "learner's code can change what checks do: grade on Linux or macOS to prevent that")
        return self._in_kernel(cell, resources, index)

    # --- grade cells, decided apart (verdict.py) ---------------------------------------------------------
    def _say_once(self, text: str) -> None:
        if text not in self._said:
            self._said.add(text)
            self.log.warning(text)

    def _close_worker(self) -> None:
        if self._worker is not None:
            self._worker.close()
            self._worker = None

    def _verdict_worker(self, wait: bool = True) -> VerdictWorker:
        if self._worker is None or not self._worker.alive():
            self._close_worker()
            root = str(Path(self.config.get("CourseDirectory", {}).get("root") or os.getcwd()))
            self._worker = VerdictWorker(sandbox=self.limits.sandbox, course_root=root,
                                         memory_mb=self.limits.memory_mb).launch()
        return self._worker.wait_ready() if wait else self._worker

    def _export(self, cell, resources, index) -> tuple[bytes | None, list]:
        """The definitions the grade cell reads, from the learner's kernel; or the error outputs of trying."""
        import tempfile

        names = free_names(cell.source)
        scratch = getattr(self.km, "scratch", "")  # the sandbox: the kernel's work folder, the same path inside
        folder = Path(scratch) / "work" if scratch else Path(tempfile.gettempdir())
        path = folder / f".grader-export-{os.getpid()}-{index}-{os.urandom(4).hex()}.pkl"
        asking = new_code_cell(export_code(str(path), names))
        try:
            asked, _ = self._in_kernel(asking, resources, index)
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

    def _judge_apart(self, cell, resources, index):
        """Run a grade cell in the verdict worker on the definitions the learner's kernel hands over."""
        blob, errors = self._export(cell, resources, index)
        if blob is None:
            cell.outputs = errors
            return cell, resources
        try:
            worker = self._verdict_worker()
        except WorkerGone as err:
            raise RuntimeError(str(err)) from None
        cap = self.limits.output_kb * 1024 if self.limits.output_kb > 0 else 1 << 30
        watch = CellWatch(worker.pid, self._cpu_budget(cell), self.limits.stall, self.limits.interrupt_grace,
                          on_stop=worker.stop_leftovers)
        with watch:
            report = worker.judge(cell.source, blob, cap)
        self.grade_cell_cpu[_grade_id(cell)] = round(watch.cpu_s, 3)
        cell.outputs = _outputs(report, worker, cap)
        if report is None:
            self._close_worker()
        if watch.stop is not None:
            self._mark_stopped(cell, watch.stop)
        return cell, resources

    # --- every other cell, in the learner's kernel ------------------------------------------------------
    def _in_kernel(self, cell, resources, index):
        pid = self._kernel_pid()
        watch = CellWatch(pid, self._cpu_budget(cell), self.limits.stall, self.limits.interrupt_grace) if (
            pid is not None and cell.get("cell_type") == "code") else None
        try:
            with watch or contextlib.nullcontext():
                result = super().preprocess_cell(cell, resources, index)
        except DeadKernelError:
            self.shutdown_kernel = "immediate"
            if watch is not None and watch.stop is not None:
                raise FatalCell(index, INTERRUPT_IGNORED, f"{self._stopped(cell, watch.stop)}; it ignored the "
                                                          "interrupt, so it was skipped and the rest graded") from None
            raise FatalCell(index, KERNEL_DIED, "the kernel died while this cell ran (os._exit, a signal or a "
                                                "crash); this cell was skipped and the rest graded") from None
        except CellTimeoutError as err:
            if "IOPub" not in str(err):
                raise
            self.shutdown_kernel = "immediate"
            raise FatalCell(index, INTERRUPT_IGNORED, f"this cell ran past its {self._get_timeout(cell)} s limit "
                                                      "and ignored the interrupt; it was skipped and the rest "
                                                      "graded") from None
        if watch is not None and is_grade_cell(cell):
            self.grade_cell_cpu[_grade_id(cell)] = round(watch.cpu_s, 3)
        if watch is not None and watch.stop is not None:
            self._mark_stopped(result[0], watch.stop)
        return result

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


def _error(ename: str, why: str) -> dict:
    return new_output("error", ename=ename, evalue=why, traceback=[f"{ename}: {why}"])


def _outputs(report: dict | None, worker: VerdictWorker, cap: int) -> list:
    """A grade cell's outputs from the worker's report: what it printed, and its error if it failed."""
    if report is None:
        return [_error(KERNEL_DIED, "the process running this check died (your code stopped it, or a crash) "
                                    f"before it finished; this check scores 0 and the rest was graded. "
                                    f"{worker.log_tail(200)}".strip())]
    outputs = [new_output("stream", name=name, text=report[name]) for name in ("stdout", "stderr") if report[name]]
    if report.get("cut"):
        outputs.append(new_output("display_data", data={"text/plain": f"{OUTPUT_CUT_MARK}: this cell printed more "
                                                                      f"than {cap // 1024} KiB; the rest is not kept]"}))
    result = report.get("result")
    if result is None:
        how = f"signal {report['signal']}" if report.get("signal") else f"exit code {report.get('exit')}"
        outputs.append(_error(KERNEL_DIED, f"the process running this check ended ({how}) before the check "
                                           "finished (os._exit, sys.exit, a signal or a crash); this check scores 0 "
                                           "and the rest was graded"))
    elif result.get("tampered"):
        replaced = ", ".join(result["tampered"][:6]) + (" ..." if len(result["tampered"]) > 6 else "")
        outputs.append(_error(TAMPERED, f"while this check ran, your code replaced or reached into part of the grader "
                                        f"({replaced}); this check scores 0. A check judges what your functions "
                                        "return and do: leave the course's checks, their frames and records, torch "
                                        "and Python's own modules as they are"))
    elif result.get("error"):
        err = result["error"]
        outputs.append(new_output("error", ename=err["ename"], evalue=err["evalue"][:cap],
                                  traceback=[line[:cap] for line in err["traceback"]]))
    return outputs


def measure_reference(root: Path, assignment: str, notebook: str) -> dict[str, float]:
    """{grade_id: CPU seconds} of the reference solution, run as grading runs it (demonstrations skipped, the
    same kernel, sandbox and caps; no CPU budget), from a scratch copy of its folder's files."""
    import shutil
    import tempfile

    import nbformat

    from course_tools.grading.course import Course
    from course_tools.grading.preprocessors import SKIPPED_SOURCE, is_demo_cell

    course = Course(root)
    folder = course.source_dir / assignment
    nb = nbformat.read(str(folder / f"{notebook}.ipynb"), as_version=4)
    for cell in nb.cells:
        if is_demo_cell(cell):
            cell.source, cell.outputs = SKIPPED_SOURCE, []
    with tempfile.TemporaryDirectory(prefix="reference-") as work:
        for item in folder.iterdir():
            if item.is_file() and item.suffix != ".ipynb":
                shutil.copy2(item, Path(work) / item.name)
        ex = LimitedExecute(config=course.config, calibrating=True)
        ex.preprocess(nb, {"metadata": {"path": work}})
    return ex.grade_cell_cpu


if __name__ == "__main__":  # what course_tools.grading.reference runs, in a process of its own
    import sys

    print(json.dumps(measure_reference(Path(sys.argv[1]), sys.argv[2], sys.argv[3])))
