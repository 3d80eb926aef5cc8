"""A grade cell decided apart (course_tools/grading/engine/apart_worker.py): the pieces, without nbgrader.

The whole path, through real nbgrader and the sandbox, with the tampering submissions, is in
tests/e2e/test_grading.py (tests/support/matrix.py, ``TAMPERING``).
"""

from __future__ import annotations

import sys

import cloudpickle
import pytest
import torch

from course_tools.grading.engine.apart_worker import Guard, VerdictWorker, export_code, free_names, prepare


def test_free_names_are_what_the_cell_reads_and_never_assigns():
    source = (
        "import torch\nfrom helpers.checks import ch02, passed\n\nmodel = make_model(3)\n"
        "for size in sizes:\n    ch02.check_x(choose_device, model, [n for n in range(size)])\n"
        "def local(arg):\n    return arg + offset\npassed(str(len(sizes)))\n"
    )
    assert sorted(free_names(source)) == ["choose_device", "make_model", "offset", "sizes"]


def test_the_export_hands_over_the_definitions_by_value(tmp_path):
    namespace: dict = {"__name__": "__main__"}
    exec("SCALE = 3\ndef triple(x):\n    return SCALE * x\n", namespace)
    path = str(tmp_path / "export.pkl")  # tmp_path: two suites at once on one machine never share the file
    exec(export_code(path, ["triple", "missing"]), namespace)
    with open(path, "rb") as fh:
        handed = cloudpickle.loads(fh.read())
    assert list(handed) == ["triple"] and handed["triple"](2) == 6
    assert "__course_export" not in namespace


def test_an_object_that_cannot_be_handed_over_is_named(tmp_path):
    import threading

    namespace: dict = {"__name__": "__main__", "lock": threading.Lock()}
    with pytest.raises(RuntimeError, match="could not take `lock` out of your notebook"):
        exec(export_code(str(tmp_path / "export.pkl"), ["lock"]), namespace)


def test_the_guard_names_a_replaced_function_a_removed_one_and_a_stand_in_module():
    prepare()
    import helpers.checks.core as core

    guard = Guard()
    saved_allclose, saved_fail, saved_module = torch.allclose, core._fail, sys.modules["helpers.checks.core"]
    try:
        torch.allclose = lambda *a, **k: True
        del core._fail
        sys.modules["helpers.checks.core"] = type(sys)("stand-in")
        found = guard.changes()
    finally:
        torch.allclose, core._fail, sys.modules["helpers.checks.core"] = saved_allclose, saved_fail, saved_module
    assert {"torch.allclose", "helpers.checks.core._fail", "sys.modules['helpers.checks.core']"} <= set(found)
    assert guard.changes() == []


def test_honest_work_leaves_the_guard_silent():
    prepare()
    guard = Guard()
    model = torch.nn.Linear(4, 2)
    torch.optim.SGD(model.parameters(), lr=0.1).step()  # imports what an optimizer step needs
    torch.backends.cudnn.benchmark = not torch.backends.cudnn.benchmark  # a flag is a learner's to set
    torch.backends.cudnn.benchmark = not torch.backends.cudnn.benchmark
    torch.manual_seed(0)
    torch.utils.data.DataLoader(list(range(4)), batch_size=2)

    assert guard.changes() == []


@pytest.fixture(scope="module")
def worker():
    """A worker without the sandbox (tests/e2e/test_grading.py runs it in the sandbox)."""
    w = VerdictWorker(sandbox=False, course_root="/nonexistent").start()
    yield w
    w.close()


def _blob(**names) -> bytes:
    return cloudpickle.dumps(names)


def test_a_worker_runs_a_cell_on_the_definitions_and_reports_output_and_errors(worker):
    ok = worker.judge("print(square(3))\n", _blob(square=lambda x: x * x), cap=10_000)
    assert ok["stdout"] == "9\n" and ok["result"] == {"error": None, "tampered": []}
    bad = worker.judge("assert square(3) == 9, 'wrong'\n", _blob(square=lambda x: 0), cap=10_000)
    assert bad["result"]["error"]["ename"] == "AssertionError" and bad["result"]["error"]["evalue"] == "wrong"


def test_what_a_cell_changed_does_not_reach_the_next_one(worker):
    patch = "import torch\ntorch.allclose = lambda *a, **k: True\n"
    first = worker.judge(patch, _blob(), cap=10_000)
    assert "torch.allclose" in first["result"]["tampered"]
    second = worker.judge("import torch\nassert not torch.allclose(torch.zeros(1), torch.ones(1))\n", _blob(), cap=10_000)
    assert second["result"] == {"error": None, "tampered": []}


def test_a_cell_that_ends_its_process_has_no_result(worker):
    report = worker.judge("import os\nos._exit(0)\n", _blob(), cap=10_000)
    assert report["result"] is None and report["exit"] == 0
    report = worker.judge("raise SystemExit(0)\n", _blob(), cap=10_000)
    assert report["result"]["error"]["ename"] == "SystemExit"


def test_output_past_the_cap_is_cut(worker):
    report = worker.judge("print('x' * 5000)\n", _blob(), cap=100)
    assert len(report["stdout"]) == 100 and report["cut"]


def test_stopping_a_cell_kills_it_and_what_it_started_but_not_the_worker(worker):
    import threading

    threading.Timer(3, worker.stop_leftovers).start()
    report = worker.judge("import subprocess, sys\nsubprocess.Popen([sys.executable, '-c', 'while True: pass'])\n"
                          "while True:\n    pass\n", _blob(), cap=10_000)
    assert report["signal"] == 9 and report["result"] is None
    living = [p for p in worker._tree() if p.status() != "zombie"]  # the worker collects the dead before its next cell
    assert worker.alive() and len(living) == 1  # the worker alone: the cell and its child are gone
    assert worker.judge("print('still serving')\n", _blob(), cap=10_000)["stdout"] == "still serving\n"


def test_a_function_that_reaches_torch_backends_is_handed_over(tmp_path):
    """``torch.backends`` is a ModuleType subclass in sys.modules, which plain cloudpickle cannot pickle."""
    namespace: dict = {"__name__": "__main__"}
    exec("import torch\ndef mps_here():\n    return torch.backends.mps.is_available()\n", namespace)
    path = str(tmp_path / "export.pkl")
    exec(export_code(path, ["mps_here"]), namespace)
    with open(path, "rb") as fh:
        assert cloudpickle.loads(fh.read())["mps_here"]() is torch.backends.mps.is_available()


def test_without_fork_grade_cells_stay_in_the_kernel_and_the_grader_says_so(monkeypatch, caplog):
    from nbformat.v4 import new_code_cell

    from course_tools.grading.engine import execute

    ran = []
    monkeypatch.setattr(execute, "supported", lambda: False)
    monkeypatch.setattr(execute.LimitedExecute, "in_kernel", lambda self, cell, res, i: ran.append(i) or (cell, res))
    monkeypatch.setattr(execute.LimitedExecute, "judge_apart", lambda *a: pytest.fail("no worker without fork"))
    ex = execute.LimitedExecute()
    grade = new_code_cell("pass", metadata={"nbgrader": {"grade": True, "grade_id": "g", "points": 1}})
    with caplog.at_level("WARNING"):
        ex.preprocess_cell(grade, {}, 0)
        ex.preprocess_cell(grade, {}, 1)
    assert ran == [0, 1]
    assert sum("no os.fork on this system" in r.getMessage() for r in caplog.records) == 1


def test_the_grader_reads_an_export_only_from_a_regular_file_and_never_past_its_limit(tmp_path):
    """apart.read_export, the grader's side of a grade cell's export (tests/e2e/test_engine_limits.py: the same
    attacks made by learner code in a sandboxed kernel)."""
    import os

    from course_tools.grading.engine.apart import ExportRefused, read_export

    (tmp_path / "ok").write_bytes(b"x" * 1000)
    assert read_export(tmp_path, "ok", 1000) == b"x" * 1000
    with open(tmp_path / "sparse", "wb") as fh:
        fh.truncate(1 << 40)  # a terabyte that uses no disk
    with pytest.raises(ExportRefused, match="1,024.0 GiB, more than the 1.0 MiB"):
        read_export(tmp_path, "sparse", 2**20)
    os.mkfifo(tmp_path / "fifo")  # no writer: a blocking open would hang the grader
    with pytest.raises(ExportRefused, match="not a regular file"):
        read_export(tmp_path, "fifo", 2**20)
    (tmp_path / "secret").write_text("the solutions")
    (tmp_path / "link").symlink_to(tmp_path / "secret")
    with pytest.raises(ExportRefused, match="symbolic link"):
        read_export(tmp_path, "link", 2**20)
    (tmp_path / "folder-link").symlink_to(tmp_path)
    with pytest.raises(ExportRefused, match="folder it was written in was replaced"):
        read_export(tmp_path / "folder-link", "ok", 2**20)
    with pytest.raises(FileNotFoundError):
        read_export(tmp_path, "missing", 2**20)
