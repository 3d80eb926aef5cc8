"""The course folder as grading sees it: settings, gradebook, roster, submissions, stored outcomes.

Everything runs against a *course root*: the folder with ``nbgrader_config.py``
(the repository root for a real class, a temporary folder in the tests). Where
each folder is comes from nbgrader's own ``CourseDirectory`` (its settings and
its ``directory_structure``), so a course that moves a folder in its config
moves it for these tools too. Grading's own records live in
``autograded/.grading/`` (nbgrader's globs skip the hidden folder): outcomes
(``outcome_store.py``), run records (``run_record.py``), logs.
Ground of the grading package: every room stands on it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from nbgrader.coursedir import CourseDirectory
from traitlets.config.loader import PyFileConfigLoader

from course_tools.grading import ensure_tools_on_path
from course_tools.grading.outcome_store import OutcomeStore
from course_tools.grading.settings import GradingLimits
from course_tools.paths import CONFIG_FILE

__all__ = ["Course"]


@dataclass
class Course:
    root: Path

    def __post_init__(self):
        self.root = Path(self.root).resolve()
        ensure_tools_on_path()
        self.config = PyFileConfigLoader(CONFIG_FILE, path=str(self.root)).load_config()

    # --- settings (nbgrader's CourseDirectory) ---------------------------------------------------
    def _setting(self, section: str, name: str, default):
        value = self.config.get(section, {}).get(name, default)
        return default if value is None else value

    @property
    def dirs(self) -> CourseDirectory:
        """nbgrader's view of this folder: its directory settings and ``format_path``."""
        return CourseDirectory(config=self.config, root=str(self.root))

    def _dir(self, step: str) -> Path:
        return self.root / getattr(self.dirs, f"{step}_directory")

    @property
    def source_dir(self) -> Path:
        return self._dir("source")

    @property
    def release_dir(self) -> Path:
        return self._dir("release")

    @property
    def submitted_dir(self) -> Path:
        return self._dir("submitted")

    @property
    def autograded_dir(self) -> Path:
        return self._dir("autograded")

    @property
    def feedback_dir(self) -> Path:
        return self._dir("feedback")

    def submission_dir(self, step: str, student: str, assignment: str) -> Path:
        """Where one submission is at ``step`` (submitted, autograded, feedback), by nbgrader's own layout."""
        dirs = self.dirs
        return Path(dirs.format_path(getattr(dirs, f"{step}_directory"), student, assignment))

    @property
    def course_id(self) -> str:
        return self._setting("CourseDirectory", "course_id", "")

    @property
    def db_url(self) -> str:
        """The gradebook, with a relative sqlite path made absolute against the course root."""
        url = self._setting("CourseDirectory", "db_url", "sqlite:///gradebook.db")
        prefix = "sqlite:///"
        if url.startswith(prefix) and not os.path.isabs(url[len(prefix):]):
            url = prefix + str(self.root / url[len(prefix):])
        return url

    @property
    def cell_timeout(self) -> float | None:
        return self._setting("Execute", "timeout", 30)

    def limits(self) -> GradingLimits:
        return GradingLimits(config=self.config)

    # --- gradebook --------------------------------------------------------------------------
    def gradebook(self):
        from nbgrader.api import Gradebook

        return Gradebook(self.db_url, self.course_id)

    def roster(self) -> list[str]:
        with self.gradebook() as gb:
            return sorted(s.id for s in gb.students)

    def graded_assignments(self) -> list[str]:
        with self.gradebook() as gb:
            return sorted(a.name for a in gb.assignments)

    def source_assignments(self) -> list[str]:
        if not self.source_dir.is_dir():
            return []
        return sorted(p.name for p in self.source_dir.iterdir() if p.is_dir() and not p.name.startswith("."))

    def submissions(self, assignment: str | None = None, student: str | None = None) -> list[tuple[str, str]]:
        """(student, assignment) for every folder ``submitted/<student>/<assignment>/``."""
        found = []
        if not self.submitted_dir.is_dir():
            return found
        for sdir in sorted(self.submitted_dir.iterdir()):
            if not sdir.is_dir() or sdir.name.startswith(".") or (student and sdir.name != student):
                continue
            for adir in sorted(sdir.iterdir()):
                if adir.is_dir() and not adir.name.startswith(".") and (not assignment or adir.name == assignment):
                    found.append((sdir.name, adir.name))
        return found

    # --- stored outcomes ----------------------------------------------------------------------
    @property
    def records_dir(self) -> Path:
        return self.autograded_dir / ".grading"

    def load_outcomes(self) -> dict[str, dict]:
        """{"student/assignment": outcome row} of every submission graded so far."""
        return OutcomeStore(self.records_dir).load()

    def save_outcome(self, outcome) -> None:
        """Store one outcome, replacing the earlier one for the same student and assignment."""
        OutcomeStore(self.records_dir).save(outcome.as_dict())

    def log_path(self, student: str, assignment: str) -> Path:
        return self.records_dir / "logs" / f"{student}__{assignment}.log"

    def run_record_path(self, student: str, assignment: str, notebook: str) -> Path:
        """The engine's run record of one graded notebook (``run_record.py``)."""
        return self.records_dir / "runs" / f"{student}__{assignment}" / f"{notebook}.json"
