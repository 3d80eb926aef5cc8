"""Chapter 03's demonstrations say in words when the exercise they use is not right yet.

The demo cells are skipped while grading, so tests/test_exercises.py never runs them; here the
accumulation demo runs with wrong submissions from tests/submissions/03_memory and must print that
`grad-accumulation` is not right yet, never raise a raw torch.testing error.
"""

import contextlib
import io

import pytest

from course import load, solution_path, submissions


def _cell(nb, text):
    (source,) = [c.source for c in nb.cells if c.cell_type == "code" and text in c.source]
    return source


def _run_accumulation_demo(submission_source):
    nb = load(solution_path("03_memory"))
    opening = next(c for c in nb.cells if c.cell_type == "code" and "colab" not in c.metadata.get("tags", []))
    cells = [opening.source,
             _cell(nb, "def make_model("), submission_source, _cell(nb, "peak_big = mem.measure_peak(")]
    namespace, out = {}, io.StringIO()
    with contextlib.redirect_stdout(out):
        for source in cells:
            exec(compile(source, "<cell>", "exec"), namespace)  # noqa: S102 - the chapter's own cells
    return out.getvalue()


_WRONG = [s for s in submissions() if s.chapter == "03_memory" and s.solution == "grad-accumulation"
          and s.name in ("accumulation_zero_after_step", "accumulation_no_divide", "accumulation_zero_every_micro_batch")]


@pytest.mark.parametrize("sub", _WRONG, ids=lambda s: s.name)
def test_accumulation_demo_says_the_exercise_is_not_right_yet(sub):
    printed = _run_accumulation_demo(sub.source)
    assert "accumulate_gradients (exercise grad-accumulation) is not right yet" in printed
    assert "the same gradient" not in printed


def test_accumulation_demo_shows_the_same_gradient_for_the_reference():
    nb = load(solution_path("03_memory"))
    printed = _run_accumulation_demo(_cell(nb, "def accumulate_gradients("))
    assert "the same gradient" in printed and "not right yet" not in printed
