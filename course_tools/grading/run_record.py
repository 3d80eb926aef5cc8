"""The run record: what the engine did to each cell of one notebook, written as data for the class level.

The engine (``engine/execute.py``) writes one file per graded notebook,
``autograded/.grading/runs/<student>__<assignment>/<notebook>.json``; ``class_level/status.py`` reads it. Before
the record, the class level found these facts by searching the graded notebook's outputs for error names and
phrases and by regex over nbgrader's log; now the log is read only for what happens outside the engine (nbgrader
itself failing).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from course_tools.grading.outcome_words import STOPS

__all__ = ["CellRun", "RunRecord", "read_record", "write_record"]

VERSION = 1


@dataclass
class CellRun:
    """One code cell's last run."""

    index: int  #: position in the notebook (0-based)
    cell: str  #: how a table names it: "`grade-id`", or "cell N"
    grade_id: str = ""
    stop: str = ""  #: a key of ``outcome_words.STOPS``
    ename: str = ""  #: the error it ended with, if any ("" when none)
    evalue: str = ""  #: that error's message, cut at 300 characters
    cpu_s: float | None = None  #: CPU seconds it used, its processes together (None: not measured)
    output_cut: bool = False  #: its output passed the cap and was cut

    def __post_init__(self):
        if self.stop not in STOPS:
            raise ValueError(f"unknown kind of stop {self.stop!r}; one of {sorted(STOPS)}")


@dataclass
class RunRecord:
    """A notebook's grading run: its cells, how many times it was started over, and whether it finished."""

    notebook: str
    cells: list[CellRun] = field(default_factory=list)
    restarts: int = 0  #: runs started over (a fatal cell blanked, or a budget raised for this machine)
    finished: bool = False  #: False when the engine gave up or was stopped before the notebook's end


def write_record(path: Path, record: RunRecord) -> None:
    """Write ``record`` whole or not at all (a reader never sees half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"version": VERSION, **asdict(record)}, indent=1))
    os.replace(tmp, path)


def read_record(path: Path) -> RunRecord | None:
    """The record at ``path``; None when there is none (the engine never reached the notebook's end or start)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if data.get("version") != VERSION:
        return None
    cells = [CellRun(**cell) for cell in data.get("cells", [])]
    return RunRecord(data["notebook"], cells, data.get("restarts", 0), data.get("finished", False))
