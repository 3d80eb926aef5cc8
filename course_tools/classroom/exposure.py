"""What a learner can read on the class's course paths: any solution there is a finding.

Measured on a shared machine (issue 45): the hub pointed learners' servers at its own checkout for the learner
view, and from there a learner read ``solutions/`` with every hidden test, while ``classroom check`` said all
was as ``secure`` makes it (it looked at modes of named folders, never at what lay readable below them).

:func:`exposed` walks each path the class uses (the exchange, the course folders, the hub's learner files,
the source the learners' Python imports the course from, and any the administrator adds) as each learner
could: a folder counts only if the learner may pass through it and every folder above it (``x``), a file
only if they may read it (``r``), by owner, group and other bits. A readable file is a finding when it is
a gradebook, a git repository (every committed file, solutions included), a notebook of a ``solutions`` or
nbgrader ``source`` folder, or when it holds a line of a hidden test or a reference answer
(:mod:`course_tools.grading.hidden` decides which lines count).

What it does not see: access control lists (``getfacl``), bind mounts and other machines' copies; files over
:data:`MAX_BYTES` or of kinds that hold no text (:data:`TEXT_SUFFIXES`) are not read.
"""

from __future__ import annotations

import os
import pwd
import stat
from dataclasses import dataclass
from pathlib import Path

from course_tools.grading.hidden import scan_file, secret_lines
from course_tools.grading.shown import shown
from course_tools.paths import package_course_root

__all__ = ["Reader", "course_secrets", "exposed", "exposed_solutions"]

MAX_BYTES = 20 * 1024 * 1024
TEXT_SUFFIXES = {".ipynb", ".py", ".md", ".txt", ".json", ".zip", ".html", ".po", ".pot", ".yml", ".yaml", ".csv",
                 ".tex", ".rst"}
SOLUTION_FOLDERS = {"solutions", "source"}  # the course's own, and nbgrader's name for the instructor's copy
SKIPPED = {"node_modules", "__pycache__"}


@dataclass(frozen=True)
class Reader:
    """A learner as the file system sees them: their uid and every group they are in."""

    login: str
    uid: int
    gids: frozenset[int]

    @classmethod
    def of(cls, login: str) -> "Reader":
        entry = pwd.getpwnam(login)
        return cls(login, entry.pw_uid, frozenset(os.getgrouplist(login, entry.pw_gid)))

    def may(self, st: os.stat_result, bit: int) -> bool:
        """``bit`` is 4 (read) or 1 (pass through a folder); root's bypass is not theirs."""
        mode = stat.S_IMODE(st.st_mode)
        if st.st_uid == self.uid:
            return bool(mode & (bit << 6))
        if st.st_gid in self.gids:
            return bool(mode & (bit << 3))
        return bool(mode & bit)


def _reaches(path: Path, reader: Reader) -> bool:
    """Whether ``reader`` may pass through every folder down to ``path`` (not following its last part)."""
    for folder in reversed(path.parents):
        try:
            if not reader.may(os.stat(folder), 1):
                return False
        except OSError:
            return False
    return True


def course_secrets(folders: list[Path], package_root: Path | None = None) -> list[str]:
    """Every secret line of the courses in ``folders`` (each read where it has ``solutions/``); an answer line the
    ``helpers`` package of ``package_root`` holds is public (hidden.py's rule), a hidden test line never is."""
    found: list[str] = []
    for folder in folders:
        if (Path(folder) / "solutions").is_dir():
            found += secret_lines(Path(folder), package_root)
    return list(dict.fromkeys(found))


def exposed(roots: list[Path], learners: list[str], secrets: list[str], skip: tuple[Path, ...] = ()) -> list[str]:
    """One line per learner-readable secret under ``roots``: the path, who may read it and why it is secret.

    ``skip``: folders of learners' own work (the exchange's ``inbound`` and ``feedback``), where a correct answer
    may well read like the reference; a name there is a learner's own timestamped folder, never a copy of ours.
    """
    readers = [Reader.of(login) for login in learners]
    findings: dict[str, str] = {}
    skipped = {Path(p).absolute() for p in skip}
    for root in dict.fromkeys(Path(r).absolute() for r in roots):
        if not os.path.lexists(root):
            continue
        reaching = [r for r in readers if _reaches(root, r)]
        _walk(root, reaching, secrets, findings, skipped)
    return [f"{path} is readable by {who}" for path, who in findings.items()]


def _walk(top: Path, readers: list[Reader], secrets: list[str], findings: dict[str, str], skipped: set) -> None:
    stack = [(top, readers, False)]
    while stack:
        path, who, in_solutions = stack.pop()
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if stat.S_ISLNK(st.st_mode):
            continue  # a link is judged where it points, if that is a course path too
        if stat.S_ISDIR(st.st_mode):
            passing = [r for r in who if r.may(st, 1)]
            if not passing or path.name in SKIPPED or path in skipped:
                continue
            if path.name == ".git" and (path / "objects").is_dir():
                _found(findings, path, passing, "a git repository: every file ever committed, solutions included")
                continue
            try:
                names = sorted(os.listdir(path))
            except OSError:
                continue
            inside = in_solutions or path.name in SOLUTION_FOLDERS
            stack += [(path / name, passing, inside) for name in names]
        elif stat.S_ISREG(st.st_mode):
            reading = [r for r in who if r.may(st, 4)]
            if reading:
                why = _secret(path, st, in_solutions, secrets)
                if why:
                    _found(findings, path, reading, why)


def _secret(path: Path, st: os.stat_result, in_solutions: bool, secrets: list[str]) -> str | None:
    if path.name == "gradebook.db":
        return "the gradebook: every learner's scores"
    if in_solutions and path.suffix == ".ipynb":
        return "a notebook of a solutions folder"
    if path.suffix not in TEXT_SUFFIXES or st.st_size > MAX_BYTES or not secrets:
        return None
    try:
        data = path.read_bytes()
    except OSError:
        return None
    hits = scan_file(data, path.name, secrets)
    return f"it holds a hidden test or a reference answer ({shown(hits[0].line[:60])!s})" if hits else None


def _found(findings: dict[str, str], path: Path, readers: list[Reader], why: str) -> None:
    names = ", ".join(r.login for r in readers[:3]) + (f" and {len(readers) - 3} more" if len(readers) > 3 else "")
    findings[shown(str(path))] = f"{names}: {why}"


def exposed_solutions(exchange: Path, courses: dict[str, Path], learners: list[str], also: list[Path]) -> list[str]:
    """Solutions a learner can read on the course paths: the exchange, the course folders and ``also``."""
    sources, package = list(courses.values()), None
    try:
        package = package_course_root()  # the instructor's checkout: its solutions/ and helpers/ say what is secret
        sources.append(package)
    except SystemExit:
        pass
    secrets = course_secrets(sources, package)
    work = tuple(exchange / course_id / sub for course_id in courses for sub in ("inbound", "feedback"))
    return exposed([exchange, *courses.values(), *also], learners, secrets, skip=work)
