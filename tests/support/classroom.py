"""A shared classroom with real Unix users on this machine: an instructor, two learners and a curious classmate.

Root makes the accounts (``useradd``) and removes them afterwards (``userdel -r``), with a random suffix so a
crashed run never collides with the next. Everyone runs the course's own Python and nbgrader, as themselves
(``subprocess`` with ``user=``): the instructor in a course folder in their home, the learners with only
INSTRUCTORS.md's learner config. ``python -m course_tools classroom secure`` applies the permissions before
anything is released, as INSTRUCTORS.md tells an administrator.

Why ``/root`` gets ``o+x`` while it runs (and its mode back afterwards): this machine's Python lives under
``/root/.pyenv``, which other users could not execute otherwise; traversal only, nothing there becomes
listable. A real server installs the course's environment where every user can run it (INSTRUCTORS.md).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pwd
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from conftest import ROOT_SKIP_REASON
from support.layout import ROOT
from support.shared_machine import learner_config

TIMEOUT_S = 300
PYTHON_HOME = Path(sys.base_prefix)


def can_make_users() -> str | None:
    """Why this machine cannot host the classroom (conftest's allowed reason), or None."""
    return None if os.geteuid() == 0 and shutil.which("useradd") else ROOT_SKIP_REASON


@dataclass
class Person:
    login: str
    home: Path
    env: dict = field(default_factory=dict)

    @property
    def uid(self) -> int:
        return pwd.getpwnam(self.login).pw_uid


@dataclass
class Classroom:
    base: Path
    exchange: Path
    instructor: Person
    learners: dict[str, Person]  # "alice", "bob", "mallory" -> the account
    course_id: str = "gpu-pytorch"
    chapter: str = "02_devices"

    @property
    def course(self) -> Path:
        return self.instructor.home / "course"

    def run(self, person: Person, *args: str, cwd: Path | None = None, check: bool = True, env: dict | None = None,
            **kw) -> subprocess.CompletedProcess:
        """``args`` as ``person`` (a command, or ``-m module ...`` for the course's Python), in their home."""
        argv = [sys.executable, *args] if args[0] == "-m" else list(args)
        proc = subprocess.run(argv, cwd=cwd or person.home, env=dict(person.env, **(env or {})), user=person.uid,
                              group=pwd.getpwnam(person.login).pw_gid, extra_groups=[], umask=0o022,
                              capture_output=True, text=True, timeout=TIMEOUT_S, **kw)
        if check:
            assert proc.returncode == 0, (f"{person.login}: `{' '.join(args)}` failed ({proc.returncode}):\n"
                                          f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
        return proc

    def fails(self, person: Person, *args: str) -> str:
        """Run a shell command as ``person`` that must fail; its error output."""
        proc = self.run(person, "/bin/sh", "-c", " ".join(args), check=False)
        assert proc.returncode != 0, f"{person.login} could: {' '.join(args)}\n{proc.stdout}"
        return proc.stderr

    def release(self) -> None:
        """The instructor releases the chapter to the exchange, every learner on the roster (nbgrader's commands)."""
        teacher = self.instructor
        self.run(teacher, "-m", "course_tools", "release", self.chapter, "--course", str(self.course), cwd=self.course)
        for person in self.learners.values():
            self.run(teacher, "-m", "nbgrader", "db", "student", "add", person.login, cwd=self.course)
        self.run(teacher, "-m", "nbgrader", "release_assignment", self.chapter, cwd=self.course)

    def set_password(self, person: Person, password: str) -> None:
        subprocess.run(["chpasswd"], input=f"{person.login}:{password}", text=True, check=True, capture_output=True)

    def secure(self) -> str:
        proc = subprocess.run([sys.executable, "-m", "course_tools", "classroom", "secure", "--exchange",
                               str(self.exchange), "--instructor", self.instructor.login, "--course",
                               f"{self.course_id}={self.course}", "--course", f"{self.course_id}-ko={self.course}-ko",
                               "--learners", *(p.login for p in self.learners.values())],
                              capture_output=True, text=True, timeout=TIMEOUT_S)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc.stdout


def _env(home: Path, **extra) -> dict:
    keep = {k: os.environ[k] for k in ("LANG", "LC_ALL", "TZ") if k in os.environ}
    return dict(keep, HOME=str(home), USER=home.name, PATH=f"{Path(sys.executable).parent}:/usr/bin:/bin",
                JUPYTER_CONFIG_DIR=str(home / ".jupyter"), COURSE_DEVICE="cpu", PYTHONDONTWRITEBYTECODE="1", **extra)


def _useradd(login: str) -> Person:
    subprocess.run(["useradd", "--create-home", "--shell", "/bin/sh", login], check=True, capture_output=True)
    return Person(login, Path(pwd.getpwnam(login).pw_dir))


_MODES = Path(tempfile.gettempdir()) / "course-classroom-python-modes.json"
_MODES_LOCK = Path(tempfile.gettempdir()) / "course-classroom-python-modes.lock"


@contextlib.contextmanager
def traversable_python():
    """Let every user run this machine's Python (see the module's docstring); the modes put back afterwards.

    Two classroom tests may run at once (xdist workers): each holds a shared lock while it runs, and the one
    that leaves last (it alone then gets the exclusive lock) puts back the modes the first one recorded.
    """
    with open(_MODES_LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _MODES.exists():
            changed = {}
            for folder in [*reversed(PYTHON_HOME.parents), PYTHON_HOME]:
                mode = folder.stat().st_mode
                if not mode & 0o001:
                    changed[str(folder)] = mode
                    folder.chmod(mode | 0o001)
            _MODES.write_text(json.dumps(changed))
        fcntl.flock(lock, fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
            if _last_one_out(lock):  # else another classroom test still runs: it puts the modes back
                for folder, mode in json.loads(_MODES.read_text()).items():
                    Path(folder).chmod(mode)
                _MODES.unlink()


def _last_one_out(lock) -> bool:
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


@contextlib.contextmanager
def classroom(tmp_root: Path = Path("/srv")):
    """The accounts, the exchange and the instructor's course folder (02_devices in solutions/), secured."""
    suffix = secrets.token_hex(3)
    base = tmp_root / f"classroom-test-{suffix}"
    made: list[str] = []
    with traversable_python():
        try:
            base.mkdir(parents=True, mode=0o755)
            instructor = _useradd(f"teach{suffix}")
            made.append(instructor.login)
            learners = {}
            for name in ("alice", "bob", "mallory"):
                learners[name] = _useradd(f"{name}{suffix}")
                made.append(learners[name].login)
            room = Classroom(base, base / "exchange", instructor, learners)
            room.exchange.mkdir(mode=0o755)
            instructor.env = _env(instructor.home, COURSE_EXCHANGE=str(room.exchange), COURSE_ID=room.course_id)
            for person in learners.values():
                person.env = _env(person.home)
            _course_for(room)
            yield room
        finally:
            for login in made:
                _remove_user(login)
            shutil.rmtree(base, ignore_errors=True)


def _remove_user(login: str) -> None:
    """Stop every process of ``login`` (their servers, the formgrader), wait until none is left, remove them."""
    deadline = time.monotonic() + 20
    while subprocess.run(["pkill", "-KILL", "-u", login], capture_output=True).returncode == 0:
        if time.monotonic() > deadline:
            break
        time.sleep(0.2)
    gone = subprocess.run(["userdel", "--remove", login], capture_output=True, text=True)
    if pwd_exists(login):
        raise AssertionError(f"could not remove the test's user {login}: {gone.stderr}")


def pwd_exists(login: str) -> bool:
    try:
        pwd.getpwnam(login)
        return True
    except KeyError:
        return False


def _course_for(room: Classroom) -> None:
    """The instructor's course folder and the learners' config, made by their owners, then `classroom secure`."""
    teacher = room.instructor
    room.run(teacher, "/bin/mkdir", "-p", str(room.course / "solutions" / room.chapter), str(teacher.home / ".jupyter"))
    room.run(teacher, "/bin/cp", str(ROOT / "nbgrader_config.py"), str(room.course))
    room.run(teacher, "/bin/cp", str(ROOT / "solutions" / room.chapter / f"{room.chapter}.ipynb"),
             str(room.course / "solutions" / room.chapter))
    config = learner_config(room.exchange)
    for person in room.learners.values():
        room.run(person, "/bin/mkdir", "-p", str(person.home / ".jupyter"))
        room.run(person, "/bin/sh", "-c", f"cat > {person.home}/.jupyter/nbgrader_config.py", input=config)
    room.secure()
