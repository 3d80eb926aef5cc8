"""What happened to one submission, decided from evidence only, never guessed.

Every submission ends with exactly one status. When several apply, the first
in this table wins; ``detail`` lists all the evidence found. The evidence is
data: the engine's run record of each notebook (``run_record.py``: each cell's
kind of stop, ``outcome_words.STOPS``), the gradebook, and nbgrader's exit code;
nbgrader's log is read only for a run that failed outside the engine.

==========  ===================================================================  ==========
status      evidence that sets it                                                score
==========  ===================================================================  ==========
unknown     the assignment is not in the gradebook or ``solutions/``, or the     none
            student is not on the gradebook's roster (nbgrader is not run)
unreadable  a notebook of the submission is missing, is not JSON, is not a    none
            valid notebook (``nbformat.read`` fails), or has no nbgrader cell
            at all (nbgrader is not run)
crashed     nbgrader exited non-zero for any reason but a timeout (its log       none, or the
            says which), or the run record has a cell that killed the kernel    score when the
            (``kernel_died``: skipped, the rest graded) or hit the memory cap    run finished
            (``memory``: one process's allocation, or the submission's
            processes together)
timed out   the whole-submission cap killed the run (``notebook_timeout``), or  none, or the
            the run record has a cell stopped at a limit: its CPU budget         score when the
            (``cpu``), a stall (``stall``), ``c.Execute.timeout`` (``wall``),     run finished
            or one that ignored the interrupt (``interrupt_ignored``: skipped,
            the rest graded)
tampered    a locked cell is missing from the submission or lost its nbgrader   the score of
            metadata, or its source differs from the released one *and* from    the restored
            the checksum it was released with. nbgrader put the original back   tests
            and graded it. (A changed ``points`` is not evidence: nbgrader logs
            the same for an instructor's change, and puts the points back.)
wrong       the run finished and the gradebook's score is below the maximum     the score
graded      the run finished and the score is the maximum                        the score
==========  ===================================================================  ==========

A score is only ever taken from the gradebook after a run that finished (exit
code 0): a run that crashed or was killed has no score, never a plain 0, and
``grade`` removes any older score of it from the gradebook.

Three statuses are not outcomes of grading but appear in tables and the CSV:
``missing`` (on the roster, nothing submitted), ``not graded`` (submitted,
not graded yet) and ``refused`` (nothing collected, but collect refused an
inbound folder in this student's name: a symlink, another user's file, a
future timestamp; ``course_tools/grading/class_level/collect.py``). A refusal beside a
collected submission is listed in that row's detail.

Why "differs from the checksum it was released with" for ``tampered``: a cell
that still matches the checksum stored in its own metadata is the version the
learner was given; it differs from the current source only because the
instructor fixed the test after release, which must not flag the whole class.
nbgrader's own "checksum has changed" warning is no evidence here: it fires
for every untouched test cell that has hidden tests.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

from nbgrader import utils as nbutils

from course_tools.grading.hidden import released_source
from course_tools.grading.run_record import CellRun, RunRecord

__all__ = [
    "STATUSES",
    "Evidence",
    "Outcome",
    "classify",
    "tamper_findings",
    "record_findings",
]

#: Statuses of a grading run, most severe first (the first that applies wins).
STATUSES = ("unknown", "unreadable", "crashed", "timed out", "tampered", "wrong", "graded")
MISSING = "missing"
NOT_GRADED = "not graded"
REFUSED = "refused"
REFUSED_NOTE = "refused at collect"
REDATED_NOTE = "re-dated at collect"


@dataclass
class Evidence:
    """What a grading run left behind for one (student, assignment)."""

    unknown: list[str] = field(default_factory=list)  # why the course does not know it
    unreadable: list[str] = field(default_factory=list)  # notebook -> parse error
    exit_code: int | None = None  # nbgrader's; None when it was not run
    killed_after: float | None = None  # seconds, when the whole-submission cap killed it
    log: str = ""  # nbgrader's output
    cells: list[CellRun] = field(default_factory=list)  # the engine's run records, every notebook's cells
    no_record: list[str] = field(default_factory=list)  # notebooks whose run left no record
    tampered: list[str] = field(default_factory=list)
    score: float | None = None
    max_score: float | None = None
    cell_timeout: float | None = None  #: the wall-clock limit per cell (c.Execute.timeout)
    cell_cpu: float | None = None  #: CPU seconds per cell (c.GradingLimits.cell_cpu)
    grade_cell_cpu: float | None = None  #: CPU seconds per grade cell before the reference is consulted
    memory_mb: int | None = None
    notes: list[str] = field(default_factory=list)  # said in the detail, change no status


@dataclass
class Outcome:
    """One row of the grades table."""

    student: str
    assignment: str
    status: str
    score: float | None
    max_score: float | None
    detail: str
    #: stopped by a limit that a loaded machine could have caused (the whole-submission wall-clock cap, or a
    #: cell that stalled): ``grade`` grades it again, alone. Not stored: it says how the run went, not the grade.
    load_sensitive: bool = field(default=False, compare=False)

    def as_dict(self) -> dict:
        row = asdict(self)
        del row["load_sensitive"]
        return row


def _log_findings(log: str) -> dict[str, list[str]]:
    """What nbgrader's own log says about a run that failed outside the engine (nbgrader itself, its kernel)."""
    found = {"dead": [], "errors": []}
    for line in log.splitlines():
        if "Kernel died" in line or "DeadKernelError" in line:
            found["dead"].append(line)
        if re.match(r"\s*\w+(Error|Exception): ", line):
            found["errors"].append(line.strip())
    return found


def classify(student: str, assignment: str, ev: Evidence) -> Outcome:
    """The one status the evidence supports, with every finding in ``detail``."""

    load_sensitive = ev.killed_after is not None or any(c.stop == "stall" for c in ev.cells)

    def outcome(status, score=None, notes=()):
        return Outcome(student, assignment, status, score, ev.max_score if score is not None else None,
                       "; ".join(notes), load_sensitive=load_sensitive)

    if ev.unknown:
        return outcome("unknown", notes=ev.unknown)
    if ev.unreadable:
        return outcome("unreadable", notes=ev.unreadable)

    logged = _log_findings(ev.log)
    finished = ev.exit_code == 0 and ev.killed_after is None
    score = ev.score if finished else None
    notes: list[str] = []
    status = None

    # crashed: nbgrader failed, a cell killed the kernel (skipped, the rest graded), or the memory cap held a cell
    if ev.killed_after is None and ev.exit_code not in (0, None):
        status = "crashed"
        if logged["dead"]:
            notes.append("the kernel died and could not be brought back; the run did not finish")
        else:
            last = logged["errors"][-1] if logged["errors"] else f"nbgrader exited with code {ev.exit_code}"
            notes.append(f"grading failed: {last[:300]}")
    died = _cells_with(ev, "kernel_died")
    if died:
        status = status or "crashed"
        notes.append(f"the kernel died in {died} (os._exit, a signal or a crash): {_skipped(died)}")
    memory = _cells_with(ev, "memory")
    if memory:
        status = status or "crashed"
        cap = f" ({ev.memory_mb} MiB)" if ev.memory_mb else ""
        notes.append(f"hit the memory cap{cap} in {memory}" + ("; the rest was graded" if finished else ""))

    # timed out: the whole submission, or one cell (interrupted, or ignoring the interrupt and skipped)
    if ev.killed_after is not None:
        status = status or "timed out"
        notes.append(f"the whole submission ran past {ev.killed_after:.0f} s and was stopped; no score")
    limit = _limits_text(ev)
    ignored = _cells_with(ev, "interrupt_ignored")
    if ignored:
        status = status or "timed out"
        notes.append(f"{ignored} ran past {limit} and ignored the interrupt: {_skipped(ignored)}")
    timed = _cells_with(ev, "cpu", "stall", "wall")
    if timed:
        status = status or "timed out"
        where = f"{timed} ran" if timed else "a cell ran"
        tail = "; the rest was graded" if finished else ""
        notes.append(f"{where} past {limit} and was interrupted{tail}")

    # nbgrader's "Attribute 'points' ... has changed" is no evidence: it also fires for every learner after the
    # instructor changed a check's points, and nbgrader puts the gradebook's points back either way.
    tampered = list(ev.tampered)
    replaced = _cells_with(ev, "tampered")
    if replaced:
        tampered.append(f"the learner's code replaced or reached into part of the grader while {replaced} ran (scored 0)")
    if tampered:
        status = status or "tampered"
        notes.extend(tampered)

    cut = [c.cell for c in ev.cells if c.output_cut]
    if cut:
        notes.append(f"output cut at the cap in {', '.join(cut)}")
    if ev.no_record and finished:
        notes.append(f"the grading run left no record of {', '.join(ev.no_record)}")
    notes.extend(ev.notes)

    if status is None:
        if not finished or score is None or ev.max_score is None:
            status = "crashed"
            notes.append("the run finished without a score in the gradebook")
        elif score < ev.max_score:
            status = "wrong"
        else:
            status = "graded"
    return outcome(status, score, notes)


def _cells_with(ev: Evidence, *stops: str) -> str:
    """The cells whose run record says one of ``stops`` (``outcome_words.STOPS``), as text ("" when none)."""
    return ", ".join(dict.fromkeys(c.cell for c in ev.cells if c.stop in stops))


def _skipped(cells: str) -> str:
    which = "those cells were" if ", " in cells else "that cell was"
    return f"{which} skipped (earning nothing; checks that need them fail) and everything else was graded"


def _limits_text(ev: Evidence) -> str:
    if ev.grade_cell_cpu and ev.cell_cpu:
        return (f"its limit ({ev.grade_cell_cpu:g} s of CPU for a grade cell, or 3x the reference solution's "
                f"cost here where that is more; {ev.cell_cpu:g} s for others; or a stall)")
    return f"the {ev.cell_timeout:g} s limit" if ev.cell_timeout else "the time limit"


def record_findings(notebook: str, record: RunRecord | None, ev: Evidence) -> None:
    """Add what the engine's run record of one notebook says (each cell's kind of stop, cut output) to ``ev``."""
    if record is None:
        ev.no_record.append(f"{notebook}.ipynb")
        return
    ev.cells.extend(record.cells)


def tamper_findings(nb, source_cells) -> list[str]:
    """Locked cells the learner removed or changed, compared with the gradebook's source cells.

    ``source_cells``: nbgrader ``SourceCell`` rows of this notebook (name, locked, source).
    """
    by_id = {}
    for cell in nb.cells:
        gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if gid:
            by_id[gid] = cell
    found = []
    for src in source_cells:
        if not src.locked:
            continue
        cell = by_id.get(src.name)
        if cell is None:
            found.append(f"`{src.name}` was deleted or lost its nbgrader metadata (put back and graded)")
            continue
        if cell.get("source", "").strip() == released_source(src.source).strip():
            continue
        stored = cell.get("metadata", {}).get("nbgrader", {}).get("checksum")
        if stored and nbutils.compute_checksum(cell) == stored:
            continue  # the version the learner was given; the test was changed after release
        found.append(f"`{src.name}` was changed (the original was put back and graded)")
    return found
