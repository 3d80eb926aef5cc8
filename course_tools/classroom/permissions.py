"""The file permissions a shared classroom needs, applied by one command and checked by the same rules.

Measured on a shared machine with real Unix users (issue 38), nbgrader 0.9.6 and Debian's defaults:

- an exchange root made with ``chmod ugo+rwx`` (no sticky bit) let a learner rename the course's exchange
  folder and publish her own notebook under the course's id: the root must be 1777, and the course's
  folders there must exist, owned by the instructor, before any learner could make them;
- ``inbound/`` as nbgrader makes it (2733) lets a learner who learns a classmate's folder name rename or
  remove it: sticky (3733) stops that;
- home folders are 0755 by default (``HOME_MODE`` unset in ``/etc/login.defs``): work, the nbgrader cache and
  the feedback secrets in it were readable by classmates; 0700 stops it;
- the instructor's course folder (solutions with hidden tests, ``gradebook.db``, every submission) was
  world-readable; 0700 (0750 with a graders' group for teaching assistants) stops it.

:func:`plan` says what each path must be; :func:`apply` makes it so (run as root: ``python -m course_tools
classroom secure``); :func:`problems` lists what is not so, for ``classroom check`` and the tests.
"""

from __future__ import annotations

import grp
import os
import pwd
import stat
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Rule", "plan", "apply", "problems", "LEARNER_UMASK"]

#: the umask of a learner's server (the hub's spawner sets it): nothing a learner writes is readable by others
LEARNER_UMASK = 0o077
#: the exchange course folders nbgrader makes (release_assignment), with the modes this course gives them
_COURSE_FOLDERS = {"": 0o755, "outbound": 0o755, "inbound": 0o3733, "feedback": 0o711}


@dataclass(frozen=True)
class Rule:
    """``path`` must exist as a folder owned by ``owner`` (and ``group``, when given) with exactly ``mode``."""

    path: Path
    owner: str
    mode: int
    group: str | None = None
    why: str = ""

    def problem(self) -> str | None:
        try:
            st = os.lstat(self.path)
        except FileNotFoundError:
            return f"{self.path} is missing ({self.why})"
        if not stat.S_ISDIR(st.st_mode):
            return f"{self.path} is not a folder (a symbolic link or a file; {self.why})"
        owner = _name(pwd.getpwuid, st.st_uid)
        if owner != self.owner:
            return f"{self.path} belongs to {owner}, not {self.owner} ({self.why})"
        if self.group and _name(grp.getgrgid, st.st_gid) != self.group:
            return f"{self.path} is in group {_name(grp.getgrgid, st.st_gid)}, not {self.group} ({self.why})"
        if stat.S_IMODE(st.st_mode) != self.mode:
            return f"{self.path} has mode {stat.S_IMODE(st.st_mode):04o}, not {self.mode:04o} ({self.why})"
        return None

    def apply(self) -> None:
        if not os.path.lexists(self.path):
            os.makedirs(self.path)
        elif not stat.S_ISDIR(os.lstat(self.path).st_mode):
            raise SystemExit(f"{self.path} exists and is not a folder: move it away first ({self.why})")
        uid = pwd.getpwnam(self.owner).pw_uid
        gid = grp.getgrnam(self.group).gr_gid if self.group else pwd.getpwnam(self.owner).pw_gid
        os.chown(self.path, uid, gid, follow_symlinks=False)
        os.chmod(self.path, self.mode)


def _name(lookup, number: int) -> str:
    try:
        return lookup(number)[0]
    except KeyError:
        return str(number)


def plan(exchange: Path, courses: dict[str, Path], instructor: str, learners: list[str],
         graders_group: str | None = None) -> list[Rule]:
    """What every path must be: the exchange root, each course id's exchange folders, the course folders, homes.

    ``courses`` maps a course id (``gpu-pytorch``, ``gpu-pytorch-ko``) to the instructor's course folder.
    """
    rules = [Rule(exchange, "root", 0o1777, why="sticky: nobody renames or removes another's folder here")]
    for course_id, folder in courses.items():
        for sub, mode in _COURSE_FOLDERS.items():
            rules.append(Rule(exchange / course_id / sub if sub else exchange / course_id, instructor, mode,
                              why=f"the instructor's, made before any learner can claim course id {course_id}"))
        rules.append(Rule(folder, instructor, 0o750 if graders_group else 0o700, graders_group,
                          why="solutions, hidden tests, the gradebook and submissions: the instructor's "
                              "(and the graders' group) only"))
    for login in learners:
        rules.append(Rule(Path(pwd.getpwnam(login).pw_dir), login, 0o700,
                          why="a learner's work, cache and feedback secrets: theirs only"))
    return rules


def apply(rules: list[Rule]) -> list[str]:
    """Make every rule hold (as root); the lines that say what changed."""
    changed = []
    for rule in rules:
        before = rule.problem()
        if before:
            rule.apply()
            changed.append(f"fixed: {before}")
    return changed


def problems(rules: list[Rule]) -> list[str]:
    return [p for p in (rule.problem() for rule in rules) if p]
