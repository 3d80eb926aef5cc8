"""Limits on one submission while it is graded, so one learner cannot stall or break a class.

The caps, all set in ``nbgrader_config.py``:

=====================  ===========================================  ==================================
cap                    setting                                      enforced by
=====================  ===========================================  ==================================
CPU time per cell      ``c.GradingLimits.cell_cpu`` (s);            ``LimitedExecute`` through
                       ``c.GradingLimits.grade_cell_cpu`` for a     ``watchdog.CellWatch``: interrupt,
                       grade cell, raised to ``cpu_factor`` x the   then kill; the kernel and every
                       reference's cost where that is more          process it starts
a cell that stalls     ``c.GradingLimits.stall`` (s with almost     ``watchdog.CellWatch``
                       no CPU)
wall time per cell     ``c.Execute.timeout`` (s): the outer limit   nbgrader: interrupts the kernel
time per notebook      ``c.GradingLimits.notebook_timeout`` (s)     ``course_tools.grading.grade``: kills the
                                                                    whole autograde process tree; a timed-out
                                                                    submission is graded once more, alone
memory of the kernel   ``c.GradingLimits.memory_mb``                ``RLIMIT_DATA`` in the kernel process:
                                                                    an allocation past it raises MemoryError
output per cell        ``c.GradingLimits.output_kb``                ``LimitedExecute``: output past it is
                                                                    dropped while it arrives, never stored
sandbox                ``c.GradingLimits.sandbox``                  ``CappedKernelManager`` (bubblewrap)
=====================  ===========================================  ==================================

Why CPU time and not wall-clock time: a grading machine is shared, and its load is nobody's answer
(``course_tools.grading.watchdog`` says what was measured).

Why ``RLIMIT_DATA`` and not ``RLIMIT_AS``: the address-space limit also counts
shared libraries and the huge reservations a CUDA context makes, so a cap low
enough to stop a memory bomb would stop ``import torch`` on a GPU machine;
the data limit counts what a program actually allocates (heap, anonymous
maps). It caps host memory only, never GPU memory (Linux only; elsewhere no
memory cap is applied and ``memory_cap_supported()`` says so).

Why the output cap is applied while output arrives: nbgrader's own
``LimitOutput`` trims a cell after it ran, by which time a flood has already
been held in the grader's memory.
"""

from __future__ import annotations

import subprocess
import sys

import os
import shutil
import tempfile
from pathlib import Path

from jupyter_client.manager import AsyncKernelManager
from traitlets import Bool, Float, Integer, Unicode
from traitlets.config import Configurable

__all__ = [
    "GradingLimits",
    "CappedKernelManager",
    "OUTPUT_CUT_MARK",
    "memory_cap_supported",
]

#: Start of the note that replaces output past the cap; ``course_tools.grading.status`` looks for it.
OUTPUT_CUT_MARK = "[grading: output cut"


class GradingLimits(Configurable):
    """The caps an instructor sets in ``nbgrader_config.py`` (``c.GradingLimits.*``)."""

    notebook_timeout = Integer(
        900, help="Seconds one submission may take in all (every notebook, kernel start included)."
    ).tag(config=True)
    memory_mb = Integer(4096, help="Memory one grading kernel may allocate, in MiB (0: no cap).").tag(config=True)
    output_kb = Integer(256, help="Output one cell may produce, in KiB; the rest is dropped (0: no cap).").tag(
        config=True
    )
    cell_cpu = Float(
        60, help="CPU seconds one cell may use, in its kernel and every process it starts (course_tools/grading/"
                 "watchdog.py: CPU time, which a busy machine hardly changes, not wall-clock time)."
    ).tag(config=True)
    grade_cell_cpu = Float(
        20, help="CPU seconds one grade cell may use before the reference solution's cost on this machine is "
                 "consulted (course_tools/grading/reference.py): bounds a looping answer called by every check."
    ).tag(config=True)
    cpu_factor = Float(
        3.0, help="A grade cell whose reference solution needs more than grade_cell_cpu here gets this many times "
                  "the reference's CPU time."
    ).tag(config=True)
    stall = Float(
        120, help="Seconds of wall-clock time in which a cell that uses almost no CPU (a sleep, a deadlock, a wait "
                 "for input) is interrupted; c.Execute.timeout stays the outer wall-clock limit."
    ).tag(config=True)
    interrupt_grace = Float(
        10, help="Seconds an interrupted cell has to stop before its kernel and every process under it are killed."
    ).tag(config=True)
    verdict_apart = Bool(
        True, help="Decide each grade cell in a process the learner's code never ran in "
                   "(course_tools/grading/verdict.py); False runs checks in the learner's kernel, where the "
                   "learner's code can change what they do."
    ).tag(config=True)
    sandbox = Bool(
        True, help="Run the learner's kernel in the bubblewrap sandbox (course_tools/grading/sandbox.py); grading "
                   "stops with a message where none is available. False only where every submission is trusted."
    ).tag(config=True)
    feedback_message_chars = Integer(
        300, help="Characters of a check's message shown in feedback (the rest is cut)."
    ).tag(config=True)


def memory_cap_supported() -> bool:
    """True where the kernel's memory can be capped (Linux: ``RLIMIT_DATA``)."""
    return sys.platform.startswith("linux")


def _cap_memory(limit_bytes: int) -> None:
    """Runs in the kernel process before it starts (``preexec_fn``)."""
    import resource

    resource.setrlimit(resource.RLIMIT_DATA, (limit_bytes, limit_bytes))


class CappedKernelManager(AsyncKernelManager):
    """A kernel manager whose kernels cannot allocate more than ``memory_mb`` and run in the sandbox.

    With ``sandboxed`` the kernel runs under bubblewrap (``course_tools.grading.sandbox``)
    in a scratch folder of its own, which also holds its connection file and
    sockets, and is deleted with the kernel.
    """

    memory_mb = Integer(0, help="Memory cap of the kernel in MiB (0: none).").tag(config=True)
    sandboxed = Bool(False, help="Run the kernel under bubblewrap.").tag(config=True)
    course_root = Unicode("", help="The course folder the sandbox must hide.").tag(config=True)
    scratch = Unicode("", help="The kernel's scratch folder (set when sandboxed).")

    def use_sandbox(self) -> None:
        """Give the kernel a scratch folder, with the connection over Unix sockets inside it."""
        self.sandboxed = True
        self.scratch = tempfile.mkdtemp(prefix="grading-kernel-")
        self.transport = "ipc"
        self.ip = os.path.join(self.scratch, "kernel")
        self.connection_file = os.path.join(self.scratch, "kernel.json")

    async def _async_launch_kernel(self, kernel_cmd, **kw):
        if self.memory_mb > 0 and memory_cap_supported():
            limit = self.memory_mb * 2**20
            kw["preexec_fn"] = lambda: _cap_memory(limit)
        if self.sandboxed:
            from course_tools.grading.sandbox import bwrap_command

            scratch = Path(self.scratch)
            _copy_folder(Path(kw.get("cwd") or os.getcwd()), scratch / "work")
            kernel_cmd = bwrap_command(list(kernel_cmd), scratch, Path(self.course_root or os.getcwd()),
                                       dict(kw.get("env") or {}))
            kw["env"] = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
            kw["cwd"] = str(scratch)
            if hasattr(sys.stderr, "fileno") and _isatty(sys.stderr):  # no terminal inside (TIOCSTI)
                kw["stdout"] = kw["stderr"] = subprocess.DEVNULL
        return await super()._async_launch_kernel(kernel_cmd, **kw)

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        await super()._async_cleanup_resources(restart=restart)
        if self.scratch and not restart:
            shutil.rmtree(self.scratch, ignore_errors=True)

    cleanup_resources = _async_cleanup_resources


def _isatty(stream) -> bool:
    try:
        return os.isatty(stream.fileno())
    except (OSError, ValueError):
        return False


def _copy_folder(src: Path, dest: Path, max_bytes: int = 64 * 2**20) -> None:
    """The learner's own files (the submission folder, as nbgrader copied it) into the scratch folder."""
    dest.mkdir(parents=True, exist_ok=True)
    if not src.is_dir():
        return
    for item in src.iterdir():
        if item.is_file() and not item.is_symlink() and item.stat().st_size <= max_bytes:
            shutil.copy2(item, dest / item.name)
