"""The words grading shares: what the engine writes into a graded cell's outputs, and the kinds of stop.

The engine (``engine/``) writes the error names and notes below into the graded notebook, where a learner's
feedback shows them, and records each cell's kind of stop in the run record (``run_record.py``); the class level
(``class_level/status.py``) reads the record, never these words back out of outputs.
"""

from __future__ import annotations

__all__ = ["KERNEL_DIED", "TAMPERED", "INTERRUPT_IGNORED", "TIMED_OUT", "STALLED", "OUTPUT_CUT_MARK",
           "MEMORY_CAPPED", "MEMORY_TEXTS", "STOPS", "is_memory_error"]

#: the ename of a cell that killed its kernel (or the process running its check)
KERNEL_DIED = "KernelDiedInThisCell"
#: the ename of a grade cell whose check found the grader's surface replaced (the referee's guard)
TAMPERED = "GraderReplaced"
#: the ename of a cell that ignored the interrupt at its limit: skipped, the rest graded
INTERRUPT_IGNORED = "InterruptIgnored"
#: the ename of a cell stopped at a limit (nbclient's own name for a cell past its time)
TIMED_OUT = "CellTimeoutError"
#: the ename of a cell whose processes together passed the submission's memory cap
MEMORY_CAPPED = "MemoryCapReached"
#: the words of a stall's message (a stall may be the machine's load, so the class level grades it again)
STALLED = "stopped making progress"
#: start of the note that replaces output past the cap
OUTPUT_CUT_MARK = "[grading: output cut"
#: how an operating system words an allocation the memory cap refused
MEMORY_TEXTS = ("can't allocate memory", "cannot allocate memory", "not enough memory")

#: The kinds of stop a run record gives a cell (``run_record.CellRun.stop``); "" is a cell that ran to its end,
#: with or without an error of the learner's own.
STOPS = {
    "": "ran to its end",
    "cpu": "spent its CPU budget and was interrupted",
    "stall": "used almost no CPU for the stall limit and was interrupted",
    "wall": "ran past c.Execute.timeout and was interrupted",
    "interrupt_ignored": "ignored the interrupt at its limit: skipped, the rest graded",
    "kernel_died": "killed its kernel or the process running its check: skipped, the rest graded",
    "memory": "hit the memory cap",
    "tampered": "replaced or reached into the grader while its check ran: scored 0",
}


def is_memory_error(ename: str, evalue: str) -> bool:
    """An error output that is the memory cap refusing an allocation (``RLIMIT_DATA``)."""
    return ename in ("MemoryError", MEMORY_CAPPED) or any(text in evalue.lower() for text in MEMORY_TEXTS)
