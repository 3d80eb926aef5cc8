"""Time limits a busy machine cannot turn against a correct answer: CPU time, not wall-clock time.

A grading machine is shared: a class graded two at a time, a CI job, the instructor's browser. Wall-clock
limits then charge the learner for everybody else's work (measured: chapter 06's reference solution lost
5 of 8 points at load 1.5, all 8 at load 4-8, under a 15 s wall limit per check). The CPU time a cell's
code uses, in the kernel and in every process it starts (DataLoader workers, DDP ranks), hardly changes
with the load, while an answer that loops forever uses CPU without end. So a cell is stopped when:

- **its CPU budget is spent** (it computes without end), or
- **it stalls**: it has used almost no CPU for ``stall`` seconds of wall-clock time (a sleep, a deadlock,
  a wait for input; on a machine this busy a working answer still gets a share of a core).

The same watch holds the submission's memory as a whole: past ``memory_mb``, summed over the processes of the
running cell's tree, once there is more than one (the kernel and every process it started; while a grade cell runs, the grade-cell worker and
every process the check's calls start), the cell is stopped too. The kernel's own ``RLIMIT_DATA`` (``kernel.py``)
holds one process only: eight DataLoader workers would each get the whole cap. The idle kernel is not counted
while a grade cell runs: what earlier cells left in it, its own cap already bounded, and counting it would charge
every later check for one cell's memory.

Stopping is an interrupt (SIGINT, as nbclient and JupyterLab send); an answer that swallows it is killed
``grace`` seconds later, with every process it started. A memory stop kills the processes the kernel started
at once (their memory is what grows) and interrupts the kernel. :class:`CellWatch` only observes and signals:
:mod:`course_tools.grading.engine.execute` decides what the cell's outcome says.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from dataclasses import dataclass

import psutil

__all__ = ["CellWatch", "Stop", "family", "learner_processes", "tree_cpu_seconds", "tree_memory_bytes"]

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


def _pss_bytes(proc: psutil.Process) -> int:
    """Proportional set size: a page shared by n processes counts 1/n in each (Linux); elsewhere the RSS."""
    try:
        with open(f"/proc/{proc.pid}/smaps_rollup", "rb") as fh:
            for line in fh:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return proc.memory_info().rss


def learner_processes(pid: int) -> list[psutil.Process]:
    """Process ``pid`` and every process below it, without the sandbox's own ``bwrap`` processes."""
    found = []
    for proc in family(pid):
        try:
            if proc.name() != "bwrap":
                found.append(proc)
        except psutil.Error:
            continue
    return found


def tree_memory_bytes(procs: list[psutil.Process], over: int = 0) -> int:
    """Memory of ``procs`` together.

    The resident set sizes are summed first (cheap: a few microseconds a process); only where that sum passes
    ``over`` are the proportional set sizes read (milliseconds each), so pages forked children share with their
    parent (torch's, a dataset's) count once, not once per child. The result is at most the true use.
    """
    total = 0
    for proc in procs:
        try:
            total += proc.memory_info().rss
        except psutil.Error:
            continue
    if not over or total <= over:
        return total
    pss = 0
    for proc in procs:
        try:
            pss += _pss_bytes(proc)
        except psutil.Error:
            continue
    return pss


@dataclass
class Stop:
    """Why the watch stopped a cell, with what it had used by then."""

    reason: str  #: "cpu" (the budget is spent), "stall" (almost no CPU for ``stall`` seconds), or "memory"
    cpu_s: float
    wall_s: float
    killed: bool = False  #: the interrupt was ignored, so every process of the kernel was killed
    memory_mb: float = 0.0  #: with "memory": what the submission's processes used together


class CellWatch:
    """Watch one cell's processes from a thread; interrupt (then kill) them past their budget.

    ``pid`` is the kernel's process as launched (under the sandbox, bubblewrap around the kernel): every
    process below it is the learner's. ``cpu_budget`` None means no CPU limit (a calibration run).
    ``on_stop``, where given, is called instead of the interrupt: a grade cell runs in a disposable worker
    process (``apart_worker.py``), which is simply killed. ``memory_mb`` (0: none) caps the memory of ``pid``
    and every process below it, together.
    """

    def __init__(self, pid: int, cpu_budget: float | None, stall: float, grace: float, on_stop=None,
                 memory_mb: int = 0):
        self.pid, self.cpu_budget, self.stall, self.grace = pid, cpu_budget, stall, grace
        self.on_stop = on_stop
        self.memory_cap = memory_mb * 2**20
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
            if self.memory_cap:
                procs = learner_processes(self.pid)
                # one process alone is held by its own RLIMIT_DATA (kernel.py), which counts what it allocated
                # and not the libraries it maps; the sum is for what one process's limit cannot see
                if len(procs) > 1:
                    used = tree_memory_bytes(procs, over=self.memory_cap)
                    if used > self.memory_cap:
                        return self._interrupt("memory", memory_mb=used / 2**20)
            first = window[0]
            if self.wall_s - first[0] >= self.stall and self.cpu_s - first[1] < STALL_SHARE * self.stall:
                return self._interrupt("stall")

    def _interrupt(self, reason: str, memory_mb: float = 0.0) -> None:
        self.stop = Stop(reason, self.cpu_s, self.wall_s, memory_mb=memory_mb)
        if self.on_stop is not None:
            self.stop.killed = True
            return self.on_stop()
        if reason == "memory":
            self._signal(signal.SIGKILL, children=True)
        self._signal(signal.SIGINT)
        if not self._done.wait(self.grace):
            self.stop.killed = True
            self._signal(signal.SIGKILL, everyone=True)

    def _signal(self, signum: int, everyone: bool = False, children: bool = False) -> None:
        """SIGINT to the kernel (the learner's code turns it into KeyboardInterrupt there); SIGKILL to all, or to
        every process below the kernel (``children``)."""
        tree = family(self.pid)
        kernels = [p for p in tree if _is_kernel(p)] or tree[:1]
        if children:
            below = {c.pid for k in kernels for c in _children(k)}
            targets = [p for p in tree if p.pid in below]
        else:
            targets = tree if everyone else kernels
        for proc in targets:
            try:
                os.kill(proc.pid, signum)
            except (ProcessLookupError, PermissionError):
                pass


def _children(proc: psutil.Process) -> list[psutil.Process]:
    try:
        return proc.children(recursive=True)
    except psutil.Error:
        return []


def _is_kernel(proc: psutil.Process) -> bool:
    """The kernel's own Python process (not bubblewrap, whose command line names ipykernel too)."""
    try:
        return proc.name() != "bwrap" and any("ipykernel" in part for part in proc.cmdline())
    except psutil.Error:
        return False
