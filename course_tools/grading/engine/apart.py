"""Grade cells decided apart: the kernel hands over only the definitions a grade cell reads; a worker the
learner's cells never ran in (``apart_worker.py``) runs the cell and reports, so what those cells changed in
their own process cannot turn a wrong answer into points.

The kernel hands them over as a file in its working folder, which the learner's code can also write: the grader
reads it through one descriptor opened without following a link and without blocking (:func:`read_export`),
reads nothing but a regular file, and never more than ``c.GradingLimits.export_mb``. A file made huge (sparse, a
terabyte with ``os.truncate``), or swapped for a FIFO, a device or a link to another file, costs that grade cell
its points with a message saying why; the grader's memory and the rest of the notebook are untouched.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path

from nbformat.v4 import new_code_cell, new_output

from course_tools.grading.engine.apart_worker import VerdictWorker, WorkerGone, export_code, free_names
from course_tools.grading.engine.budgets import error_output
from course_tools.grading.engine.output_cap import cut_note
from course_tools.grading.engine.watchdog import CellWatch
from course_tools.grading.outcome_words import KERNEL_DIED, TAMPERED

__all__ = ["ExportRefused", "GradeCellsApart", "read_export"]


class ExportRefused(Exception):
    """The file the kernel left for the grader is not one the grader reads: why, for the learner."""


def read_export(folder: Path, name: str, limit: int) -> bytes:
    """``folder/name`` if it is a regular file of at most ``limit`` bytes; else ExportRefused (OSError if missing).

    Opened with O_NOFOLLOW (a link is refused, not followed to a file of the host), O_NONBLOCK (a FIFO cannot
    hold the grader) and the folder itself opened the same way, so a folder swapped for a link is refused too;
    the size is the descriptor's, and at most ``limit + 1`` bytes are read, so a file still growing is refused.
    """
    nofollow = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        dfd = os.open(folder, nofollow | os.O_DIRECTORY)
    except OSError as err:
        if err.errno in (errno.ELOOP, errno.ENOTDIR):
            raise ExportRefused(f"the folder it was written in was replaced ({os.strerror(err.errno)})") from None
        raise
    try:
        try:
            fd = os.open(name, nofollow, dir_fd=dfd)
        except OSError as err:
            if err.errno == errno.ELOOP:
                raise ExportRefused("it was replaced by a symbolic link") from None
            raise
    finally:
        os.close(dfd)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ExportRefused("it was replaced by something that is not a regular file (a FIFO, a device or a "
                                "socket)")
        if info.st_size > limit:
            raise ExportRefused(f"it is {_mib(info.st_size)}, more than the {_mib(limit)} the grader reads")
        parts, got = [], 0
        while got <= limit:
            chunk = os.read(fd, min(limit + 1 - got, 1 << 20))
            if not chunk:
                break
            parts.append(chunk)
            got += len(chunk)
        if got > limit:
            raise ExportRefused(f"it grew past the {_mib(limit)} the grader reads while it was read")
        return b"".join(parts)
    finally:
        os.close(fd)


def _mib(size: int) -> str:
    return f"{size / 2**20:,.1f} MiB" if size < 2**30 else f"{size / 2**30:,.1f} GiB"


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
                                         memory_mb=self.limits.memory_mb, scratch_mb=self.limits.scratch_mb).launch()
        return self._worker.wait_ready() if wait else self._worker

    def _export(self, cell, resources, index) -> tuple[bytes | None, list]:
        """The definitions the grade cell reads, from the learner's kernel; or the error outputs of trying."""
        names = free_names(cell.source)
        scratch = getattr(self.km, "scratch", "")  # the sandbox: the kernel's work folder, the same path inside
        # resolved where the grader chose it (macOS's /tmp is a link), never after the kernel could change it
        folder = Path(scratch) / "work" if scratch else Path(tempfile.gettempdir()).resolve()
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
                return read_export(folder, path.name, self.limits.export_mb * 2**20), []
            except ExportRefused as refused:
                why = (f"the grader did not read back the definitions this check uses from your kernel: {refused} "
                       f"(c.GradingLimits.export_mb is {self.limits.export_mb} MiB, and only the regular file the "
                       "grader asked for is read); this check scores 0 and the rest was graded. Keep what a check "
                       "uses to functions, classes and small data, and leave the grader's files in your working "
                       "folder alone")
            except OSError as err:
                why = f"the grader could not read your definitions back from the kernel ({err})"
            return None, [new_output("error", ename="RuntimeError", evalue=why, traceback=[why])]
        finally:
            _remove(folder, path.name)

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


def _remove(folder: Path, name: str) -> None:
    """Remove ``folder/name`` without following a link in its folder's place; whatever it is, it is gone after."""
    try:
        dfd = os.open(folder, os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        os.unlink(name, dir_fd=dfd)
    except OSError:  # already gone, or a folder the learner made there: the scratch folder is deleted after the run
        pass
    finally:
        os.close(dfd)
