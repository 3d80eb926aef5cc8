"""Limits the instructor sets on what learner code leaves for the grader and writes in its sandbox.

Each test runs one small notebook through the engine (``LimitedExecute``, in this process, with the sandbox on, as
``nbgrader autograde`` runs it): learner cells that attack, grade cells after them.

- ``c.GradingLimits.export_mb``: the file the kernel hands over a grade cell's definitions in lies in the learner's
  working folder. Learner code makes it a sparse terabyte, a 64 MiB file, a FIFO, or a link to a host file the
  sandbox does not show: that grade cell gets a clear error, the next one is graded, and the grader's own memory
  (traced while the notebook runs) stays far below the file.
- ``c.GradingLimits.scratch_mb``: ``/tmp`` and ``/dev/shm`` are tmpfs mounts of that size (ENOSPC past it), and
  no file may grow past it (RLIMIT_FSIZE: EFBIG), in the working folder too; grading goes on after.
"""

from __future__ import annotations

import tracemalloc

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook
from traitlets.config import Config

from course_tools.grading.engine.execute import LimitedExecute

pytestmark = pytest.mark.slow

SECRET = "SECRET-ANSWER-42"
SQUARE = "def square(x):\n    return x * x\n"

#: Learner code: the kernel's ``open`` hands the grader's export file one attack per grade cell, in order.
SWAP = '''import builtins, os, threading
_real_open = builtins.open
_plans = {plans!r}

class _Swap:
    def __init__(self, path, plan):
        self.path, self.plan = path, plan
    def __enter__(self):
        return self
    def write(self, data):
        return len(data)
    def __exit__(self, *exc):
        if self.plan == "terabyte":
            os.truncate(self.path, 1 << 40)  # sparse: no disk used, a terabyte to whoever reads it whole
        elif self.plan == "huge":
            os.truncate(self.path, 64 << 20)
        elif self.plan == "fifo":
            os.unlink(self.path)
            os.mkfifo(self.path)
            def feed():
                try:
                    with _real_open(self.path, "wb") as fh:
                        fh.write(b"x")
                except OSError:
                    pass
            threading.Thread(target=feed, daemon=True).start()
        elif self.plan == "symlink":
            os.unlink(self.path)
            os.symlink({secret!r}, self.path)  # a host file the sandbox does not show

def _open(file, mode="r", *args, **kwargs):
    if ".grader-export-" in str(file) and _plans:
        _real_open(file, "wb").close()
        return _Swap(file, _plans.pop(0))
    return _real_open(file, mode, *args, **kwargs)

open = builtins.open = _open  # IPython puts an `open` of its own in the notebook's globals
'''


def _grade_cell(source: str, gid: str):
    return new_code_cell(source, metadata={"nbgrader": {"grade": True, "grade_id": gid, "points": 1, "solution": False,
                                                        "locked": True, "schema_version": 3}})


def _run(tmp_path, cells, **limits):
    """The notebook of ``cells`` graded by the engine in the sandbox; its cells and the grader's peak traced memory."""
    root = tmp_path / "course"
    (root / "submitted").mkdir(parents=True)
    cfg = Config()
    cfg.CourseDirectory.root = str(root)
    cfg.GradingLimits.sandbox = True
    for key, value in limits.items():
        setattr(cfg.GradingLimits, key, value)
    ex = LimitedExecute(config=cfg)
    nb = new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    tracemalloc.start()
    try:
        out, _ = ex.preprocess(nb, {"metadata": {"path": str(root / "submitted")}})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return out.cells, peak


def _errors(cell) -> str:
    return "\n".join(f"{o.get('ename')}: {o.get('evalue')}" for o in cell.outputs if o.get("output_type") == "error")


PLANS = ["terabyte", "huge", "fifo", "symlink"]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """Four grade cells whose export the learner's code swaps, then an honest one; export_mb=1, no file cap (so the
    kernel can make the terabyte and only the grader's read limit stands between it and the grader)."""
    tmp_path = tmp_path_factory.mktemp("export")
    secret = tmp_path / "course" / "solutions-secret.txt"
    secret.parent.mkdir(parents=True)
    secret.write_text(SECRET)
    cells = [new_code_cell(SWAP.format(plans=PLANS, secret=str(secret)) + SQUARE)]
    cells += [_grade_cell("assert square(3) == 9\nprint('checked')\n", f"check-{plan}") for plan in PLANS]
    cells += [_grade_cell("assert square(4) == 16\nprint('honest checked')\n", "check-honest")]
    cells, peak = _run(tmp_path, cells, export_mb=1, scratch_mb=0)
    return dict(zip(PLANS + ["honest"], cells[1:])), peak


@pytest.mark.parametrize("plan, why", [
    ("terabyte", "1,024.0 GiB, more than the 1.0 MiB the grader reads"),
    ("huge", "64.0 MiB, more than the 1.0 MiB the grader reads"),
    ("fifo", "not a regular file"),
    ("symlink", "replaced by a symbolic link"),
])
def test_an_export_the_learner_swapped_costs_that_check_only_with_a_clear_error(exported, plan, why):
    cells, _ = exported
    error = _errors(cells[plan])
    assert "the grader did not read back the definitions this check uses" in error and why in error, error
    assert "c.GradingLimits.export_mb is 1 MiB" in error and "this check scores 0" in error
    assert SECRET not in str(cells[plan].outputs)
    assert "checked" not in str([o for o in cells[plan].outputs if o.get("output_type") == "stream"])


def test_after_a_swapped_export_the_next_check_is_graded_and_the_grader_stayed_small(exported):
    cells, peak = exported
    honest = cells["honest"]
    assert not _errors(honest) and "honest checked" in str(honest.outputs), honest.outputs
    # the grader read at most export_mb + 1 byte of any of them: not the 64 MiB file, not the terabyte
    assert peak < 32 * 2**20, f"the grader's traced memory peaked at {peak / 2**20:.0f} MiB"


@pytest.fixture(scope="module")
def scratch_filled(tmp_path_factory):
    """Cells that fill /tmp and /dev/shm with small files and write one big file in the working folder, past a
    scratch_mb of 8, in the kernel and (from checks) in the verdict worker; cells and checks after them."""
    tmp_path = tmp_path_factory.mktemp("scratch")
    fill = ("for i in range(6):\n    with open(f'{folder}/part{{i}}', 'wb') as fh:\n"
            "        fh.write(b'x' * (2 << 20))\n")
    cells = [
        new_code_cell(SQUARE),
        new_code_cell(fill.format(folder="/tmp")),
        new_code_cell(fill.format(folder="/dev/shm")),
        new_code_cell("with open('big.bin', 'wb') as fh:\n    fh.write(b'x' * (16 << 20))\n"),
        new_code_cell("import os\nopen('sparse.bin', 'wb').close()\nos.truncate('sparse.bin', 1 << 40)\n"),
        new_code_cell("import os\nprint('still running', os.path.getsize('big.bin'), os.environ['TMPDIR'])\n"),
        # the checks call the learner's functions in the verdict worker's sandbox: the same limits hold there
        new_code_cell("def spill():\n    with open('spill.bin', 'wb') as fh:\n        fh.write(b'x' * (16 << 20))\n\n"
                      "def fill_tmp():\n" + "\n".join("    " + line for line in fill.format(folder="/tmp").splitlines())
                      + "\n"),
        _grade_cell("spill()\n", "check-spill"),
        _grade_cell("assert square(5) == 25\nprint('checked after the scratch filled')\n", "check-after"),
        _grade_cell("fill_tmp()\n", "check-fill-tmp"),
        # the worker's /tmp is full now (the learner's files stay there): a check's verdict still arrives
        _grade_cell("assert square(5) == 26, 'wrong on purpose'\n", "check-wrong-after-fill"),
    ]
    cells, _ = _run(tmp_path, cells, scratch_mb=8)
    return cells


@pytest.mark.parametrize("index, where, message", [
    (1, "/tmp", "No space left on device"),
    (2, "/dev/shm", "No space left on device"),
    (3, "the working folder", "File too large"),
    (4, "the working folder (a sparse file)", "File too large"),
    (7, "the worker's working folder, from a check", "File too large"),
    (9, "the worker's /tmp, from a check", "No space left on device"),
])
def test_writing_past_the_scratch_limit_fails_in_the_learners_cell(scratch_filled, index, where, message):
    error = _errors(scratch_filled[index])
    assert "OSError" in error and message in error, f"{where}: {error or scratch_filled[index].outputs}"


def test_after_the_scratch_filled_grading_goes_on(scratch_filled):
    after, check, wrong = scratch_filled[5], scratch_filled[8], scratch_filled[10]
    assert not _errors(after) and f"still running {8 << 20} /tmp" in str(after.outputs), after.outputs
    assert not _errors(check) and "checked after the scratch filled" in str(check.outputs), check.outputs
    assert "AssertionError: wrong on purpose" in _errors(wrong), wrong.outputs
