"""The rules every chapter follows (DESIGN.md, STYLE.md), checked so a new chapter cannot drift."""

import re

import pytest

from course import chapters, grade_cells, load, nbgrader_meta, solution_path, solution_ids
from helpers.grading.preprocessors import is_demo_cell

ALL = {chapter: load(solution_path(chapter)) for chapter in chapters()}


def test_grade_ids_are_kebab_case_and_unique_across_the_course():
    seen = {}
    for chapter, nb in ALL.items():
        for cell in nb.cells:
            gid = nbgrader_meta(cell).get("grade_id")
            if gid is None:
                continue
            assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", gid), f"{chapter}: grade_id {gid!r} is not kebab-case"
            assert gid not in seen, f"grade_id {gid!r} is used in {seen[gid]} and {chapter}"
            seen[gid] = chapter


@pytest.mark.parametrize("chapter", chapters())
def test_notebook_is_stored_clean(chapter):
    nb = ALL[chapter]
    assert nb.metadata.get("kernelspec", {}).get("name") == "python3"
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert not cell.outputs and cell.execution_count is None, f"{chapter}: outputs are stored; clear them"


@pytest.mark.parametrize("chapter", chapters())
def test_exercises_have_contract_stub_and_checks(chapter):
    nb = ALL[chapter]
    for cell in nb.cells:
        meta = nbgrader_meta(cell)
        if meta.get("solution"):
            assert "### BEGIN SOLUTION" in cell.source and "### END SOLUTION" in cell.source, meta["grade_id"]
            assert '"""' in cell.source, f"{meta['grade_id']}: the solution cell needs a docstring stating the contract"
        if meta.get("grade"):
            assert cell.source.lstrip().startswith('"""Check that'), f"{meta['grade_id']}: open with \"\"\"Check that ...\"\"\""
            assert meta.get("points", 0) > 0 and meta.get("locked"), meta["grade_id"]
            assert "assert " not in cell.source.replace("assert_close", ""), (
                f"{meta['grade_id']}: use helpers.checks, whose messages say what to fix, not bare assert"
            )
    assert solution_ids(nb) or chapter == "00_start", f"{chapter} has no exercise"
    assert grade_cells(nb), f"{chapter} has no graded check"


@pytest.mark.parametrize("chapter", chapters())
def test_first_code_cell_is_the_common_opening(chapter):
    first = next(c for c in ALL[chapter].cells if c.cell_type == "code")
    for needed in ("import torch", "set_seed(", "pick_device("):
        assert needed in first.source, f"{chapter}: the first code cell must contain {needed!r}"


@pytest.mark.parametrize("chapter", chapters())
def test_no_magics_outside_demo_cells(chapter):
    """Exercise cells run in-process in tests/test_exercises.py, where IPython magics do not exist."""
    for cell in ALL[chapter].cells:
        if cell.cell_type == "code" and not is_demo_cell(cell):
            bad = [line for line in cell.source.splitlines() if re.match(r"^\s*[%!]", line)]
            assert not bad, f"{chapter}: magic outside a demo cell: {bad}"


@pytest.mark.parametrize("chapter", chapters())
def test_graded_cells_are_not_demo_cells(chapter):
    for cell in ALL[chapter].cells:
        if nbgrader_meta(cell).get("grade") or nbgrader_meta(cell).get("solution"):
            assert "demo" not in cell.metadata.get("tags", []), f"{chapter}: a graded cell is tagged demo"
