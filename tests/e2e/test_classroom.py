"""A classmate attacks a shared classroom with real Unix users; every attempt is refused, honest work flows.

tests/support/classroom.py makes the accounts (an instructor, alice, bob and mallory), the exchange and the
instructor's course, and runs ``python -m course_tools classroom secure``. Then, with nbgrader's own commands
as each user: the instructor releases 02_devices; alice fetches, solves and submits it; mallory tries what
issue 38 measured on nbgrader 0.9.6 (submitting as alice, a future-dated folder, symlinks to the instructor's
files, renaming the course's exchange folder, reading homes and the course, writing into collected work);
the instructor collects, grades and releases feedback; alice fetches hers. About a minute.

Skips only where the test cannot make Unix users (not root); under CI (``CI`` set) that fails instead.
"""

from __future__ import annotations

import os
import stat
import time

import pytest

from support.classroom import Classroom, can_make_users, classroom
from support.layout import load, nbgrader_meta, skip_unless_ci, solution_path
from support.shared_machine import solve

pytestmark = pytest.mark.slow
FUTURE = "2099-01-01 00:00:00.000000 UTC"


@pytest.fixture(scope="module")
def room():
    skip_unless_ci(can_make_users(), "the classroom attacks")
    with classroom() as made:
        yield made


@pytest.fixture(scope="module")
def played(room: Classroom):
    """The whole term: release, alice's honest work, mallory's attempts, collect and grade; what they printed."""
    teacher, alice, mallory = room.instructor, room.learners["alice"], room.learners["mallory"]
    chapter, course_id = room.chapter, room.course_id
    room.release()

    room.run(alice, "-m", "nbgrader", "fetch_assignment", chapter, "--course", course_id)
    assert solve(alice.home / chapter / f"{chapter}.ipynb", chapter) > 0
    room.run(alice, "-m", "nbgrader", "submit", chapter, "--course", course_id)
    time.sleep(1.1)  # mallory's attempts come later than alice's submission, so nbgrader would take them

    inbound = room.exchange / course_id / "inbound"
    reference = room.course / "solutions" / chapter / f"{chapter}.ipynb"
    attempts = {}
    # 1. nbgrader's own submit under alice's name: nbgrader 0.9.6 honours JUPYTERHUB_USER only for the login
    #    `jovyan` (one Unix user for a whole hub: INSTRUCTORS.md says to use a service exchange there), so with
    #    real users this is simply mallory's own submission
    room.run(mallory, "-m", "nbgrader", "fetch_assignment", chapter, "--course", course_id)
    room.run(mallory, "-m", "nbgrader", "submit", chapter, "--course", course_id, env={"JUPYTERHUB_USER": alice.login})
    # 2. a hand-made folder in alice's name, dated in the future so it beats every resubmission
    forged = inbound / f"{alice.login}+{chapter}+{FUTURE}"
    room.run(mallory, "/bin/mkdir", str(forged))
    room.run(mallory, "/bin/cp", str(mallory.home / chapter / f"{chapter}.ipynb"), str(forged))
    room.run(mallory, "/bin/sh", "-c", f"printf '%s' '{FUTURE}' > '{forged}/timestamp.txt'")
    # 3. her own submission whose notebook is a symlink to the instructor's reference solution
    stamp = "2026-01-01 00:00:00.000000 UTC"
    linked = inbound / f"{mallory.login}+{chapter}+{stamp}"
    room.run(mallory, "/bin/mkdir", str(linked))
    room.run(mallory, "/bin/ln", "-s", str(reference), str(linked / f"{chapter}.ipynb"))
    room.run(mallory, "/bin/sh", "-c", f"printf '%s' '{stamp}' > '{linked}/timestamp.txt'")
    # 4. a submission folder that is itself a symlink to the instructor's solutions folder
    room.run(mallory, "/bin/ln", "-s", str(reference.parent), str(inbound / f"{mallory.login}+{chapter}+2026-01-02 00:00:00.000000 UTC"))
    # 5. a folder collect cannot read (mode 000 inside), which crashed nothing but would stop a naive copy
    locked = inbound / f"{mallory.login}+{chapter}+2026-01-03 00:00:00.000000 UTC"
    room.run(mallory, "/bin/mkdir", "-p", str(locked / "private"))
    room.run(mallory, "/bin/sh", "-c", f"printf '%s' '2026-01-03 00:00:00.000000 UTC' > '{locked}/timestamp.txt'")
    room.run(mallory, "/bin/chmod", "000", str(locked / "private"))
    # bob dates his own resubmission in the future, so that no later one of his could replace it
    bob = room.learners["bob"]
    dated = inbound / f"{bob.login}+{chapter}+{FUTURE}"
    room.run(bob, "/bin/mkdir", str(dated))
    room.run(bob, "/bin/cp", str(reference.parent.parent.parent / "nbgrader_config.py"), str(dated), check=False)
    room.run(bob, "/bin/sh", "-c", f"printf '%s' '{FUTURE}' > '{dated}/timestamp.txt'")
    # 8. (issue 45) bob's real submission, then its feedback secret removed: release_feedback once failed for the class
    room.run(bob, "-m", "nbgrader", "fetch_assignment", chapter, "--course", course_id)
    room.run(bob, "-m", "nbgrader", "submit", chapter, "--course", course_id)
    for secret in inbound.glob(f"{bob.login}+{chapter}+*/submission_secret.txt"):
        room.run(bob, "/bin/rm", str(secret))
    # 9. a folder name with a byte that is not UTF-8 and terminal control bytes (a forged line hides a refusal)
    room.run(mallory, "/bin/sh", "-c", f"mkdir \"{inbound}/$(printf '{mallory.login}+{chapter}+2026\\377\\033[2K\\rFORGED')\"")
    # 10. 600 empty files: nothing for the size limits, three copies of each in the instructor's home
    crowd = inbound / f"{mallory.login}+{chapter}+{_utc(time.time() - 60)}"
    room.run(mallory, "/bin/mkdir", str(crowd))
    room.run(mallory, "/bin/sh", "-c", f"cd '{crowd}' && cp ~/{chapter}/{chapter}.ipynb . && printf '%s' '{crowd.name.split('+')[2]}'"
             f" > timestamp.txt && echo s > submission_secret.txt && i=0 && while [ $i -lt 600 ]; do : > e$i; i=$((i+1)); done")
    # 11. late is late: the due date passes, then a folder named ten minutes before it arrives
    due = time.time()
    room.run(teacher, "-m", "nbgrader", "db", "assignment", "add", chapter, f"--duedate={_utc(due)}", cwd=room.course)
    time.sleep(1.1)
    backdated = inbound / f"{mallory.login}+{chapter}+{_utc(due - 600)}"
    room.run(mallory, "/bin/mkdir", str(backdated))
    room.run(mallory, "/bin/sh", "-c", f"cd '{backdated}' && cp ~/{chapter}/{chapter}.ipynb . && printf '%s' "
             f"'{_utc(due - 600)}' > timestamp.txt && echo s > submission_secret.txt")
    attempts["due"] = _utc(due)
    # 6. take over the course: rename its exchange folder, or claim the Korean edition's course id
    attempts["rename"] = room.fails(mallory, "mv", str(room.exchange / course_id), str(room.exchange / "stolen"))
    attempts["claim"] = room.fails(mallory, "mkdir", str(room.exchange / f"{course_id}-ko" / "outbound" / "x"))
    # 7. read a classmate's work and nbgrader cache (the feedback secrets), and the instructor's course
    attempts["home"] = room.fails(mallory, "cat", str(alice.home / chapter / f"{chapter}.ipynb"))
    attempts["cache"] = room.fails(mallory, "ls", str(alice.home / ".local/share/jupyter/nbgrader_cache"))
    attempts["course"] = room.fails(mallory, "cat", str(room.course / "gradebook.db"))
    attempts["reference"] = room.fails(mallory, "cat", str(reference))

    collected = room.run(teacher, "-m", "nbgrader", "collect", chapter, cwd=room.course)
    table = room.run(teacher, "-m", "course_tools", "grade", "--assignment", chapter, "--no-progress", cwd=room.course)
    exported = room.run(teacher, "-m", "course_tools", "export", "--to", str(room.course / "grades.csv"), cwd=room.course)
    attempts["submitted"] = room.fails(mallory, "touch", str(room.course / "submitted" / alice.login / chapter / "x"))
    room.run(teacher, "-m", "course_tools", "feedback", "--assignment", chapter, cwd=room.course)
    room.run(teacher, "-m", "nbgrader", "release_feedback", chapter, cwd=room.course)
    room.run(alice, "-m", "nbgrader", "fetch_feedback", chapter, "--course", course_id)
    room.run(mallory, "-m", "nbgrader", "fetch_feedback", chapter, "--course", course_id,
             env={"JUPYTERHUB_USER": alice.login}, check=False)
    return {"collect": collected.stdout + collected.stderr, "table": table.stdout, "attempts": attempts,
            "export": exported.stdout + exported.stderr}


def _utc(seconds: float) -> str:
    """nbgrader's own timestamp format, in UTC."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(seconds)) + f".{int(seconds % 1 * 1e6):06d} UTC"


def _max_score(chapter: str) -> float:
    return float(sum(nbgrader_meta(c)["points"] for c in load(solution_path(chapter)).cells if nbgrader_meta(c).get("grade")))


def test_alice_is_graded_on_her_own_work(room, played):
    alice, chapter = room.learners["alice"], room.chapter
    table = played["table"]
    assert f"{_max_score(chapter):g}/{_max_score(chapter):g} graded" in table, table
    stamp = (room.course / "submitted" / alice.login / chapter / "timestamp.txt").read_text()
    assert "2099" not in stamp, "the future-dated forgery was collected"
    assert list((alice.home / chapter / "feedback").glob("*/*.html")), "alice got no feedback"


def test_every_forgery_in_alices_name_is_refused_and_shown(room, played):
    alice, mallory = room.learners["alice"], room.learners["mallory"]
    log, table = played["collect"], played["table"]
    assert f"belongs to {mallory.login}, not to {alice.login}" in log, log
    detail = [line for line in table.splitlines() if line.strip().startswith(f"{alice.login}/")]
    assert detail and "refused at collect" in detail[0] and mallory.login in detail[0], table


def test_symlinks_copy_nothing_of_the_instructors(room, played):
    mallory, chapter = room.learners["mallory"], room.chapter
    assert "is a symbolic link" in played["collect"]
    collected = room.course / "submitted" / mallory.login / chapter
    assert "2026-01-0" not in (collected / "timestamp.txt").read_text(), "a symlinked submission was collected"
    assert (collected / f"{chapter}.ipynb").read_bytes() != (room.course / "solutions" / chapter / f"{chapter}.ipynb").read_bytes()
    detail = [line for line in played["table"].splitlines() if line.strip().startswith(f"{mallory.login}/")]
    assert detail and detail[0].count("is a symbolic link") == 2, played["table"]
    assert "private cannot be read: Permission denied" in detail[0], played["table"]
    own = (collected / "timestamp.txt").read_text().strip()
    fetched = {p.parent.name for p in mallory.home.glob(f"{chapter}/feedback/*/*.html")}
    assert fetched <= {own}, f"mallory fetched feedback that is not on her own submission: {fetched}"


def test_a_submission_without_its_feedback_secret_is_refused_and_feedback_flows(room, played):
    assert "no submission_secret.txt" in played["collect"], played["collect"]
    assert list((room.learners["alice"].home / room.chapter / "feedback").glob("*/*.html")), "feedback broke"


def test_names_with_raw_bytes_are_shown_escaped_and_export_works(room, played):
    assert "\x1b" not in played["collect"] + played["table"] and "\r" not in played["table"], "a raw control byte"
    assert "\\xff\\x1b[2K\\x0dFORGED" in played["table"], played["table"]
    text = (room.course / "grades.csv").read_bytes().decode("utf-8")  # the export ran for the whole class
    assert "\\xff" in text and "\x1b" not in text, text


def test_thousands_of_empty_files_are_refused(room, played):
    assert "more than 500 files and folders" in played["collect"], played["collect"]
    assert len(list((room.course / "submitted" / room.learners["mallory"].login / room.chapter).iterdir())) < 10


def test_late_is_late_whatever_the_name_says(room, played):
    from nbgrader.utils import parse_utc

    mallory, chapter = room.learners["mallory"], room.chapter
    graded_as = parse_utc((room.course / "submitted" / mallory.login / chapter / "timestamp.txt").read_text())
    assert graded_as > parse_utc(played["attempts"]["due"]), "a folder made after the due date was taken as on time"
    detail = [line for line in played["table"].splitlines() if line.strip().startswith(f"{mallory.login}/")]
    assert detail and "re-dated at collect" in detail[0] and "graded as arriving then" in detail[0], played["table"]


def test_a_future_timestamp_is_refused(room, played):
    bob = room.learners["bob"]
    assert f"{FUTURE[:19]} UTC is in the future" in played["collect"]
    assert not (room.course / "submitted" / bob.login).exists()
    row = [line for line in played["table"].splitlines() if line.startswith(bob.login)]
    assert row and row[0].split()[1] == "refused", played["table"]


def test_the_course_cannot_be_taken_over_or_read(played):
    attempts = played["attempts"]
    for what in ("rename", "claim", "home", "cache", "course", "reference", "submitted"):
        assert "Permission denied" in attempts[what] or "Operation not permitted" in attempts[what], (what, attempts[what])


def test_collected_and_graded_work_is_never_writable_by_learners(room, played):
    for top in ("submitted", "autograded"):
        for path in (room.course / top).rglob("*"):
            mode = stat.S_IMODE(os.lstat(path).st_mode)
            assert not mode & 0o022, f"{path} is {mode:04o}: group or others may write"
            assert os.lstat(path).st_uid == room.instructor.uid, f"{path} is not the instructor's"


def test_secure_left_nothing_for_check_to_report(room, played):
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "course_tools", "classroom", "check", "--exchange", str(room.exchange),
                           "--instructor", room.instructor.login, "--course", f"{room.course_id}={room.course}",
                           "--learners", *(p.login for p in room.learners.values())], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no solution on the course paths is readable by a learner" in proc.stdout


def test_check_finds_a_solution_a_learner_can_read_on_the_course_paths(room, played):
    import subprocess
    import sys

    teacher, chapter = room.instructor, room.chapter
    released = room.exchange / room.course_id / "outbound" / chapter
    leak = released / "reference.ipynb"  # the instructor copies the source into the release by mistake
    opt = room.base / "opt-course"  # and a checkout of the course left where learners can read it
    room.run(teacher, "/bin/cp", str(room.course / "solutions" / chapter / f"{chapter}.ipynb"), str(leak))
    opt.mkdir(exist_ok=True)
    subprocess.run(["cp", "-r", str(room.course / "solutions"), str(opt)], check=True)
    subprocess.run(["chmod", "-R", "a+rX", str(opt)], check=True)
    try:
        proc = subprocess.run([sys.executable, "-m", "course_tools", "classroom", "check", "--exchange",
                               str(room.exchange), "--instructor", teacher.login, "--course",
                               f"{room.course_id}={room.course}", "--also", str(opt),
                               "--learners", *(p.login for p in room.learners.values())], capture_output=True, text=True)
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert f"{leak} is readable by" in proc.stdout and "hidden test or a reference answer" in proc.stdout, proc.stdout
        assert f"{opt}/solutions/{chapter}/{chapter}.ipynb is readable by" in proc.stdout, proc.stdout
        assert room.learners["mallory"].login in proc.stdout
    finally:
        leak.unlink()
        subprocess.run(["rm", "-rf", str(opt)], check=True)
