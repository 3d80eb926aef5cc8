"""Every exercise: the reference solution passes every check, and each wrong submission
in tests/submissions loses exactly the grade cells it should, with a message naming the mistake.

Runs the chapter's own cells (hidden tests included) in-process, skipping demonstrations:
the same code nbgrader runs, at a fraction of the cost of a kernel per submission.
The real nbgrader round trip (tests/test_roundtrip.py) covers the solution and the blank release.
"""

import functools

import pytest

from course import chapters, grade_cells, load, run_graded_cells, solution_path, submissions


@functools.lru_cache(maxsize=None)
def _notebook(chapter):
    return load(solution_path(chapter))


@pytest.mark.parametrize("chapter", chapters())
def test_reference_solution_passes_every_check(chapter):
    results = run_graded_cells(_notebook(chapter))
    assert set(results) == set(grade_cells(_notebook(chapter)))
    failed = {gid: r.message for gid, r in results.items() if not r.passed}
    assert not failed, f"the reference solution of {chapter} fails: {failed}"


@pytest.mark.parametrize("sub", submissions(), ids=lambda s: f"{s.chapter}/{s.name}")
def test_submission_loses_exactly_its_points(sub):
    nb = _notebook(sub.chapter)
    points = grade_cells(nb)
    assert not sub.fails or sub.says, f"{sub.path.name}: a wrong submission needs '# says:', the words its failure must name"
    unknown = set(sub.fails) - set(points)
    assert not unknown, f"{sub.path.name}: '# fails:' names grade cells that do not exist: {unknown}"
    results = run_graded_cells(nb, {sub.solution: sub.source})
    failed = {gid for gid, r in results.items() if not r.passed}
    assert failed == set(sub.fails), (
        f"{sub.path.name}: expected exactly {sorted(sub.fails)} to fail, got {sorted(failed)}: "
        + "; ".join(f"{g}: {results[g].message}" for g in sorted(failed ^ set(sub.fails)))
    )
    lost = sum(points[g] for g in failed)
    assert lost == sum(points[g] for g in sub.fails)
    for gid in sub.fails:
        assert sub.says.lower() in results[gid].message.lower(), (
            f"{sub.path.name}: the failure of {gid} should name the mistake ({sub.says!r}); it said: {results[gid].message}"
        )
