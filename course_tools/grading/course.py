"""The course folder as grading sees it: settings, gradebook, roster, submissions, stored outcomes.

Everything runs against a *course root*: the folder with ``nbgrader_config.py``
(the repository root for a real class, a temporary folder in the tests).
Outcomes live in ``autograded/.grading/outcomes.json``, keyed by student and
assignment, so re-grading replaces a row and never adds one; nbgrader's own
globs skip the hidden folder.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path

from traitlets.config.loader import PyFileConfigLoader

from course_tools.grading import ensure_tools_on_path
from course_tools.paths import CONFIG_FILE

__all__ = ["Course"]

_SAVING = threading.Lock()  # grading threads store outcomes one at a time


@dataclass
class Course:
    root: Path

    def __post_init__(self):
        self.root = Path(self.root).resolve()
        ensure_tools_on_path()
        self.config = PyFileConfigLoader(CONFIG_FILE, path=str(self.root)).load_config()

    # --- settings -------------------------------------------------------------------------
    def _setting(self, section: str, name: str, default):
        value = self.config.get(section, {}).get(name, default)
        return default if value is None else value

    @property
    def source_dir(self) -> Path:
        return self.root / self._setting("CourseDirectory", "source_directory", "source")

    @property
    def submitted_dir(self) -> Path:
        return self.root / self._setting("CourseDirectory", "submitted_directory", "submitted")

    @property
    def autograded_dir(self) -> Path:
        return self.root / self._setting("CourseDirectory", "autograded_directory", "autograded")

    @property
    def feedback_dir(self) -> Path:
        return self.root / self._setting("CourseDirectory", "feedback_directory", "feedback")

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

    def limits(self):
        from course_tools.grading.limits import GradingLimits

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
        path = self.records_dir / "outcomes.json"
        return json.loads(path.read_text()) if path.is_file() else {}

    def save_outcome(self, outcome) -> None:
        """Store one outcome, replacing the earlier one for the same student and assignment."""
        with _SAVING:
            outcomes = self.load_outcomes()
            outcomes[f"{outcome.student}/{outcome.assignment}"] = outcome.as_dict()
            self.records_dir.mkdir(parents=True, exist_ok=True)
            tmp = self.records_dir / "outcomes.json.tmp"
            tmp.write_text(json.dumps(dict(sorted(outcomes.items())), indent=1))
            os.replace(tmp, self.records_dir / "outcomes.json")

    def log_path(self, student: str, assignment: str) -> Path:
        return self.records_dir / "logs" / f"{student}__{assignment}.log"
