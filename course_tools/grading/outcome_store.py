"""Outcomes of grading, one row per (student, assignment), in a store two grading processes can write at once.

SQLite, because two ``grade`` processes (two instructors, or a re-grade started while a class is graded) must
never lose each other's rows: the JSON file this replaces was rewritten whole under a lock held by one process
only, so a row written by the other in between was lost. SQLite's own file locking serialises the writers; a
writer that finds the file locked waits up to ``TIMEOUT_S``. Grading again replaces a row, never adds one.
An ``outcomes.json`` left by an older version is read in once, then renamed ``outcomes.json.imported``.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from pathlib import Path

__all__ = ["OutcomeStore"]

TIMEOUT_S = 60.0
_SCHEMA = "CREATE TABLE IF NOT EXISTS outcomes (student TEXT, assignment TEXT, row TEXT, PRIMARY KEY (student, assignment))"


class OutcomeStore:
    """``autograded/.grading/outcomes.sqlite``: each row an outcome's dict (``status.Outcome.as_dict``)."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.path = self.folder / "outcomes.sqlite"

    @contextlib.contextmanager
    def _db(self, create: bool):
        if create:
            self.folder.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, timeout=TIMEOUT_S, isolation_level=None)
        try:
            db.execute(_SCHEMA)
            yield db
        finally:
            db.close()

    def save(self, row: dict) -> None:
        """Store one outcome, replacing the earlier one for the same student and assignment."""
        with self._db(create=True) as db:
            self._import_json(db)
            db.execute("INSERT OR REPLACE INTO outcomes VALUES (?, ?, ?)",
                       (row["student"], row["assignment"], json.dumps(row)))

    def load(self) -> dict[str, dict]:
        """{"student/assignment": row}, sorted by that key."""
        if not self.path.is_file() and not (self.folder / "outcomes.json").is_file():
            return {}
        with self._db(create=True) as db:
            self._import_json(db)
            rows = db.execute("SELECT student, assignment, row FROM outcomes").fetchall()
        return {f"{s}/{a}": json.loads(r) for s, a, r in sorted(rows)}

    def _import_json(self, db: sqlite3.Connection) -> None:
        old = self.folder / "outcomes.json"
        if not old.is_file():
            return
        db.execute("BEGIN IMMEDIATE")  # one importer; the others find the file gone
        try:
            if old.is_file():
                for row in json.loads(old.read_text()).values():
                    db.execute("INSERT OR IGNORE INTO outcomes VALUES (?, ?, ?)",
                               (row["student"], row["assignment"], json.dumps(row)))
                old.rename(old.with_name("outcomes.json.imported"))
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
