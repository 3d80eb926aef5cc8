"""Every exercise: the reference solution passes every check, and each wrong submission
in tests/submissions loses exactly the grade cells it should, with a message naming the mistake.

Runs the chapter's own cells (hidden tests included) in a worker process per chapter, skipping
demonstrations: the same code nbgrader runs, at a fraction of the cost of a kernel per submission.
A wrong submission runs only the grade cells that read a name its solution cell binds (or one bound by a
solution that reads such a name); the others see what the reference run saw. After every submission the
worker checks that torch's global state and every attribute a check may
patch are as before, so one submission can never change how the next one is graded.
The real nbgrader round trip (tests/e2e/test_roundtrip.py) covers the solution, the blank release and two
wrong submissions per exercise, and proves nbgrader and this runner agree.
"""

import functools

import pytest

from support.layout import NOTEBOOKS, chapters, grade_cells, load, nbgrader_meta, run_submissions, solution_path, submissions


@functools.lru_cache(maxsize=None)
def _notebook(chapter):
    return load(solution_path(chapter))


#: Chapters whose submissions only `make test-all` (CI) grades: marked slow, so `make test` (the maintainer's loop,
#: under 10 minutes) leaves them out. Each of chapter 06's starts two DDP ranks that import torch, about 8 s a
#: submission on 2 cores: its scope alone took 220 s of `make test`'s 11:54 (measured 2026-12-07).
SLOW_CHAPTERS = frozenset({"06_multi_gpu"})
#: (chapter, name) of the submissions this session runs; a chapter's grading run grades only those
_SELECTED: set[tuple[str, str]] = set()


@pytest.fixture(autouse=True, scope="module")
def _selected_submissions(request):
    """What ``-m`` and ``-k`` left of the submissions, read before any chapter is graded."""
    _SELECTED.update((item.callspec.params["sub"].chapter, item.callspec.params["sub"].name)
                     for item in request.session.items
                     if getattr(item, "callspec", None) is not None and "sub" in item.callspec.params)


def _submission_params():
    return [pytest.param(sub, id=f"{sub.chapter}/{sub.name}",
                         marks=[pytest.mark.slow] if sub.chapter in SLOW_CHAPTERS else [])
            for sub in submissions()]


@functools.lru_cache(maxsize=None)
def _graded(chapter):
    """Outcomes of the reference ("reference") and of each submission of ``chapter`` this session runs (by name)."""
    runs = {"reference": {}, "blank": _blank_solutions(chapter)}
    runs.update({sub.name: {sub.solution: sub.source} for sub in submissions()
                 if sub.chapter == chapter and (sub.chapter, sub.name) in _SELECTED})
    # a wrong submission runs only the grade cells that can see its change; the others are the reference's
    return run_submissions(_notebook(chapter), runs, only_reachable=True)


def _blank_solutions(chapter):
    """The learner's stubs (as released in notebooks/) for every solution cell: the chapter with nothing done."""
    released = load(NOTEBOOKS / chapter / f"{chapter}.ipynb")
    return {nbgrader_meta(c)["grade_id"]: c.source for c in released.cells if nbgrader_meta(c).get("solution")}


def check_blank_chapter_runs_to_the_end(chapter):
    """With every exercise blank, only grade cells and cells that run an exercise through `solved` raise (both
    tagged raises-exception in the learner's notebook, so Run All goes on); every grade cell fails."""
    from course_tools.grading.release.tag_cells import may_stop

    allowed = {next((ln for ln in c.source.splitlines() if ln.strip()), "")[:80]
               for c in _notebook(chapter).cells if may_stop(c)}
    result = _graded(chapter)["blank"]
    unexpected = [stop for stop in result.stops if stop.split(": ", 1)[0] not in allowed]
    assert not unexpected, f"{chapter}: with the exercises blank, these cells stop Run All: {unexpected}"
    assert not [g for g, r in result.cells.items() if r.passed], f"{chapter}: checks that pass with nothing written"


def check_reference_solution_passes_every_check(chapter):
    result = _graded(chapter)["reference"]
    assert set(result.cells) == set(grade_cells(_notebook(chapter)))
    failed = {gid: r.message for gid, r in result.cells.items() if not r.passed}
    assert not failed, f"the reference solution of {chapter} fails: {failed}"
    assert not result.leaks, f"the reference solution of {chapter} leaves global state changed: {result.leaks}"
    assert not result.stops, f"with the reference solution, cells of {chapter} raise: {result.stops}"


def check_submission_loses_exactly_its_points(sub):
    points = grade_cells(_notebook(sub.chapter))
    assert not sub.fails or sub.says, f"{sub.path.name}: a wrong submission needs '# says:', the words its failure must name"
    unknown = set(sub.fails) - set(points)
    assert not unknown, f"{sub.path.name}: '# fails:' names grade cells that do not exist: {unknown}"
    result = _graded(sub.chapter)[sub.name]
    assert "__unknown__" not in result.cells, f"{sub.path.name}: {result.cells.get('__unknown__')}"
    unreached = set(sub.fails) - set(result.cells)
    assert not unreached, (f"{sub.path.name}: {sorted(unreached)} must fail, but read no name its solution cell binds "
                           "(course.grade_cells_seeing), so they were not run: how does the change reach them?")
    failed = {gid for gid, r in result.cells.items() if not r.passed}
    assert failed == set(sub.fails), (
        f"{sub.path.name}: expected exactly {sorted(sub.fails)} to fail, got {sorted(failed)}: "
        + "; ".join(f"{g}: {result.cells[g].message}" for g in sorted(failed ^ set(sub.fails)))
    )
    for gid in sub.fails:
        assert sub.says.lower() in result.cells[gid].message.lower(), (
            f"{sub.path.name}: the failure of {gid} should name the mistake ({sub.says!r}); it said: {result.cells[gid].message}"
        )
    unexpected = [leak for leak in result.leaks if not sub.leaks or sub.leaks not in leak]
    assert not unexpected, (f"{sub.path.name}: after grading, global state is changed: {unexpected}. A check must "
                            "restore what it patches (and undo a learner's leak it detects)")


def test_every_exercise_has_two_wrong_submissions():
    """The real-nbgrader round trip grades two wrong submissions per exercise; each chapter keeps them here."""
    from support.layout import solution_ids

    wrong = {}
    for sub in submissions():
        if sub.fails:
            wrong.setdefault(sub.solution, set()).add(sub.name)
    short = {gid: sorted(wrong.get(gid, ())) for chapter in chapters() for gid in solution_ids(_notebook(chapter))
             if len(wrong.get(gid, ())) < 2}
    assert not short, f"exercises with fewer than two wrong submissions in tests/submissions: {short}"


@pytest.mark.parametrize("chapter", chapters())
def test_reference_solution_passes_every_check(chapter):
    check_reference_solution_passes_every_check(chapter)


@pytest.mark.parametrize("chapter", chapters())
def test_blank_chapter_runs_to_the_end(chapter):
    check_blank_chapter_runs_to_the_end(chapter)


@pytest.mark.parametrize("sub", _submission_params())
def test_submission_loses_exactly_its_points(sub):
    check_submission_loses_exactly_its_points(sub)


def test_a_change_reaches_the_grade_cells_that_read_it_and_those_of_exercises_built_on_it():
    from nbformat.v4 import new_code_cell, new_notebook

    from support.layout import grade_cells_seeing

    def cell(source, **meta):
        return new_code_cell(source, metadata={"nbgrader": meta})

    nb = new_notebook(cells=[
        cell("def a(x):\n    return x\n", solution=True, grade_id="a"),
        cell("check(a(1))\n", grade=True, grade_id="a-check"),
        cell("def b(x):\n    return a(x) + 1\n", solution=True, grade_id="b"),
        cell("check(b(1))\n", grade=True, grade_id="b-check"),
        cell("def c(x):\n    return 2 * x\n", solution=True, grade_id="c"),
        cell("check(c(1))\n", grade=True, grade_id="c-check"),
    ])
    assert grade_cells_seeing(nb, {"a": "def a(x):\n    return 0\n"}) == ["a-check", "b-check"]  # b calls a
    assert grade_cells_seeing(nb, {"b": "def b(x):\n    return 0\n"}) == ["b-check"]
    assert grade_cells_seeing(nb, {"c": "c = 3\n"}) == ["c-check"]  # bound another way, still reached
    assert grade_cells_seeing(nb, {}) is None  # the reference runs every cell
    assert grade_cells_seeing(nb, {"a": "", "b": "", "c": ""}) is None  # so does the blank chapter
