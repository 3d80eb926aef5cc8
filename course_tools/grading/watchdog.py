"""Time limits a busy machine cannot turn against a correct answer: CPU time, not wall-clock time.

A grading machine is shared: a class graded two at a time, a CI job, the instructor's browser. Wall-clock
limits then charge the learner for everybody else's work (measured: chapter 06's reference solution lost
5 of 8 points at load 1.5, all 8 at load 4-8, under a 15 s wall limit per check). The CPU time a cell's
code uses, in the kernel and in every process it starts (DataLoader workers, DDP ranks), hardly changes
with the load, while an answer that loops forever uses CPU without end. So a cell is stopped when:

- **its CPU budget is spent** (it computes without end), or
- **it stalls**: it has used almost no CPU for ``stall`` seconds of wall-clock time (a sleep, a deadlock,
  a wait for input; on a machine this busy a working answer still gets a share of a core).

Stopping is an interrupt (SIGINT, as nbclient and JupyterLab send); an answer that swallows it is killed
``grace`` seconds later, with every process it started. :class:`CellWatch` only observes and signals:
:mod:`course_tools.grading.execute` decides what the cell's outcome says.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from dataclasses import dataclass

import psutil

__all__ = ["CellWatch", "Stop", "family", "tree_cpu_seconds"]

#: How often the watch reads the process tree's CPU time (s): a budget is overrun by at most about this.
POLL_S = 0.2
#: A cell "stalls" while its processes use less than this fraction of one core.
STALL_SHARE = 0.02


def family(pid: int) -> list[psutil.Process]:
    """Process ``pid`` and every process below it (empty when it is gone)."""
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.Error:
        return []


def tree_cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system) used by process ``pid`` and all its descendants, the ended ones included.

    A process that ended and was waited for by its parent counts in the parent's ``children_*`` times, so a
    DDP rank that did its work and exited is still counted; a live process counts in its own times.
    """
    total = 0.0
    for proc in family(pid):
        try:
            t = proc.cpu_times()
        except psutil.Error:
            continue
        total += t.user + t.system + getattr(t, "children_user", 0.0) + getattr(t, "children_system", 0.0)
    return total


@dataclass
class Stop:
    """Why the watch stopped a cell, with what it had used by then."""

    reason: str  #: "cpu" (the budget is spent) or "stall" (almost no CPU for ``stall`` seconds)
    cpu_s: float
    wall_s: float
    killed: bool = False  #: the interrupt was ignored, so every process of the kernel was killed


class CellWatch:
    """Watch one cell's processes from a thread; interrupt (then kill) them past their budget.

    ``pid`` is the kernel's process as launched (under the sandbox, bubblewrap around the kernel): every
    process below it is the learner's. ``cpu_budget`` None means no CPU limit (a calibration run).
    ``on_stop``, where given, is called instead of the interrupt: a verdict worker's cell runs in a
    disposable process (``verdict.py``), which is simply killed.
    """

    def __init__(self, pid: int, cpu_budget: float | None, stall: float, grace: float, on_stop=None):
        self.pid, self.cpu_budget, self.stall, self.grace = pid, cpu_budget, stall, grace
        self.on_stop = on_stop
        self.stop: Stop | None = None
        self.cpu_s = self.wall_s = 0.0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cell-watch", daemon=True)

    def __enter__(self) -> "CellWatch":
        self._start_cpu, self._start = tree_cpu_seconds(self.pid), time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        self._thread.join()
        self._measure()

    def _measure(self) -> None:
        # CPU time only grows: a process that ended and was not waited for by one of the tree drops out of it
        self.cpu_s = max(self.cpu_s, tree_cpu_seconds(self.pid) - self._start_cpu)
        self.wall_s = time.monotonic() - self._start

    def _run(self) -> None:
        window = [(0.0, 0.0)]  # (wall, cpu) samples; the first is the newest one at least ``stall`` seconds old
        while not self._done.wait(POLL_S):
            self._measure()
            window.append((self.wall_s, self.cpu_s))
            while len(window) > 1 and window[1][0] <= self.wall_s - self.stall:
                window.pop(0)
            if self.cpu_budget is not None and self.cpu_s > self.cpu_budget:
                return self._interrupt("cpu")
            first = window[0]
            if self.wall_s - first[0] >= self.stall and self.cpu_s - first[1] < STALL_SHARE * self.stall:
                return self._interrupt("stall")

    def _interrupt(self, reason: str) -> None:
        self.stop = Stop(reason, self.cpu_s, self.wall_s)
        if self.on_stop is not None:
            self.stop.killed = True
            return self.on_stop()
        self._signal(signal.SIGINT)
        if not self._done.wait(self.grace):
            self.stop.killed = True
            self._signal(signal.SIGKILL, everyone=True)

    def _signal(self, signum: int, everyone: bool = False) -> None:
        """SIGINT to the kernel (the learner's code turns it into KeyboardInterrupt there); SIGKILL to all."""
        tree = family(self.pid)
        kernels = [p for p in tree if _is_kernel(p)] or tree[:1]
        for proc in tree if everyone else kernels:
            try:
                os.kill(proc.pid, signum)
            except (ProcessLookupError, PermissionError):
                pass


def _is_kernel(proc: psutil.Process) -> bool:
    """The kernel's own Python process (not bubblewrap, whose command line names ipykernel too)."""
    try:
        return proc.name() != "bwrap" and any("ipykernel" in part for part in proc.cmdline())
    except psutil.Error:
        return False
