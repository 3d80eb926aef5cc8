"""notebooks/ is exactly what nbgrader generates from solutions/, and goes on past a failing check.

That every released stub fails its checks is proved twice elsewhere, so it is not run a third time here:
tests/course/test_exercises.py runs each chapter blank (no grade cell may pass) and tests/e2e/test_roundtrip.py
grades the blank release with real nbgrader (it must score 0)."""

import filecmp

import pytest

from support.layout import NOTEBOOKS, chapters, load


def _files(folder):
    return sorted(p.relative_to(folder) for p in folder.rglob("*") if p.is_file() and ".ipynb_checkpoints" not in p.parts)


def test_every_chapter_is_released():
    assert chapters(), "solutions/ holds no chapter"
    assert sorted(p.name for p in NOTEBOOKS.iterdir() if p.is_dir()) == chapters(), (
        "notebooks/ and solutions/ hold different chapters: run `make release`"
    )


@pytest.mark.parametrize("chapter", chapters())
def test_notebooks_equal_a_fresh_release(released_course, chapter):
    fresh = released_course / "release" / chapter
    committed = NOTEBOOKS / chapter
    assert _files(fresh) == _files(committed), f"{chapter}: different files; run `make release` and commit notebooks/"
    for rel in _files(fresh):
        assert filecmp.cmp(fresh / rel, committed / rel, shallow=False), (
            f"notebooks/{chapter}/{rel} differs from a fresh release of solutions/: edit solutions/ only, "
            "then run `make release` and commit notebooks/"
        )


@pytest.mark.parametrize("chapter", chapters())
def test_learner_notebook_goes_on_past_a_failing_check(chapter):
    """Grade cells, solution cells and cells that run an exercise are tagged raises-exception for the learner
    (Run All then goes to the end with an exercise blank); no solution notebook carries the tag, so nbval
    still fails on any error there."""
    from support.layout import solution_path
    from course_tools.grading.release.tag_cells import RAISES_TAG, may_stop

    learner = load(NOTEBOOKS / chapter / f"{chapter}.ipynb")
    tagged = [RAISES_TAG in c.metadata.get("tags", []) for c in learner.cells]
    assert tagged == [may_stop(c) for c in learner.cells], f"{chapter}: run `make release`"
    assert any(tagged), f"{chapter}: no cell may stop?"
    assert not [c for c in load(solution_path(chapter)).cells if RAISES_TAG in c.metadata.get("tags", [])], (
        f"{chapter}: a solution notebook cell is tagged {RAISES_TAG}: nbval would no longer see its errors")


def test_a_committed_notebook_is_read_from_the_course_root_even_inside_the_repository():
    """The Korean course is the folder ko/ of this repository: its notebooks at HEAD are ko/notebooks/..., not the
    English notebooks/... that a path taken from the repository's root would name (release then refused to
    update untouched Korean notebooks as "edited")."""
    import subprocess

    from support.layout import ROOT
    from course_tools.grading.release.generate import _committed

    english, korean = ROOT / "notebooks/00_start/00_start.ipynb", ROOT / "ko/notebooks/00_start/00_start.ipynb"
    head = subprocess.run(["git", "show", "HEAD:ko/notebooks/00_start/00_start.ipynb"], cwd=ROOT, capture_output=True)
    assert head.returncode == 0, head.stderr  # CI and maintainers test a git checkout
    assert _committed(korean, ROOT / "ko") == head.stdout
    assert _committed(english, ROOT) != _committed(korean, ROOT / "ko")
