"""Where grading's results live (course_tools/grading/outcome_store.py, run_record.py): two grading processes
at once lose no row, a regrade replaces a row, and the engine's run record reads back as it was written."""

import json
import multiprocessing
from pathlib import Path

import pytest

from course_tools.grading.outcome_store import OutcomeStore
from course_tools.grading.run_record import CellRun, RunRecord, read_record, write_record


def _row(student: str, assignment: str = "01_why_gpus", status: str = "graded") -> dict:
    return {"student": student, "assignment": assignment, "status": status, "score": 1.0, "max_score": 1.0,
            "detail": ""}


def _save_many(folder: str, prefix: str, n: int) -> None:
    store = OutcomeStore(Path(folder))
    for i in range(n):
        store.save(_row(f"{prefix}{i:03d}"))


def test_two_processes_saving_at_once_lose_no_row(tmp_path):
    """The JSON file this replaced was rewritten whole under a lock one process held: rows were lost."""
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_save_many, args=(str(tmp_path), prefix, 60)) for prefix in ("a", "b", "c")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    rows = OutcomeStore(tmp_path).load()
    assert len(rows) == 180 and rows["b042/01_why_gpus"]["student"] == "b042"


def test_grading_again_replaces_the_row(tmp_path):
    store = OutcomeStore(tmp_path)
    store.save(_row("ana", status="wrong"))
    store.save(_row("ana", status="graded"))
    assert list(store.load().values()) == [_row("ana", status="graded")]


def test_nothing_stored_reads_as_empty_and_writes_nothing(tmp_path):
    assert OutcomeStore(tmp_path / "none").load() == {}
    assert not (tmp_path / "none").exists()


def test_outcomes_of_an_older_version_are_read_in_once(tmp_path):
    old = {"ana/01": _row("ana", "01"), "bo/01": _row("bo", "01", status="wrong")}
    (tmp_path / "outcomes.json").write_text(json.dumps(old))
    store = OutcomeStore(tmp_path)
    assert store.load() == old
    assert not (tmp_path / "outcomes.json").exists() and (tmp_path / "outcomes.json.imported").exists()
    store.save(_row("bo", "01"))
    assert store.load()["bo/01"]["status"] == "graded"


def test_a_run_record_reads_back_as_written(tmp_path):
    record = RunRecord("01_why_gpus", [CellRun(3, "`g`", "g", "cpu", "CellTimeoutError", "past its limit", 20.4, True),
                                       CellRun(4, "cell 5", cpu_s=0.1)], restarts=1, finished=True)
    path = tmp_path / "runs" / "ana__01" / "01_why_gpus.json"
    write_record(path, record)
    assert read_record(path) == record
    assert [p.name for p in path.parent.iterdir()] == ["01_why_gpus.json"]  # no temporary file left


@pytest.mark.parametrize("text", ["", "{not json", json.dumps({"version": 0, "notebook": "x"})])
def test_a_missing_broken_or_older_record_reads_as_none(tmp_path, text):
    path = tmp_path / "r.json"
    if text:
        path.write_text(text)
    assert read_record(path) is None


def test_a_kind_of_stop_outside_the_words_is_refused():
    with pytest.raises(ValueError, match="unknown kind of stop 'slow'"):
        CellRun(0, "cell 1", stop="slow")


def test_every_kind_of_stop_sets_the_status_the_table_promises():
    """status.classify reads the record's kinds of stop (not error names in outputs)."""
    from course_tools.grading.class_level.status import Evidence, classify

    expected = {"": "graded", "cpu": "timed out", "stall": "timed out", "wall": "timed out",
                "interrupt_ignored": "timed out", "kernel_died": "crashed", "memory": "crashed",
                "tampered": "tampered"}
    from course_tools.grading.outcome_words import STOPS

    assert set(expected) == set(STOPS)
    for stop, status in expected.items():
        ev = Evidence(exit_code=0, score=2.0, max_score=2.0, cells=[CellRun(1, "`g`", "g", stop)])
        got = classify("ana", "01", ev)
        assert got.status == status, (stop, got)
        assert got.load_sensitive == (stop == "stall")
    cut = classify("ana", "01", Evidence(exit_code=0, score=2.0, max_score=2.0,
                                         cells=[CellRun(1, "`g`", "g", output_cut=True)]))
    assert cut.status == "graded" and "output cut at the cap in `g`" in cut.detail
