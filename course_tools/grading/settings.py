"""The caps on one submission while it is graded, so one learner cannot stall or break a class.

Ground of the grading package: the engine enforces these settings, the class level reports them.

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
time per notebook      ``c.GradingLimits.notebook_timeout`` (s)     ``course_tools.grading.class_level.grade``: kills the
                                                                    whole autograde process tree; a timed-out
                                                                    submission is graded once more, alone
memory                 ``c.GradingLimits.memory_mb``, for the       ``RLIMIT_DATA`` in each process (an
                       whole submission: the kernel and every       allocation past it raises MemoryError),
                       process it starts (DataLoader workers, DDP   and ``watchdog.CellWatch`` over their
                       ranks) together; while a check runs, its     sum: past it the cell is stopped
                       worker and every process it starts
output per cell        ``c.GradingLimits.output_kb``                ``LimitedExecute``: output past it is
                                                                    dropped while it arrives, never stored
scratch space          ``c.GradingLimits.scratch_mb``: the          ``sandbox.bwrap_command`` (``--size``
                       sandbox's ``/tmp`` and ``/dev/shm`` (each    tmpfs: ENOSPC past it) and
                       a tmpfs of this size, in memory), and the    ``RLIMIT_FSIZE`` on the kernel and the
                       largest file learner code may write          verdict worker (EFBIG past it)
                       anywhere (its working folder is on disk)
definitions a grade    ``c.GradingLimits.export_mb``: what the      ``apart.GradeCellsApart``: the grader
cell reads             kernel hands the grader for one grade cell   reads at most this much, from a regular
                                                                    file only; past it that cell scores 0
sandbox                ``c.GradingLimits.sandbox``                  ``CappedKernelManager`` (bubblewrap)
=====================  ===========================================  ==================================

Why CPU time and not wall-clock time: a grading machine is shared, and its load is nobody's answer
(``course_tools.grading.engine.watchdog`` says what was measured).

Why ``RLIMIT_DATA`` and not ``RLIMIT_AS``: the address-space limit also counts
shared libraries and the huge reservations a CUDA context makes, so a cap low
enough to stop a memory bomb would stop ``import torch`` on a GPU machine;
the data limit counts what a program actually allocates (heap, anonymous
maps). It caps host memory only, never GPU memory (Linux only; elsewhere no
memory cap is applied and ``memory_cap_supported()`` says so). One process's limit
would let a submission start eight DataLoader workers and use eight times the cap,
so the watch also adds up the memory of every process of the submission
(proportional set size, so pages forked children share count once) and stops the
cell past ``memory_mb``.

Why ``/tmp`` is a tmpfs and the working folder is not: the grader reads the definitions a grade cell needs from
a file the kernel writes in its working folder, and talks to it over Unix sockets in the scratch folder, so those
must be folders of the host, which a tmpfs inside the sandbox's own mount namespace is not; ``RLIMIT_FSIZE``
(per file) holds them instead, and a tmpfs's size holds ``/tmp`` as a whole. A tmpfs lives in memory and is not
counted by ``memory_mb``: a submission may use ``memory_mb`` plus, in each of its two sandboxes (the kernel's
and the verdict worker's), ``scratch_mb`` in ``/tmp`` and in ``/dev/shm``.

Why the output cap is applied while output arrives: nbgrader's own
``LimitOutput`` trims a cell after it ran, by which time a flood has already
been held in the grader's memory.
"""

from __future__ import annotations

from traitlets import Bool, Float, Integer
from traitlets.config import Configurable

__all__ = ["GradingLimits"]


class GradingLimits(Configurable):
    """The caps an instructor sets in ``nbgrader_config.py`` (``c.GradingLimits.*``)."""

    notebook_timeout = Integer(
        900, help="Seconds one submission may take in all (every notebook, kernel start included)."
    ).tag(config=True)
    memory_mb = Integer(4096, help="Memory one submission may use, in MiB (0: no cap): each process's allocations, "
                                    "and every process of the submission together.").tag(config=True)
    output_kb = Integer(256, help="Output one cell may produce, in KiB; the rest is dropped (0: no cap).").tag(
        config=True
    )
    scratch_mb = Integer(
        512, help="Scratch space of learner code, in MiB (0: no cap): the sandbox's /tmp and /dev/shm are each a "
                  "tmpfs of this size (in memory; writing past it fails with ENOSPC), and no file it writes anywhere, "
                  "its working folder included, may grow past it (RLIMIT_FSIZE: EFBIG)."
    ).tag(config=True)
    export_mb = Integer(
        256, min=1, help="The most the grader reads back of the definitions a learner's kernel hands over for one grade "
                  "cell, in MiB (course_tools/grading/engine/apart.py); past it that grade cell scores 0 and the "
                  "rest is graded."
    ).tag(config=True)
    cell_cpu = Float(
        60, help="CPU seconds one cell may use, in its kernel and every process it starts (course_tools/grading/"
                 "watchdog.py: CPU time, which a busy machine hardly changes, not wall-clock time)."
    ).tag(config=True)
    grade_cell_cpu = Float(
        20, help="CPU seconds one grade cell may use before the reference solution's cost on this machine is "
                 "consulted (course_tools/grading/engine/reference.py): bounds a looping answer called by every check."
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
                   "(course_tools/grading/engine/apart_worker.py); False runs checks in the learner's kernel, where the "
                   "learner's code can change what they do."
    ).tag(config=True)
    sandbox = Bool(
        True, help="Run the learner's kernel in the bubblewrap sandbox (course_tools/grading/engine/sandbox.py); grading "
                   "stops with a message where none is available. False only where every submission is trusted."
    ).tag(config=True)
    feedback_message_chars = Integer(
        300, help="Characters of a check's message shown in feedback (the rest is cut)."
    ).tag(config=True)
