"""What collect refuses and how it copies (course_tools/grading/class_level/collect.py), on files this test makes.

Run as any user: the owner rules use the test's own login as the learner, and (as root) a file given to
``nobody``. tests/e2e/test_classroom.py runs the same attacks with real Unix users through nbgrader's commands.
"""

from __future__ import annotations

import os
import stat
from datetime import datetime

import pytest

from conftest import ROOT_SKIP_REASON
from course_tools.grading.class_level.collect import (Checked, Refusal, Refused, check_submission, copy_own_tree,
                                                      load_refusals, save_refusals, submission_time)

ME = __import__("pwd").getpwuid(os.getuid()).pw_name
NOW = datetime(2026, 12, 4, 12, 0, 0)
STAMP = "2026-12-04 11:00:00.000000 UTC"


def submission(tmp_path, stamp: str = STAMP, written: str | None = None):
    folder = tmp_path / f"{ME}+02_devices+{stamp}"
    folder.mkdir()
    (folder / "02_devices.ipynb").write_text("{}")
    (folder / "timestamp.txt").write_text(stamp if written is None else written)
    (folder / "submission_secret.txt").write_text("f00d" * 32)
    return folder


def refusal(folder, stamp: str = STAMP, student: str = ME) -> str:
    with pytest.raises(Refused) as err:
        check_submission(str(folder), student, stamp, now=NOW)
    return str(err.value)


def test_an_honest_submission_passes(tmp_path):
    check_submission(str(submission(tmp_path)), ME, STAMP, now=NOW)


def test_a_symlinked_notebook_is_refused(tmp_path):
    folder = submission(tmp_path)
    secret = tmp_path / "reference.ipynb"
    secret.write_text("the instructor's")
    (folder / "02_devices.ipynb").unlink()
    (folder / "02_devices.ipynb").symlink_to(secret)
    assert "02_devices.ipynb is a symbolic link" in refusal(folder)


def test_a_symlinked_submission_folder_is_refused(tmp_path):
    real = submission(tmp_path)
    link = tmp_path / "link"
    link.symlink_to(real)
    assert "is a symbolic link" in refusal(link)


def test_a_hard_link_is_refused(tmp_path):
    folder = submission(tmp_path)
    os.link(folder / "02_devices.ipynb", tmp_path / "another-name")
    assert "hard link (2 names" in refusal(folder)


def test_a_fifo_is_refused(tmp_path):
    folder = submission(tmp_path)
    os.mkfifo(folder / "pipe")
    assert "not a regular file or a folder" in refusal(folder)


def test_a_future_timestamp_is_refused(tmp_path):
    later = "2099-01-01 00:00:00.000000 UTC"
    assert "in the future" in refusal(submission(tmp_path, later), later)


def test_timestamp_txt_must_be_the_folders(tmp_path):
    folder = submission(tmp_path, written="2026-12-04 10:00:00.000000 UTC")
    assert "is not the folder's timestamp" in refusal(folder)


def test_a_timestamp_that_is_no_time_is_refused(tmp_path):
    folder = submission(tmp_path)
    assert "is not a time" in refusal(folder, "yesterday-ish!")


def test_a_submission_without_timestamp_txt_is_refused(tmp_path):
    folder = submission(tmp_path)
    (folder / "timestamp.txt").unlink()
    assert "no timestamp.txt" in refusal(folder)


def test_a_name_that_is_nobodys_login_is_refused(tmp_path):
    assert "no user on this machine is called" in refusal(submission(tmp_path), student="no-such-login-x9")


@pytest.mark.skipif(os.geteuid() != 0, reason=ROOT_SKIP_REASON)
def test_a_file_of_another_user_is_refused(tmp_path):
    folder = submission(tmp_path)
    os.chown(folder / "02_devices.ipynb", 65534, 65534)
    assert "belongs to" in refusal(folder) and f"not to {ME}" in refusal(folder)


def test_the_copy_takes_regular_files_with_private_modes(tmp_path):
    folder = submission(tmp_path)
    (folder / "data").mkdir()
    (folder / "data" / "x.csv").write_text("1,2")
    (folder / ".ipynb_checkpoints").mkdir()
    os.chmod(folder / "02_devices.ipynb", 0o777)
    dest = tmp_path / "submitted"
    copy_own_tree(str(folder), str(dest), uid=os.getuid(), student=ME, exclude=[".ipynb_checkpoints"])
    assert (dest / "data" / "x.csv").read_text() == "1,2"
    assert not (dest / ".ipynb_checkpoints").exists()
    assert stat.S_IMODE(os.stat(dest / "02_devices.ipynb").st_mode) == 0o640
    assert stat.S_IMODE(os.stat(dest / "data").st_mode) == 0o750


def test_a_link_found_while_copying_copies_nothing(tmp_path):
    """What changed after the check (a file swapped for a symlink) is refused on the opened file; dest removed."""
    folder = submission(tmp_path)
    (folder / "zz.ipynb").symlink_to(tmp_path / "elsewhere")
    dest = tmp_path / "submitted"
    with pytest.raises(Refused, match="zz.ipynb is a symbolic link"):
        copy_own_tree(str(folder), str(dest), uid=os.getuid(), student=ME)
    assert not dest.exists()


def test_the_copy_keeps_nbgraders_size_limits(tmp_path):
    folder = submission(tmp_path)
    (folder / "big.bin").write_bytes(b"x" * 5000)
    dest = tmp_path / "submitted"
    copy_own_tree(str(folder), str(dest), uid=None, student=ME, max_file_kb=2)
    assert not (dest / "big.bin").exists() and (dest / "02_devices.ipynb").exists()
    with pytest.raises(Refused, match="max_dir_size"):
        copy_own_tree(str(folder), str(tmp_path / "again"), uid=None, student=ME, max_dir_kb=1)


def test_refusals_are_kept_one_per_folder(tmp_path):
    first = Refusal("alice", "02_devices", "alice+02_devices+x", "a symbolic link", "now")
    save_refusals(tmp_path, [first])
    save_refusals(tmp_path, [Refusal("alice", "02_devices", "alice+02_devices+x", "in the future", "later")])
    assert [r["reason"] for r in load_refusals(tmp_path)] == ["in the future"]


@pytest.mark.skipif(os.geteuid() != 0, reason=ROOT_SKIP_REASON)
def test_a_hub_that_runs_everyone_as_jovyan_is_told_to_use_a_service_exchange(tmp_path, monkeypatch):
    import course_tools.grading.class_level.collect as collect

    folder = submission(tmp_path)
    os.chown(folder / "02_devices.ipynb", 65534, 65534)
    monkeypatch.setattr(collect, "owner_name", lambda uid: "jovyan" if uid == 65534 else ME)
    assert "use a service exchange" in refusal(folder)


def test_folders_nested_too_deep_are_refused_not_a_crash(tmp_path):
    from course_tools.grading.class_level.collect import MAX_DEPTH

    folder = submission(tmp_path)
    deep = folder.joinpath(*["d"] * (MAX_DEPTH + 1))
    deep.mkdir(parents=True)
    assert f"more than {MAX_DEPTH} deep" in refusal(folder)
    with pytest.raises(Refused, match="deep"):
        copy_own_tree(str(folder), str(tmp_path / "copy"), uid=None, student=ME)


def test_a_new_collect_of_an_assignment_replaces_its_old_refusals(tmp_path):
    save_refusals(tmp_path, [Refusal("alice", "02_devices", "alice+02_devices+a", "a symbolic link", "t1"),
                             Refusal("bob", "02_devices", "bob+02_devices+b", "in the future", "t1"),
                             Refusal("bob", "03_memory", "bob+03_memory+c", "in the future", "t1")])
    save_refusals(tmp_path, [], "02_devices", "bob")  # bob's folder was removed; alice's was not looked at
    assert sorted(r["folder"] for r in load_refusals(tmp_path)) == ["alice+02_devices+a", "bob+03_memory+c"]
    save_refusals(tmp_path, [], "02_devices")
    assert [r["folder"] for r in load_refusals(tmp_path)] == ["bob+03_memory+c"]


def test_a_submission_without_its_feedback_secret_is_refused(tmp_path):
    folder = submission(tmp_path)
    (folder / "submission_secret.txt").unlink()
    assert "no submission_secret.txt" in refusal(folder)


def _returns_within(seconds: float, call) -> object:
    """``call()``'s result, failing (not hanging) if it blocks: a FIFO opened the wrong way never returns."""
    import threading

    out = {}
    worker = threading.Thread(target=lambda: out.setdefault("value", _outcome(call)), daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), "blocked: collect would stall the whole class here"
    return out["value"]


def _outcome(call):
    try:
        return call()
    except Refused as err:
        return err


def test_timestamp_txt_swapped_for_a_link_to_a_fifo_after_the_check_blocks_nothing(tmp_path):
    from course_tools.grading.class_level.collect import _read_small

    folder = submission(tmp_path)
    os.mkfifo(tmp_path / "pipe")
    (folder / "timestamp.txt").unlink()
    (folder / "timestamp.txt").symlink_to(tmp_path / "pipe")  # what a learner swaps in between the walk and the read
    assert "cannot be opened" in str(_returns_within(10, lambda: _read_small(str(folder), "timestamp.txt", None, ME)))
    (folder / "timestamp.txt").unlink()
    os.mkfifo(folder / "timestamp.txt")  # the FIFO itself
    assert "not a regular file" in str(_returns_within(10, lambda: _read_small(str(folder), "timestamp.txt", None, ME)))


def test_more_entries_than_the_limit_are_refused_however_small(tmp_path):
    folder = submission(tmp_path)
    for n in range(30):
        (folder / f"empty-{n}").touch()
    check_submission(str(folder), ME, STAMP, now=NOW, max_entries=40)
    with pytest.raises(Refused, match="more than 20 files and folders"):
        check_submission(str(folder), ME, STAMP, now=NOW, max_entries=20)


def test_a_folder_made_after_the_due_date_but_named_before_it_is_late(tmp_path):
    from datetime import timedelta, timezone

    now = datetime.now(timezone.utc).replace(tzinfo=None)
    stamp = (now - timedelta(minutes=10)).strftime("%Y-%m-%d %H:%M:%S.%f UTC")
    checked = check_submission(str(submission(tmp_path, stamp)), ME, stamp)  # made now, named 10 minutes ago
    assert checked.arrived >= now - timedelta(seconds=5) > checked.claimed
    due = now - timedelta(minutes=5)
    assert submission_time(checked, due) == checked.arrived > due, "back-dated past the due date, still on time"


def test_the_time_graded_is_the_names_unless_the_exchange_saw_it_later():
    at = datetime(2026, 12, 4, 12, 0, 0)
    second = timedelta_s = __import__("datetime").timedelta(seconds=1)
    honest = Checked(at, at + 3 * second)  # nbgrader names the folder, then copies for a few seconds
    assert submission_time(honest, None) == at
    assert submission_time(honest, at + 10 * second) == at  # arrived before the due date
    assert submission_time(honest, at + 2 * second) == at + 3 * second  # finished arriving after it: late is late
    backdated = Checked(at, at + 600 * timedelta_s)
    assert submission_time(backdated, None) == at + 600 * second  # named ten minutes before it arrived


def test_names_a_learner_chose_are_shown_escaped_and_export_safely(tmp_path):
    raw = "mallory+02_devices+2026\udcff\x1b[2K\rok\u202e"
    save_refusals(tmp_path, [Refusal("mallory\x07", "02_devices", raw, "a symbolic link", "now")])
    (shown,) = load_refusals(tmp_path)
    assert shown["folder"] == "mallory+02_devices+2026\\xff\\x1b[2K\\x0dok\\u202e" and shown["student"] == "mallory\\x07"
    assert shown["kind"] == "refused"
    for value in shown.values():
        value.encode("utf-8")  # a CSV or a terminal takes it whole
        assert value.isprintable(), value
