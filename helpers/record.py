"""A list of what a check saw, that the grader can vouch for: :class:`Record`.

Why. A check that watches the learner's code from inside its process (a simulated GPU's log of calls,
syncs and clock reads; the host syncs a loop made) keeps what it saw in a Python list, and the learner's
code, running in the same process, can reach that list and clear or rewrite it. When an instructor grades,
the grader's referee (``course_tools/grading/engine/referee.py``, an audit hook the learner's code cannot reach)
keeps its own copy of every entry, taken as it is made; it accepts entries only from the course's code, so
:meth:`Record.intact` tells a record the learner changed from one the course wrote. In a learner's own
kernel nothing keeps a copy and a record is taken as it is.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

__all__ = ["Record"]


class Record:
    """Entries (tuples, strings, numbers: immutable values) in the order they were recorded."""

    def __init__(self) -> None:
        self.entries: list[Any] = []

    def append(self, entry: Any) -> None:
        self.entries.append(entry)
        sys.audit("course.record", self, entry)

    def extend(self, entries: Any) -> None:
        for entry in entries:
            self.append(entry)

    def intact(self) -> bool:
        """Whether the entries are exactly (the same objects, in order) the ones the course's code recorded.

        True where no referee listens (a learner's own kernel)."""
        copies: list = []
        sys.audit("course.records", self, copies)
        if not copies:
            return True
        kept = copies[0]
        entries = list.copy(self.entries) if type(self.entries) is list else None
        return entries is not None and len(entries) == len(kept) and all(a is b for a, b in zip(entries, kept))

    def __iter__(self) -> Iterator[Any]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def __getitem__(self, index: Any) -> Any:
        return self.entries[index]

    def __repr__(self) -> str:
        return f"Record({self.entries!r})"
