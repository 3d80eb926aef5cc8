"""What happened to one submission, decided from evidence only, never guessed.

Every submission ends with exactly one status. When several apply, the first
in this table wins; ``detail`` lists all the evidence found.

==========  ===================================================================  ==========
status      evidence that sets it                                                score
==========  ===================================================================  ==========
unknown     the assignment is not in the gradebook or ``solutions/``, or the     none
            student is not on the gradebook's roster (nbgrader is not run)
unreadable  a notebook of the submission is missing, is not JSON, is not a    none
            valid notebook (``nbformat.read`` fails), or has no nbgrader cell
            at all (nbgrader is not run)
crashed     nbgrader exited non-zero for any reason but a timeout (its log       none, or the
            says which), a cell killed the kernel (``KernelDiedInThisCell``:     score when the
            skipped, the rest graded), or a cell's output is a MemoryError /     run finished
            "can't allocate memory" (the memory cap held it)
timed out   the whole-submission cap killed the run (``notebook_timeout``), or  none, or the
            a cell hit its limit (``c.Execute.timeout``, or                      score when the
            its CPU budget, ``c.GradingLimits.grade_cell_cpu``, or a stall): a   run finished
            ``CellTimeoutError`` output (interrupted), or ``InterruptIgnored``
            (it ignored the interrupt: skipped, the rest graded)
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
future timestamp; ``course_tools/grading/collect.py``). A refusal beside a
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
from nbgrader.preprocessors import ClearHiddenTests

from course_tools.grading.execute import INTERRUPT_IGNORED, KERNEL_DIED, STALLED, TAMPERED

__all__ = [
    "STATUSES",
    "Evidence",
    "Outcome",
    "classify",
    "tamper_findings",
    "notebook_findings",
]

#: Statuses of a grading run, most severe first (the first that applies wins).
STATUSES = ("unknown", "unreadable", "crashed", "timed out", "tampered", "wrong", "graded")
MISSING = "missing"
NOT_GRADED = "not graded"
REFUSED = "refused"
REFUSED_NOTE = "refused at collect"

MEMORY_TEXTS = ("can't allocate memory", "cannot allocate memory", "not enough memory")


@dataclass
class Evidence:
    """What a grading run left behind for one (student, assignment)."""

    unknown: list[str] = field(default_factory=list)  # why the course does not know it
    unreadable: list[str] = field(default_factory=list)  # notebook -> parse error
    exit_code: int | None = None  # nbgrader's; None when it was not run
    killed_after: float | None = None  # seconds, when the whole-submission cap killed it
    log: str = ""  # nbgrader's output
    cell_errors: list[tuple[str, str, str]] = field(default_factory=list)  # (cell, ename, evalue)
    output_cut: list[str] = field(default_factory=list)  # cells whose output hit the cap
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
    found = {"cell_timeout": [], "dead": [], "iopub": [], "missing": [], "attribute": [], "errors": []}
    for line in log.splitlines():
        if "Timeout waiting for execute reply" in line:
            found["cell_timeout"].append(line)
        if "Kernel died" in line or "DeadKernelError" in line:
            found["dead"].append(line)
        if "Timeout waiting for IOPub output" in line or "CellTimeoutError" in line:
            found["iopub"].append(line)
        m = re.search(r"Missing grade cell (\S+) encountered", line)
        if m:
            found["missing"].append(m.group(1))
        m = re.search(r"Attribute '(points|locked|cell_type)' for cell (\S+) has changed", line)
        if m:
            found["attribute"].append(f"`{m.group(2)}` had its {m.group(1)} changed (put back)")
        if re.match(r"\s*\w+(Error|Exception): ", line):
            found["errors"].append(line.strip())
    return found


def classify(student: str, assignment: str, ev: Evidence) -> Outcome:
    """The one status the evidence supports, with every finding in ``detail``."""

    load_sensitive = ev.killed_after is not None or any(STALLED in evalue for _, _, evalue in ev.cell_errors)

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
    died = _cells_with(ev, KERNEL_DIED)
    if died:
        status = status or "crashed"
        notes.append(f"the kernel died in {died} (os._exit, a signal or a crash): {_skipped(died)}")
    memory = [c for c, ename, evalue in ev.cell_errors if ename == "MemoryError" or any(t in evalue.lower() for t in MEMORY_TEXTS)]
    if memory:
        status = status or "crashed"
        cap = f" ({ev.memory_mb} MiB)" if ev.memory_mb else ""
        notes.append(f"hit the memory cap{cap} in {', '.join(memory)}" + ("; the rest was graded" if finished else ""))

    # timed out: the whole submission, or one cell (interrupted, or ignoring the interrupt and skipped)
    if ev.killed_after is not None:
        status = status or "timed out"
        notes.append(f"the whole submission ran past {ev.killed_after:.0f} s and was stopped; no score")
    limit = _limits_text(ev)
    ignored = _cells_with(ev, INTERRUPT_IGNORED)
    if ignored:
        status = status or "timed out"
        notes.append(f"{ignored} ran past {limit} and ignored the interrupt: {_skipped(ignored)}")
    timed = _cells_with(ev, "CellTimeoutError", "TimeoutError")
    if timed or (logged["cell_timeout"] and not ignored):
        status = status or "timed out"
        where = f"{timed} ran" if timed else "a cell ran"
        tail = "; the rest was graded" if finished else ""
        notes.append(f"{where} past {limit} and was interrupted{tail}")

    # nbgrader's "Attribute 'points' ... has changed" is no evidence: it also fires for every learner after the
    # instructor changed a check's points, and nbgrader puts the gradebook's points back either way.
    tampered = list(ev.tampered)
    replaced = _cells_with(ev, TAMPERED)
    if replaced:
        tampered.append(f"the learner's code replaced or reached into part of the grader while {replaced} ran (scored 0)")
    if tampered:
        status = status or "tampered"
        notes.extend(tampered)

    if ev.output_cut:
        notes.append(f"output cut at the cap in {', '.join(ev.output_cut)}")
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


def _cells_with(ev: Evidence, *enames: str) -> str:
    """The cells whose error is one of ``enames``, as text ("" when none)."""
    return ", ".join(dict.fromkeys(c for c, ename, _ in ev.cell_errors if ename in enames))


def _skipped(cells: str) -> str:
    which = "those cells were" if ", " in cells else "that cell was"
    return f"{which} skipped (earning nothing; checks that need them fail) and everything else was graded"


def _limits_text(ev: Evidence) -> str:
    if ev.grade_cell_cpu and ev.cell_cpu:
        return (f"its limit ({ev.grade_cell_cpu:g} s of CPU for a grade cell, or 3x the reference solution's "
                f"cost here where that is more; {ev.cell_cpu:g} s for others; or a stall)")
    return f"the {ev.cell_timeout:g} s limit" if ev.cell_timeout else "the time limit"


def _cell_name(cell, index: int) -> str:
    gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
    return f"`{gid}`" if gid else f"cell {index + 1}"


def notebook_findings(nb, ev: Evidence) -> None:
    """Add what an autograded notebook's outputs show (errors, cut output) to ``ev``."""
    from course_tools.grading.limits import OUTPUT_CUT_MARK

    for index, cell in enumerate(nb.cells):
        if cell.get("cell_type") != "code":
            continue
        name = _cell_name(cell, index)
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                ev.cell_errors.append((name, out.get("ename", ""), str(out.get("evalue", ""))))
            elif OUTPUT_CUT_MARK in str(out.get("text", "")) + str(out.get("data", {}).get("text/plain", "")):
                ev.output_cut.append(name)


def _released_source(source: str) -> str:
    """A test cell's source as the learner received it: hidden tests removed."""
    from nbformat.v4 import new_code_cell

    cell = new_code_cell(source)
    ClearHiddenTests()._remove_hidden_test_region(cell)
    return cell.source


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
        if cell.get("source", "").strip() == _released_source(src.source).strip():
            continue
        stored = cell.get("metadata", {}).get("nbgrader", {}).get("checksum")
        if stored and nbutils.compute_checksum(cell) == stored:
            continue  # the version the learner was given; the test was changed after release
        found.append(f"`{src.name}` was changed (the original was put back and graded)")
    return found
