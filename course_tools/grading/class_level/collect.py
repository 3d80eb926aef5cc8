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

And measured again (issue 45): a file swapped for a link to a FIFO between the check and the read stalled the
whole class's collect; a submission without ``submission_secret.txt`` broke ``release_feedback`` for the class;
3,000 empty files passed the size limit; a folder made after the due date, named 10 minutes before it, was
collected as on time.

:class:`SafeExchangeCollect` (``c.ExchangeFactory.collect`` in ``nbgrader_config.py``) refuses a submission
unless every entry in it is a directory or a regular file with one link, owned by the Unix user the folder
name claims, and its timestamps (the name's and ``timestamp.txt``'s) agree and are not in the future. A
refused folder is never a candidate: an honest older submission is collected instead. Each refusal is
logged and kept in ``autograded/.grading/refusals.json``, which the status table shows
(``course_tools.grading.class_level.report``); every name and reason a learner could shape is escaped where
it is shown (the log, :func:`load_refusals`: :func:`course_tools.grading.shown.shown`), never changed where
it is stored. The copy itself opens every entry with ``O_NOFOLLOW`` relative to its already-opened parent and checks the opened file, so swapping a file for a symlink after the check copies
nothing. Files land owner-readable only (0640, folders 0750; group-writable when the course is
``groupshared``): a learner never writes in ``submitted/``. A submission must hold what ``nbgrader submit``
writes (:data:`REQUIRED`) and at most :attr:`SafeExchangeCollect.max_entries` files and folders.

**Late is late.** A folder's name and ``timestamp.txt`` are the learner's word. What the learner cannot
write is the kernel's change time (``ctime``) of the folder and everything in it: no user can set it back
(``touch`` and ``os.utime`` set only the access and modification times), so the newest ``ctime`` is a time
by which the submission had arrived, on the clock of the machine (or file server) holding the exchange.
:func:`submission_time` grades a submission as arriving then when it reached the exchange after the due date,
or more than :data:`ARRIVAL_SLACK_S` after its name says; the collected ``timestamp.txt`` then carries that
time, and the status table says so. What this cannot prove: the first arrival (a later change, even a
``chmod`` by the learner, moves ``ctime`` forward, which only ever makes their own work later), and anything
if root or the file server's clock is wrong.

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
from traitlets import Int

from course_tools.grading.shown import shown

__all__ = ["Checked", "Refusal", "Refused", "SafeExchangeCollect", "check_submission", "copy_own_tree",
           "load_refusals", "submission_time"]

REFUSALS_FILE = "refusals.json"
MAX_DEPTH = 32  # folders inside a submission; deeper is refused (a million nested folders would crash the copy)
#: what `nbgrader submit` writes in every submission; without the secret, release_feedback fails for the class
REQUIRED = ("timestamp.txt", "submission_secret.txt")
#: files and folders in one submission, by default (SafeExchangeCollect.max_entries)
MAX_ENTRIES = 500
#: how much later than its name a submission may finish arriving (nbgrader names it, then copies the files)
ARRIVAL_SLACK_S = 120
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
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
    kind: str = "refused"  # or "re-dated": collected, as arriving later than its name says

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
        raise Refused(f"{what} '{text.strip()[:40]}' is not a time ({err})") from None
    if when > now:
        raise Refused(f"{what} {when:%Y-%m-%d %H:%M:%S} UTC is in the future (now {now:%Y-%m-%d %H:%M:%S} UTC)")
    return when


@dataclass(frozen=True)
class Checked:
    """A submission collect may take: the time its name claims, and the newest change the kernel saw in it."""

    claimed: datetime  # UTC, naive, like nbgrader's own timestamps
    arrived: datetime  # the newest ctime of the folder and everything in it, UTC


def submission_time(checked: Checked, duedate: datetime | None) -> datetime:
    """When the submission is graded as having arrived: its name's time, unless the exchange says later.

    Later when it reached the exchange after the due date although its name is before it (late is late), or
    when it finished arriving more than :data:`ARRIVAL_SLACK_S` after its name's time (a back-dated name).
    """
    if duedate is not None and checked.claimed <= duedate < checked.arrived:
        return checked.arrived
    if (checked.arrived - checked.claimed).total_seconds() > ARRIVAL_SLACK_S:
        return checked.arrived
    return checked.claimed


def _ctime(st: os.stat_result) -> datetime:
    return datetime.fromtimestamp(st.st_ctime, timezone.utc).replace(tzinfo=None)


def check_submission(path: str, student: str, timestamp: str, *, check_owner: bool = True,
                     now: datetime | None = None, max_entries: int = MAX_ENTRIES) -> Checked:
    """``student``'s own submission made at ``timestamp``, checked; else raise :class:`Refused`.

    Looks without following anything (``lstat``): the folder and every entry below it must be a directory or a
    regular file with a single link, owned by the user ``student`` names (unless ``check_owner`` is off), at
    most ``max_entries`` of them; the files of :data:`REQUIRED` must be there; the name's timestamp and
    ``timestamp.txt`` must agree and not lie in the future. Nothing is opened that could block or lead
    elsewhere (``O_NOFOLLOW | O_NONBLOCK``, then ``fstat``). :func:`copy_own_tree` checks every entry again on
    the opened file, so what changes in between is not copied either.
    """
    now = now or _utcnow()
    uid = _expected_uid(student) if check_owner else None
    top = os.lstat(path)
    _check_entry(path, top, uid, student, top=True)
    arrived, entries = _ctime(top), 0
    def unreadable(err: OSError):
        raise Refused(f"{os.path.basename(err.filename or path)} cannot be read: {err.strerror}")

    # os.walk never descends into a symlink (followlinks=False); an unreadable folder is refused, not skipped
    for dirpath, dirnames, filenames in os.walk(path, onerror=unreadable):
        if dirpath.count(os.sep) - path.count(os.sep) >= MAX_DEPTH:
            raise Refused(f"it nests folders more than {MAX_DEPTH} deep")
        entries += len(dirnames) + len(filenames)
        if max_entries and entries > max_entries:
            raise Refused(f"it holds more than {max_entries} files and folders (SafeExchangeCollect.max_entries)")
        for name in dirnames + filenames:
            st = os.lstat(os.path.join(dirpath, name))
            _check_entry(os.path.join(dirpath, name), st, uid, student)
            arrived = max(arrived, _ctime(st))
    claimed = _claimed_time(timestamp, "the folder's timestamp", now)  # after the owner: a forger is named
    written = ""
    for required in REQUIRED:
        text = _read_small(path, required, uid, student)
        written = text if required == "timestamp.txt" else written
    if _claimed_time(written, "timestamp.txt", now) != claimed:
        raise Refused(f"timestamp.txt ({written.strip()[:40]}) is not the folder's timestamp ({timestamp})")
    return Checked(claimed, arrived)


def _read_small(folder: str, name: str, uid: int | None, student: str, limit: int = 200) -> str:
    """The first ``limit`` bytes of ``folder/name``, opened without following a link or blocking on a FIFO."""
    try:
        fd = os.open(os.path.join(folder, name), _READ_FLAGS)
    except FileNotFoundError:
        raise Refused(f"it has no {name} (nbgrader submit writes one)") from None
    except OSError as err:
        raise Refused(f"{name} cannot be opened: {err.strerror}") from None
    try:
        st = os.fstat(fd)
        _check_entry(name, st, uid, student)
        if not stat.S_ISREG(st.st_mode):
            raise Refused(f"{name} is not a file")
        return os.read(fd, limit).decode("utf-8", "replace")
    finally:
        os.close(fd)


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
        fd = os.open(name, _READ_FLAGS, dir_fd=dir_fd)
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
    """What collect refused (and re-dated), every learner-chosen name escaped (files an older collect wrote too)."""
    path = refusals_path(autograded_dir)
    found = json.loads(path.read_text()) if path.is_file() else []
    return [dict(r, **{k: shown(r[k]) for k in ("student", "assignment", "folder", "reason") if k in r},
                 kind=r.get("kind", "refused")) for r in found]


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

    max_entries = Int(MAX_ENTRIES, help="Files and folders one submission may hold (0: no limit); more is refused "
                                        "(3,000 empty files would pass every size limit).").tag(config=True)

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
        self.duedate = self._duedate()
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

    def _duedate(self) -> datetime | None:
        with Gradebook(self.coursedir.db_url, self.coursedir.course_id) as gb:
            try:
                return gb.find_assignment(self.coursedir.assignment_id).duedate
            except MissingEntry:
                return None

    def _checked_record(self, name: str) -> dict | None:
        parts = name.rsplit("+", 3)
        student, timestamp = parts[0], parts[2] if len(parts) >= 3 else ""
        try:
            checked = check_submission(os.path.join(self.inbound_path, name), student, timestamp,
                                       check_owner=self.check_owner, max_entries=self.max_entries)
        except (Refused, OSError, RecursionError) as err:  # whatever a folder does, the rest are collected
            self._refuse(student, name, str(err))
            return None
        when = submission_time(checked, self.duedate)
        if when != checked.claimed:
            self._refuse(student, name, f"arrived in the exchange by {when:%Y-%m-%d %H:%M:%S} UTC, later than its "
                                        f"name's {checked.claimed:%Y-%m-%d %H:%M:%S} UTC: graded as arriving then",
                         kind="re-dated")
        return {"username": student, "filename": name, "timestamp": when, "claimed": checked.claimed}

    def _refuse(self, student: str, folder: str, reason: str, kind: str = "refused") -> None:
        log = self.log.warning if kind == "re-dated" else self.log.error
        log("%s %s (claims to be from %s): %s", kind.capitalize(), shown(folder), shown(student), shown(reason))
        self.refusals.append(Refusal(student, self.coursedir.assignment_id, folder, reason,
                                     _utcnow().strftime("%Y-%m-%d %H:%M:%S UTC"), kind))

    def _newest(self, usergroups: dict) -> list[dict]:
        chosen = []
        for records in usergroups.values():
            records = self._sort_by_timestamp(records)
            if self.duedate is not None and self.before_duedate:
                records = [r for r in records if r["timestamp"] <= self.duedate] or records
            chosen.append(records[0])
        return chosen

    def do_copy(self, src, dest, log=None):
        name = os.path.basename(src)
        student = name.rsplit("+", 3)[0]
        uid = pwd.getpwnam(student).pw_uid if self.check_owner else None
        try:
            copy_own_tree(src, dest, uid=uid, student=student, exclude=self.coursedir.ignore,
                          include=self.coursedir.include, max_file_kb=self.coursedir.max_file_size,
                          max_dir_kb=self.coursedir.max_dir_size, groupshared=self.coursedir.groupshared)
        except (Refused, OSError, RecursionError) as err:  # changed since init_src looked: nothing of it is kept
            self._refuse(student, name, str(err))
            save_refusals(self._autograded(), self.refusals[-1:])
            return
        record = next((r for r in self.src_records if r["filename"] == name), None)
        if record is not None and record["timestamp"] != record["claimed"]:
            stamp = os.path.join(dest, "timestamp.txt")  # ours now (copied, 0640): the time it is graded by
            with open(stamp, "w") as fh:
                fh.write(record["timestamp"].strftime("%Y-%m-%d %H:%M:%S.%f") + " UTC")

    def _autograded(self) -> str:
        return os.path.join(self.coursedir.root, self.coursedir.autograded_directory)
