"""The nbgrader round trip in a throwaway course, graded by real `nbgrader autograde` with this repo's config:

- the reference solution scores full marks;
- the blank release scores 0;
- two "mistakes" submissions (every exercise answered by its first, then its second wrong submission
  from tests/submissions) lose exactly the points of the grade cells those submissions name, and
  nbgrader's cell-by-cell outcome equals the in-process runner's (tests/support/layout.py), which is what
  lets tests/course/test_exercises.py grade every other wrong submission without a kernel per submission.
"""

import shutil
import subprocess
import sys

from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook

ROOT_SUBMISSIONS = Path(__file__).resolve().parents[1] / "submissions"

from support.layout import chapters, grade_cells, load, nbgrader_meta, run_graded_cells, solution_path, submissions


MISTAKES = ("mistakes", "mistakes2")

#: Every callable of every loaded check module replaced by a no-op (issue 24's attack on 02_devices).
PATCH_CHECKS = """import sys
import helpers.checks
for _name, _module in list(sys.modules.items()):
    if _name.startswith("helpers.checks"):
        for _attr in dir(_module):
            if callable(getattr(_module, _attr)) and not _attr.startswith("__") and _attr != "CheckFailed":
                setattr(_module, _attr, lambda *a, **k: None)
"""
#: torch's comparisons always agree, and IPython shows no traceback (issue 24's attempt on 05).
PATCH_TORCH = """import torch
torch.testing.assert_close = lambda *a, **k: None
torch.allclose = torch.equal = lambda *a, **k: True
get_ipython().showtraceback = lambda *a, **k: None
"""
ALWAYS_EQUAL = """class Yes(int):
    def __eq__(self, other):
        return True
    __hash__ = int.__hash__

def count_parameters(model):
    return Yes(0)
"""
def _body(chapter: str, name: str) -> str:
    """A wrong submission's code, without its header lines (``# solution``, ``# fails``, ``# says``, why)."""
    lines = (ROOT_SUBMISSIONS / chapter / name).read_text().splitlines()
    while lines and lines[0].startswith("#"):
        lines.pop(0)
    return "\n".join(lines)


#: Issue 33's tricks, from inside the learner's function while a check calls it: swap a verdict's code (01),
#: call the check's own reference through a stashed default argument (03), point the sync counter's mode at
#: another counter (08, and 09's fast_step). Each falls back to the honest wrong answer when it is refused.
CODE_SWAP_01 = """import helpers.checks.ch01 as _ch01


def _quiet_verdicts():
    try:
        for _name in ("sync_verdict", "median_verdict", "untimed_warmup_verdict"):
            getattr(_ch01, _name).__code__ = (lambda *a, **k: None).__code__
    except Exception:
        pass
"""
STASHED_03 = """import helpers.checks.ch03 as _ch03


def training_memory(model, dtype, _reference=_ch03._expected_bytes):
    try:
        return _reference(model, dtype)
    except Exception:
        return _honest(model, dtype)
"""
COUNTER_OFF_08 = """from torch.utils._python_dispatch import _get_current_dispatch_mode_stack


def _counter_off():
    for mode in _get_current_dispatch_mode_stack():
        if hasattr(mode, "counter"):
            mode.counter = type(mode.counter)()  # count into a counter nobody reads
"""


def _tricked(chapter: str, name: str, function: str, prelude: str, call: str) -> str:
    """The honest wrong answer of ``name`` with ``call`` made first thing in ``function``'s body."""
    honest = _body(chapter, name)
    return prelude + "\n" + honest.replace(f"def {function}(", f"def _honest_{function}(", 1) + (
        f"\n\ndef {function}(*args, **kwargs):\n    {call}\n    return _honest_{function}(*args, **kwargs)\n")


#: Student "tamper": chapter -> (solution grade_id, a wrong answer with a trick, the same answer without it).
#: The trick may earn nothing: nbgrader must take at least the points the honest wrong answer loses in process.
TAMPERING = {
    "01_why_gpus": ("time-on-device", _tricked("01_why_gpus", "no_sync.py", "time_on_device", CODE_SWAP_01,
                                               "_quiet_verdicts()"), _body("01_why_gpus", "no_sync.py")),
    "03_memory": ("estimate-memory", STASHED_03 + "\n" + _body("03_memory", "estimate_fixed_four_bytes.py").replace(
        "def training_memory(", "def _honest(", 1), _body("03_memory", "estimate_fixed_four_bytes.py")),
    "08_speed": ("train-quietly", _tricked("08_speed", "item_per_step.py", "train_quietly", COUNTER_OFF_08,
                                           "_counter_off()"), _body("08_speed", "item_per_step.py")),
    "09_fast_step": ("fast-step", _tricked("09_fast_step", "item_per_step.py", "fast_step", COUNTER_OFF_08,
                                           "_counter_off()"), _body("09_fast_step", "item_per_step.py")),
    "00_start": ("count-parameters", ALWAYS_EQUAL, "def count_parameters(model):\n    return 0\n"),
    "02_devices": ("choose-device", PATCH_CHECKS + "import torch\n\ndef choose_device(requested=None):\n"
                   "    return torch.device('cpu')\n", "import torch\n\ndef choose_device(requested=None):\n"
                   "    return torch.device('cpu')\n"),
    "05_mixed_precision": ("amp-train-step", PATCH_TORCH + "\n".join(
        (ROOT_SUBMISSIONS / "05_mixed_precision" / "no_autocast.py").read_text().splitlines()[4:]),
        "\n".join((ROOT_SUBMISSIONS / "05_mixed_precision" / "no_autocast.py").read_text().splitlines()[4:])),
}


def mistakes_for(chapter, student="mistakes"):
    """The n-th wrong submission (by name) of each exercise of ``chapter``: grade_id -> Submission.

    ``mistakes`` takes the first of each exercise, ``mistakes2`` the second (or the first again
    where an exercise has only one).
    """
    wrong: dict[str, list] = {}
    for sub in submissions():
        if sub.chapter == chapter and sub.fails:
            wrong.setdefault(sub.solution, []).append(sub)
    n = MISTAKES.index(student)
    return {gid: subs[min(n, len(subs) - 1)] for gid, subs in wrong.items()}


def _mistakes_notebook(released_path, chapter, student):
    nb = nbformat.read(str(released_path), as_version=4)
    chosen = mistakes_for(chapter, student)
    for cell in nb.cells:
        sub = chosen.get(nbgrader_meta(cell).get("grade_id")) if nbgrader_meta(cell).get("solution") else None
        if sub is not None:
            cell.source = sub.source
    return nb


@pytest.fixture(scope="module")
def graded(released_course):
    """``graded(chapter)``: the course folder, once nbgrader has autograded that chapter's four students.

    Each chapter is graded on first use, so the chapters' tests can run on different workers.
    """
    done = set()

    def grade(chapter):
        if chapter not in done:
            _autograde(released_course, chapter)
            done.add(chapter)
        return released_course

    return grade


def _autograde(course, chapter):
    released = course / "release" / chapter / f"{chapter}.ipynb"
    for student in ("reference", "blank", *MISTAKES):
        (course / "submitted" / student / chapter).mkdir(parents=True, exist_ok=True)
    shutil.copy(solution_path(chapter), course / "submitted" / "reference" / chapter / f"{chapter}.ipynb")
    shutil.copy(released, course / "submitted" / "blank" / chapter / f"{chapter}.ipynb")
    for student in MISTAKES:
        nbformat.write(_mistakes_notebook(released, chapter, student),
                       str(course / "submitted" / student / chapter / f"{chapter}.ipynb"))
    if chapter in TAMPERING:
        grade_id, trick, _ = TAMPERING[chapter]
        nb = load(solution_path(chapter))  # the other exercises solved, as the in-process oracle has them
        next(c for c in nb.cells if nbgrader_meta(c).get("grade_id") == grade_id).source = trick
        (course / "submitted" / "tamper" / chapter).mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, str(course / "submitted" / "tamper" / chapter / f"{chapter}.ipynb"))
    proc = subprocess.run(
        [sys.executable, "-m", "nbgrader", "autograde", chapter, "--force", "--create", "--log-level=WARN",
         f"--CourseDirectory.root={course}"],
        cwd=course, capture_output=True, text=True,
    )
    assert proc.returncode == 0, f"autograde {chapter} failed:\n{proc.stdout}\n{proc.stderr}"


def _cell_scores(gb, chapter, student):
    submission = gb.find_submission(chapter, student)
    return {g.name: (g.score, g.max_score) for nb in submission.notebooks for g in nb.grades if g.cell_type == "code"}


def check_reference_scores_full_marks_and_blank_scores_zero(graded, chapter):
    maximum = sum(grade_cells(load(solution_path(chapter))).values())
    with Gradebook(f"sqlite:///{graded(chapter) / 'gradebook.db'}") as gb:
        reference = gb.find_submission(chapter, "reference")
        blank = gb.find_submission(chapter, "blank")
        assert reference.max_score == maximum
        failing = [g.name for nb in reference.notebooks for g in nb.grades if g.score != g.max_score]
        assert reference.score == maximum, f"{chapter}: the reference solution loses points in {failing}"
        assert blank.score == 0, f"{chapter}: the blank release scores {blank.score} of {maximum}"


def check_mistakes_lose_exactly_their_points_under_nbgrader_as_in_process(graded, chapter, student):
    chosen = mistakes_for(chapter, student)
    assert chosen, f"{chapter} has no wrong submission in tests/submissions/{chapter}"
    expected_failures = {gid for sub in chosen.values() for gid in sub.fails}
    with Gradebook(f"sqlite:///{graded(chapter) / 'gradebook.db'}") as gb:
        scores = _cell_scores(gb, chapter, student)
    lost = {gid for gid, (score, maximum) in scores.items() if score != maximum}
    assert lost == expected_failures, f"{chapter}: nbgrader took points from {sorted(lost)}, expected {sorted(expected_failures)}"
    assert all(scores[g][0] == 0 for g in lost), f"{chapter}: partial credit where a check failed: {scores}"
    in_process = run_graded_cells(load(solution_path(chapter)), {gid: sub.source for gid, sub in chosen.items()})
    assert {g for g, r in in_process.items() if not r.passed} == lost, (
        f"{chapter}: the in-process runner and nbgrader disagree on which checks fail"
    )


@pytest.mark.slow
@pytest.mark.parametrize("chapter", sorted(TAMPERING))
def test_tampering_earns_nothing_beyond_the_honest_wrong_answer(graded, chapter):
    """The tricks that earned points while checks ran in the kernel (issue 24), or from inside a checked
    function (issue 33), earn none now: the answer loses at least what the honest wrong answer loses."""
    grade_id, _, honest = TAMPERING[chapter]
    with Gradebook(f"sqlite:///{graded(chapter) / 'gradebook.db'}") as gb:
        scores = _cell_scores(gb, chapter, "tamper")
    lost = {gid for gid, (score, maximum) in scores.items() if score != maximum}
    in_process = run_graded_cells(load(solution_path(chapter)), {grade_id: honest})
    honest_lost = {g for g, r in in_process.items() if not r.passed}
    assert honest_lost, f"{chapter}: the honest wrong answer loses nothing, so this case proves nothing"
    assert lost >= honest_lost, f"{chapter}: tampering earned points: lost {sorted(lost)}, honest {sorted(honest_lost)}"


@pytest.mark.slow
@pytest.mark.parametrize("chapter", chapters())
def test_reference_scores_full_marks_and_blank_scores_zero(graded, chapter):
    check_reference_scores_full_marks_and_blank_scores_zero(graded, chapter)


@pytest.mark.slow
@pytest.mark.parametrize("student", MISTAKES)
@pytest.mark.parametrize("chapter", chapters())
def test_mistakes_lose_exactly_their_points_under_nbgrader_as_in_process(graded, chapter, student):
    check_mistakes_lose_exactly_their_points_under_nbgrader_as_in_process(graded, chapter, student)
