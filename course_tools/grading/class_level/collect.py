"""``nbgrader collect`` that takes only what a learner submitted, as that learner, and nothing else.

On a shared machine the exchange's ``inbound/`` folder is writable by every learner, and nbgrader 0.9.6's
collect trusts what it finds there (measured with real Unix users, issue 38 and INSTRUCTORS.md):

- the student id is the folder name's first part, which anyone can write (``nbgrader submit`` with
  ``JUPYTERHUB_USER=alice``, or a hand-made ``alice+<assignment>+<timestamp>`` folder); a wrong owner only
  logs a warning;
- the timestamp is the name's last part: a future one beats every real resubmission;
- the copy follows symlinks, so a "submission" pointing at the reference notebook or at an instructor's
  private file was copied into the course, graded and shown back in feedback;
- the copy keeps inbound's modes, so ``submitted/<student>/<assignment>/`` was 0777.

:class:`SafeExchangeCollect` (``c.ExchangeFactory.collect`` in ``nbgrader_config.py``) refuses a submission
unless every entry in it is a directory or a regular file with one link, owned by the Unix user the folder
name claims, and its timestamps (the name's and ``timestamp.txt``'s) agree and are not in the future. A
refused folder is never a candidate: an honest older submission is collected instead. Each refusal is
logged and kept in ``autograded/.grading/refusals.json``, which the status table shows
(``course_tools.grading.class_level.report``). The copy itself opens every entry with ``O_NOFOLLOW`` relative to its
already-opened parent and checks the opened file, so swapping a file for a symlink after the check copies
nothing. Files land owner-readable only (0640, folders 0750; group-writable when the course is
``groupshared``): a learner never writes in ``submitted/``.

Why not nbgrader's copy with an ignore function: its ``ignore_patterns`` and ``shutil.copytree`` follow
symlinks by path, and no nbgrader option checks owners, links or timestamps (STACK_NOTES, nbgrader 0.9.6).
"""

from __future__ import annotations

import errno
import fnmatch
import json
import os
import pwd
import shutil
import stat
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

from nbgrader.api import Gradebook, MissingEntry
from nbgrader.exchange.default.collect import ExchangeCollect, groupby
from nbgrader.utils import parse_utc

__all__ = ["Refusal", "Refused", "SafeExchangeCollect", "check_submission", "copy_own_tree", "load_refusals"]

REFUSALS_FILE = "refusals.json"
MAX_DEPTH = 32  # folders inside a submission; deeper is refused (a million nested folders would crash the copy)
_CHUNK = 1 << 20
_FILE_MODE, _DIR_MODE = 0o640, 0o750
_SHARED_FILE_MODE, _SHARED_DIR_MODE = 0o660, 0o2770


class Refused(Exception):
    """A submission (or one entry in it) that collect does not take; the message says why."""


@dataclass(frozen=True)
class Refusal:
    """One inbound folder collect did not take: whom it claims to be from, and why not."""

    student: str
    assignment: str
    folder: str
    reason: str
    when: str  # when collect refused it, UTC

    def as_dict(self) -> dict:
        return asdict(self)


def owner_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid} (no such user)"


def _utcnow() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


def _claimed_time(text: str, what: str, now: datetime) -> datetime:
    try:
        when = parse_utc(text.strip())
    except (ValueError, OverflowError, TypeError) as err:
        raise Refused(f"{what} {text.strip()[:40]!r} is not a time ({err})") from None
    if when > now:
        raise Refused(f"{what} {when:%Y-%m-%d %H:%M:%S} UTC is in the future (now {now:%Y-%m-%d %H:%M:%S} UTC)")
    return when


def check_submission(path: str, student: str, timestamp: str, *, check_owner: bool = True,
                     now: datetime | None = None) -> None:
    """Raise :class:`Refused` unless ``path`` is ``student``'s own submission made at ``timestamp``.

    Looks without following anything (``lstat``): the folder and every entry below it must be a directory or a
    regular file with a single link, owned by the user ``student`` names (unless ``check_owner`` is off), and
    the name's timestamp and ``timestamp.txt`` must agree and not lie in the future. :func:`copy_own_tree`
    checks every entry again on the opened file, so what changes in between is not copied either.
    """
    now = now or _utcnow()
    uid = _expected_uid(student) if check_owner else None
    _check_entry(path, os.lstat(path), uid, student, top=True)
    def unreadable(err: OSError):
        raise Refused(f"{os.path.basename(err.filename or path)} cannot be read: {err.strerror}")

    # os.walk never descends into a symlink (followlinks=False); an unreadable folder is refused, not skipped
    for dirpath, dirnames, filenames in os.walk(path, onerror=unreadable):
        if dirpath.count(os.sep) - path.count(os.sep) >= MAX_DEPTH:
            raise Refused(f"it nests folders more than {MAX_DEPTH} deep")
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            _check_entry(full, os.lstat(full), uid, student)
    claimed = _claimed_time(timestamp, "the folder's timestamp", now)  # after the owner: a forger is named
    try:
        with open(os.path.join(path, "timestamp.txt"), "rb") as fh:  # checked above: a regular file, not a link
            written = fh.read(200).decode("utf-8", "replace")
    except FileNotFoundError:
        raise Refused("it has no timestamp.txt (nbgrader submit writes one)") from None
    if _claimed_time(written, "timestamp.txt", now) != claimed:
        raise Refused(f"timestamp.txt ({written.strip()[:40]}) is not the folder's timestamp ({timestamp})")


def _expected_uid(student: str) -> int:
    try:
        return pwd.getpwnam(student).pw_uid
    except KeyError:
        raise Refused(f"no user on this machine is called {student!r}, so nobody can have submitted as them") from None


def _check_entry(path: str, st: os.stat_result, uid: int | None, student: str, top: bool = False) -> None:
    name = path if top else os.path.basename(path)
    if stat.S_ISLNK(st.st_mode):
        raise Refused(f"{name} is a symbolic link (collect copies only the learner's own files)")
    if not (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode)):
        raise Refused(f"{name} is not a regular file or a folder (mode {stat.filemode(st.st_mode)})")
    if stat.S_ISREG(st.st_mode) and st.st_nlink != 1:
        raise Refused(f"{name} is a hard link ({st.st_nlink} names for one file)")
    if uid is not None and st.st_uid != uid:
        owner = owner_name(st.st_uid)
        hint = (" (every hub user runs as jovyan here, so files cannot say who submitted: use a service exchange,"
                " INSTRUCTORS.md 'A shared classroom')") if owner == "jovyan" else ""
        raise Refused(f"{name} belongs to {owner}, not to {student}{hint}")


@dataclass
class _Copy:
    uid: int | None
    student: str
    exclude: list
    include: list
    max_file_bytes: float
    max_total_bytes: float
    file_mode: int
    dir_mode: int
    total: int = 0

    def wanted(self, name: str, is_file: bool, size: int) -> bool:
        """nbgrader's own rules (``CourseDirectory.ignore``, ``include``, ``max_file_size``), on what was opened."""
        if self.exclude and any(fnmatch.fnmatch(name, pattern) for pattern in self.exclude):
            return False
        if is_file and self.include and not any(fnmatch.fnmatch(name, pattern) for pattern in self.include):
            return False
        return not (is_file and self.max_file_bytes and size > self.max_file_bytes)


def copy_own_tree(src: str, dest: str, *, uid: int | None, student: str, exclude=(), include=(),
                  max_file_kb: float = 0, max_dir_kb: float = 0, groupshared: bool = False) -> None:
    """Copy ``src`` to a new folder ``dest`` through file descriptors that never follow a link.

    Every entry is opened relative to its opened parent with ``O_NOFOLLOW`` (a symlink fails with ``ELOOP``),
    ``O_NONBLOCK`` (a FIFO does not hang) and checked by ``fstat`` on what was opened: type, link count,
    owner. Raises :class:`Refused` (and removes ``dest``) on the first entry that fails.
    """
    job = _Copy(uid, student, list(exclude or ()), list(include or ()), 1000 * (max_file_kb or 0),
                1000 * (max_dir_kb or 0), _SHARED_FILE_MODE if groupshared else _FILE_MODE,
                _SHARED_DIR_MODE if groupshared else _DIR_MODE)
    fd = _open_checked(src, None, job, top=True)
    try:
        os.makedirs(dest)
        _copy_dir(fd, dest, job)
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)
        raise
    finally:
        os.close(fd)


def _open_checked(name: str, dir_fd: int | None, job: _Copy, top: bool = False) -> int:
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise Refused(f"{name} is a symbolic link (collect copies only the learner's own files)") from None
        raise Refused(f"{name} cannot be opened: {err.strerror}") from None
    try:
        _check_entry(name, os.fstat(fd), job.uid, job.student, top=top)
    except Refused:
        os.close(fd)
        raise
    return fd


def _copy_dir(dir_fd: int, dest: str, job: _Copy, depth: int = 0) -> None:
    if depth >= MAX_DEPTH:
        raise Refused(f"it nests folders more than {MAX_DEPTH} deep")
    os.chmod(dest, job.dir_mode)
    try:
        names = sorted(os.listdir(dir_fd))
    except OSError as err:
        raise Refused(f"{os.path.basename(dest)} cannot be read: {err.strerror}") from None
    for name in names:
        fd = _open_checked(name, dir_fd, job)
        try:
            st = os.fstat(fd)
            is_file = stat.S_ISREG(st.st_mode)
            if not job.wanted(name, is_file, st.st_size):
                continue
            target = os.path.join(dest, name)
            if is_file:
                _copy_file(fd, target, st.st_size, job)
            else:
                os.mkdir(target)
                _copy_dir(fd, target, job, depth + 1)
        finally:
            os.close(fd)


def _copy_file(fd: int, target: str, size: int, job: _Copy) -> None:
    job.total += size
    if job.max_total_bytes and job.total > job.max_total_bytes:
        raise Refused(f"the submission is larger than CourseDirectory.max_dir_size ({job.max_total_bytes:.0f} bytes)")
    out = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, job.file_mode)
    try:
        while chunk := os.read(fd, _CHUNK):
            os.write(out, chunk)
    except OSError as err:  # a read the learner's file refuses (EIO, a vanished mount): this submission only
        raise Refused(f"{os.path.basename(target)} cannot be read: {err.strerror}") from None
    finally:
        os.close(out)
    os.chmod(target, job.file_mode)  # whatever the umask took away or left


def refusals_path(autograded_dir: str | os.PathLike) -> Path:
    return Path(autograded_dir) / ".grading" / REFUSALS_FILE


def load_refusals(autograded_dir: str | os.PathLike) -> list[dict]:
    path = refusals_path(autograded_dir)
    return json.loads(path.read_text()) if path.is_file() else []


def save_refusals(autograded_dir: str | os.PathLike, found: list[Refusal], assignment: str | None = None,
                  student: str | None = None) -> None:
    """Add ``found`` to the course's refusals, one entry per inbound folder.

    With ``assignment``, a new collect of it: what an earlier collect of that assignment (of ``student`` only,
    when given) refused is dropped first, so a forgery since removed from inbound leaves the table.
    """
    path = refusals_path(autograded_dir)
    earlier = load_refusals(autograded_dir)
    if not found and not earlier:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    kept = {r["folder"]: r for r in earlier
            if assignment is None or r["assignment"] != assignment or (student and r["student"] != student)}
    kept.update({r.folder: r.as_dict() for r in found})
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(sorted(kept.values(), key=lambda r: (r["student"], r["assignment"], r["folder"])),
                              indent=1))
    os.replace(tmp, path)


class SafeExchangeCollect(ExchangeCollect):
    """nbgrader's collect, choosing among checked submissions only and copying without following links."""

    def init_src(self):
        # nbgrader's own init_src, but a refused folder is dropped before the newest per student is chosen
        # (nbgrader's version would let a forged future timestamp hide the real submission).
        if self.coursedir.course_id == "":
            self.fail("No course id specified. Re-run with --course flag.")
        self.course_path = os.path.join(self.root, self.coursedir.course_id)
        self.inbound_path = os.path.join(self.course_path, "inbound")
        if not os.path.isdir(self.inbound_path):
            self.fail("Course not found: {}".format(self.inbound_path))
        self.refusals: list[Refusal] = []
        if not self.check_owner:
            self.log.warning("CollectApp.check_owner is off: anyone on this machine can submit as anyone. "
                             "Use a service exchange instead (INSTRUCTORS.md, 'A shared classroom').")
        student_id = self.coursedir.student_id or "*"
        records = []
        for name in sorted(os.listdir(self.inbound_path)):
            if not fnmatch.fnmatchcase(name, f"{student_id}+{self.coursedir.assignment_id}+*"):
                continue
            record = self._checked_record(name)
            if record is not None:
                records.append(record)
        self.src_records = self._newest(groupby(records, lambda item: item["username"]))
        save_refusals(self._autograded(), self.refusals, self.coursedir.assignment_id, self.coursedir.student_id)

    def _checked_record(self, name: str) -> dict | None:
        parts = name.rsplit("+", 3)
        student, timestamp = parts[0], parts[2] if len(parts) >= 3 else ""
        try:
            check_submission(os.path.join(self.inbound_path, name), student, timestamp, check_owner=self.check_owner)
            return {"username": student, "filename": name, "timestamp": parse_utc(timestamp)}
        except (Refused, OSError, RecursionError) as err:  # whatever a folder does, the rest are collected
            self._refuse(student, name, str(err))
            return None

    def _refuse(self, student: str, folder: str, reason: str) -> None:
        self.log.error("Refused %s (claims to be from %s): %s", folder, student, reason)
        self.refusals.append(Refusal(student, self.coursedir.assignment_id, folder, reason,
                                     _utcnow().strftime("%Y-%m-%d %H:%M:%S UTC")))

    def _newest(self, usergroups: dict) -> list[dict]:
        with Gradebook(self.coursedir.db_url, self.coursedir.course_id) as gb:
            try:
                duedate = gb.find_assignment(self.coursedir.assignment_id).duedate
            except MissingEntry:
                duedate = None
        chosen = []
        for records in usergroups.values():
            records = self._sort_by_timestamp(records)
            if duedate is not None and self.before_duedate:
                records = [r for r in records if r["timestamp"] <= duedate] or records
            chosen.append(records[0])
        return chosen

    def do_copy(self, src, dest, log=None):
        student = os.path.basename(src).rsplit("+", 3)[0]
        uid = pwd.getpwnam(student).pw_uid if self.check_owner else None
        try:
            copy_own_tree(src, dest, uid=uid, student=student, exclude=self.coursedir.ignore,
                          include=self.coursedir.include, max_file_kb=self.coursedir.max_file_size,
                          max_dir_kb=self.coursedir.max_dir_size, groupshared=self.coursedir.groupshared)
        except (Refused, OSError, RecursionError) as err:  # changed since init_src looked: nothing of it is kept
            self._refuse(student, os.path.basename(src), str(err))
            save_refusals(self._autograded(), self.refusals[-1:])

    def _autograded(self) -> str:
        return os.path.join(self.coursedir.root, self.coursedir.autograded_directory)
