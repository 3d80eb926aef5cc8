"""The rules every chapter follows (ARCHITECTURE.md, docs/STYLE.md), checked so a new chapter cannot drift."""

import ast
import builtins
import re

import pytest

from support.layout import chapters, grade_cells, load, nbgrader_meta, solution_path, solution_ids
from course_tools.grading.demo_cells import is_demo_cell

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
    """The Colab install cell (tag `colab`, course_tools/colab.py) may come before it."""
    first = next(c for c in ALL[chapter].cells if c.cell_type == "code" and "colab" not in c.metadata.get("tags", []))
    for needed in ("import torch", "set_seed(", "pick_device("):
        assert needed in first.source, f"{chapter}: the first code cell must contain {needed!r}"


@pytest.mark.parametrize("chapter", chapters())
def test_no_magics_outside_demo_cells(chapter):
    """Exercise cells run in-process in tests/course/test_exercises.py, where IPython magics do not exist."""
    for cell in ALL[chapter].cells:
        if cell.cell_type == "code" and not is_demo_cell(cell):
            bad = [line for line in cell.source.splitlines() if re.match(r"^\s*[%!]", line)]
            assert not bad, f"{chapter}: magic outside a demo cell: {bad}"


@pytest.mark.parametrize("chapter", chapters())
def test_graded_cells_are_not_demo_cells(chapter):
    for cell in ALL[chapter].cells:
        if nbgrader_meta(cell).get("grade") or nbgrader_meta(cell).get("solution"):
            assert "demo" not in cell.metadata.get("tags", []), f"{chapter}: a graded cell is tagged demo"


MAX_VISIBLE_LINES = 12


def visible_code_lines(source: str) -> list[str]:
    """The code lines of a grade cell's visible part: all but the hidden block (the lines after it count
    too), without the docstring, blank lines and comments."""
    visible = re.sub(r"### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS\n?", "", source, flags=re.S)
    body = ast.parse(visible).body
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant):
        visible = "\n".join(visible.splitlines()[body[0].end_lineno:])
    return [line for line in visible.splitlines() if line.strip() and not line.strip().startswith("#")]


def free_names(source: str) -> set[str]:
    """Names a cell reads without binding them itself (imports, assignments, defs, loop targets, ...)."""
    tree = ast.parse(source)
    bound, read = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
            if not isinstance(node, ast.ClassDef):
                a = node.args
                bound.update(x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg] if x)
        elif isinstance(node, ast.Lambda):
            a = node.args
            bound.update(x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg] if x)
        elif isinstance(node, ast.Name):
            (bound if isinstance(node.ctx, (ast.Store, ast.Del)) else read).add(node.id)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
        elif isinstance(node, ast.alias):
            pass
    return read - bound - set(dir(builtins))


def exercise_names(nb) -> set[str]:
    """What the solution cells define: the functions and classes under test."""
    names = set()
    for cell in nb.cells:
        if nbgrader_meta(cell).get("solution") and cell.cell_type == "code":
            for node in ast.parse(cell.source).body:
                if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                    names.add(node.name)
                elif isinstance(node, ast.Assign):
                    names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


GRADE_CELLS = [(chapter, cell) for chapter, nb in ALL.items() for cell in nb.cells
               if nbgrader_meta(cell).get("grade") and cell.cell_type == "code"]


@pytest.mark.parametrize("chapter, cell", GRADE_CELLS, ids=[nbgrader_meta(c)["grade_id"] for _, c in GRADE_CELLS])
def test_grade_cell_is_short(chapter, cell):
    """A learner can read a grade cell: its visible part is at most 12 code lines; verdicts live in
    helpers/checks/<chapter>.py."""
    lines = visible_code_lines(cell.source)
    assert len(lines) <= MAX_VISIBLE_LINES, (
        f"{chapter}/{nbgrader_meta(cell)['grade_id']}: {len(lines)} visible code lines (at most "
        f"{MAX_VISIBLE_LINES}); move the verdict into helpers/checks/")


@pytest.mark.parametrize("chapter, cell", GRADE_CELLS, ids=[nbgrader_meta(c)["grade_id"] for _, c in GRADE_CELLS])
def test_grade_cell_is_self_contained(chapter, cell):
    """A grade cell imports what it uses, so a learner's cell that defines its own `check` (or anything else)
    changes nothing it runs. It may read only the exercise's own names (what the solution cells define)."""
    stray = free_names(cell.source) - exercise_names(ALL[chapter])
    assert not stray, (f"{chapter}/{nbgrader_meta(cell)['grade_id']} uses {sorted(stray)} without importing "
                       "or defining them in the cell")


def test_the_self_contained_rule_can_fail():
    assert free_names("check(x)\n") == {"check", "x"}
    assert free_names("from helpers.checks import check\nimport torch\ncheck(torch.ones(1))\n") == set()
    assert free_names("for i in range(3):\n    y = i\nprint(y)\n") == set()
    assert len(visible_code_lines('"""Check that x."""\n' + "a = 1\n" * 13 + "### BEGIN HIDDEN TESTS\nb=2\n### END HIDDEN TESTS\n")) == 13
    hidden = "### BEGIN HIDDEN TESTS\nb = 2\n### END HIDDEN TESTS\n"
    assert len(visible_code_lines('"""Check that x."""\n' + "a = 1\n" * 11 + hidden + "passed()\n")) == 12


def bound_names(source: str) -> set[str]:
    """Names a cell binds at its top level (assignments, defs, imports, loop targets)."""
    bound = set()
    for stmt in ast.parse(source).body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(stmt.name)
            continue
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                bound.add(node.id)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                bound.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return bound


def python_cells(nb):
    """(index, cell) of the code cells that are Python (not a %%writefile or a shell line)."""
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "code" and not re.match(r"\s*(%%|!)", cell.source):
            try:
                ast.parse(cell.source)
            except SyntaxError:  # a line magic inside: IPython syntax, not Python
                continue
            yield index, cell


def bare_exercise_cells(nb) -> list:
    """Cells other than grade and solution cells that use an exercise without ``helpers.checks.solved`` (which
    stops the cell, tagged to let Run All go on) or ``solved_or`` (which falls back to the course's version)."""
    from course_tools.grading.release.tag_cells import may_stop

    names = exercise_names(nb)
    return [(i, sorted(free_names(c.source) & names)) for i, c in python_cells(nb)
            if not nbgrader_meta(c).get("grade") and not nbgrader_meta(c).get("solution")
            and free_names(c.source) & names and not may_stop(c) and "solved_or(" not in c.source]


def run_all_stops(nb) -> list[str]:
    """Later cells that read what only a cell running an exercise binds (so they fail when it is blank)."""
    from course_tools.grading.release.tag_cells import may_stop

    cells = list(python_cells(nb))
    surely_bound: set[str] = set()
    problems = []
    for pos, (i, cell) in enumerate(cells):
        if may_stop(cell) and not nbgrader_meta(cell).get("grade") and not nbgrader_meta(cell).get("solution"):
            risky = bound_names(cell.source) - surely_bound
            for j, later in cells[pos + 1:]:
                if read := free_names(later.source) & risky:
                    problems.append(f"cell {j} reads {sorted(read)} that only cell {i} (which runs an exercise) binds")
        elif not may_stop(cell):
            surely_bound |= bound_names(cell.source)
    return problems


@pytest.mark.parametrize("chapter", chapters())
def test_a_cell_that_runs_an_exercise_goes_through_solved(chapter):
    """So a blank exercise stops it with "`name` is not written yet", it is tagged to let Run All go on
    (course_tools.grading.release.tag_cells.TagCellsThatMayStop), and no other cell needs the exercise."""
    bare = bare_exercise_cells(ALL[chapter])
    assert not bare, f"{chapter}: cells that run an exercise without helpers.checks.solved: {bare}"


@pytest.mark.parametrize("chapter", chapters())
def test_run_all_goes_on_past_a_blank_exercise(chapter):
    """What a cell that may stop binds (a result of the learner's exercise) is read by no later cell, unless an
    earlier cell that cannot stop binds it too: with an exercise blank, Run All still reaches the end."""
    problems = run_all_stops(ALL[chapter])
    assert not problems, f"{chapter}: " + "; ".join(problems)


def test_the_run_all_rules_can_fail():
    import nbformat

    solution = nbformat.v4.new_code_cell("def f():\n    ### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION\n",
                                         metadata={"nbgrader": {"solution": True, "grade_id": "f"}})
    nb = nbformat.v4.new_notebook(cells=[solution, nbformat.v4.new_code_cell("y = f()"),
                                         nbformat.v4.new_code_cell("x = solved(f)"),
                                         nbformat.v4.new_code_cell("print(x, y)")])
    assert bare_exercise_cells(nb) == [(1, ["f"])]
    assert run_all_stops(nb) == ["cell 3 reads ['x'] that only cell 2 (which runs an exercise) binds"]
