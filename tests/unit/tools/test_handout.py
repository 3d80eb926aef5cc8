"""The student edition (`make handout OUT=<dir>`): what a learner needs, nothing more, and it works.

One edition is built per module (about a second); the install test adds about 10 s (pip from the zip,
then one chapter's opening cell and one grade cell run from outside the repository).
"""

import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile

import nbformat
import pytest

from support.layout import ROOT, chapters, load, nbgrader_meta, solution_path
from course_tools.handout import FILES, FORBIDDEN, HandoutError, build, forbidden_paths
from course_tools.grading.hidden import HIDDEN_RE, SOLUTION_RE, block_lines, scan, secret_lines


@pytest.fixture(scope="module")
def edition(tmp_path_factory):
    return build(ROOT, tmp_path_factory.mktemp("handout") / "gpu-course")


def test_the_edition_holds_the_notebooks_the_checks_and_its_own_setup(edition):
    folder = edition.folder
    for chapter in chapters():
        assert (folder / "notebooks" / chapter / f"{chapter}.ipynb").is_file(), chapter
        assert (folder / "ko" / "notebooks" / chapter / f"{chapter}.ipynb").is_file(), f"{chapter}, 한국어판"
    assert "COURSE_LANG=ko" in (folder / "README.ko.md").read_text() and not (folder / "ko" / "solutions").exists()
    assert (folder / ".jupyter" / "korean" / "labconfig" / "default_setting_overrides.json").is_file()
    shipped = {p.relative_to(folder / "helpers") for p in (folder / "helpers").rglob("*.py")}
    assert shipped == {p.relative_to(ROOT / "helpers") for p in (ROOT / "helpers").rglob("*.py")}, "helpers/ ships whole"
    assert not (folder / "course_tools").exists()
    if (ROOT / "results").is_dir():
        assert sorted(p.name for p in (folder / "results").rglob("*")) == sorted(p.name for p in (ROOT / "results").rglob("*"))
    readme = (folder / "README.md").read_text()
    assert "make lab" in readme and "make env" in readme and "00_start" in readme
    makefile = (folder / "Makefile").read_text()
    assert makefile == (ROOT / "learner.mk").read_text() and "notebooks/00_start/00_start.ipynb" in makefile
    with zipfile.ZipFile(edition.archive) as z:
        zipped = sorted(n.split("/", 1)[1] for n in z.namelist())
    assert zipped == sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def test_make_lab_there_opens_the_learner_view_without_the_assignments_list(edition):
    import json

    page = json.loads((edition.folder / ".jupyter/learner/labconfig/page_config.json").read_text())["disabledExtensions"]
    for plugin in ("create-assignment", "formgrader", "course-list", "assignment-list"):
        assert page[f"@jupyter/nbgrader:{plugin}"] is True, plugin  # no exchange there: learners hand in via the LMS
    assert page["@jupyterlab/apputils-extension:announcements"] is True
    makefile = (edition.folder / "Makefile").read_text()
    assert 'LEARNER_VIEW := $(abspath .jupyter/learner)' in makefile and 'JUPYTER_CONFIG_PATH="$(LEARNER_VIEW)' in makefile


def test_nothing_instructor_only_ships(edition):
    assert forbidden_paths(edition.folder) == []
    with zipfile.ZipFile(edition.archive) as z:
        assert not [n for n in z.namelist() if set(n.split("/")) & FORBIDDEN]
    for name in ("solutions", "tests", ".git", "gradebook.db", "submitted", "autograded", "nbgrader_config.py"):
        assert not (edition.folder / name).exists(), name


def test_no_line_of_any_hidden_test_or_answer_is_anywhere_in_it(edition):
    secrets = secret_lines(ROOT)
    hidden = {ln for ch in chapters() for c in load(solution_path(ch)).cells for ln in block_lines(c.source, HIDDEN_RE)}
    assert len([s for s in secrets if s in hidden]) >= 20, "the scan would be searching for almost nothing"
    assert scan(edition.folder, secrets) == []
    assert scan(edition.archive, secrets) == []
    assert edition.secrets == len(secrets)


def test_the_scan_finds_a_planted_hidden_line_in_a_notebook_and_in_the_zip(edition, tmp_path):
    """Not vacuous: one hidden line of 02_devices, typed into a markdown cell of a copy, is found, also zipped."""
    line = next(ln for c in load(solution_path("02_devices")).cells for ln in block_lines(c.source, HIDDEN_RE)
                if ln in secret_lines(ROOT))
    copy = tmp_path / "copy"
    shutil.copytree(edition.folder, copy)
    path = copy / "notebooks" / "00_start" / "00_start.ipynb"
    nb = nbformat.read(str(path), as_version=4)
    nb.cells.append(nbformat.v4.new_markdown_cell(f"a note\n\n    {line}  # copied from somewhere\n"))
    nbformat.write(nb, str(path))
    found = scan(copy, secret_lines(ROOT))
    assert [(f.where, f.line) for f in found] == [("notebooks/00_start/00_start.ipynb", line)]
    with zipfile.ZipFile(tmp_path / "planted.zip", "w") as z:
        z.write(path, "gpu-course/notebooks/00_start/00_start.ipynb")
    assert [f.where for f in scan(tmp_path / "planted.zip", secret_lines(ROOT))] == [
        "planted.zip!gpu-course/notebooks/00_start/00_start.ipynb"]


def _tiny_course(root, notebook_line):
    """A course of one chapter whose released notebook holds ``notebook_line``."""
    for source, _ in FILES:
        (root / source).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / source, root / source)
    (root / "helpers").mkdir()
    (root / "helpers" / "__init__.py").write_text("")
    for folder, source in (("solutions", "x = 1\n### BEGIN HIDDEN TESTS\ncheck_answer(x, expected=42)\n"
                                         "### END HIDDEN TESTS\n"), ("notebooks", f"x = 1\n{notebook_line}\n")):
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)])
        (root / folder / "00_x").mkdir(parents=True)
        nbformat.write(nb, str(root / folder / "00_x" / "00_x.ipynb"))


def test_a_leaking_release_writes_no_edition(tmp_path):
    course, out = tmp_path / "course", tmp_path / "out" / "edition"
    course.mkdir()
    _tiny_course(course, "print('hello')")
    assert build(course, out).files > 0  # the same course without the leak builds
    shutil.rmtree(tmp_path / "out")
    shutil.rmtree(course)
    course.mkdir()
    _tiny_course(course, "check_answer(x, expected=42)")
    with pytest.raises(HandoutError, match=r"check_answer\(x, expected=42\).*nothing was written"):
        build(course, out)
    assert not out.exists() and not (tmp_path / "out" / "edition.zip").exists()
    assert not [p for p in (tmp_path / "out").iterdir()], "the scratch folder was left behind"


def test_a_folder_that_is_not_an_edition_is_never_replaced(tmp_path, edition):
    (tmp_path / "thesis.tex").write_text("three years of work")
    with pytest.raises(HandoutError, match="not an earlier student edition"):
        build(ROOT, tmp_path)
    assert (tmp_path / "thesis.tex").read_text() == "three years of work"
    with pytest.raises(HandoutError, match="inside a folder the edition is made from"):
        build(ROOT, ROOT / "notebooks" / "edition")


def test_the_secret_rule_skips_short_lines_and_lines_every_learner_is_given():
    secrets = set(secret_lines(ROOT))
    given = {ln.strip() for ch in chapters() for c in load(ROOT / "notebooks" / ch / f"{ch}.ipynb").cells
             for ln in c.source.splitlines()}
    assert all(len(s) >= 8 for s in secrets) and not secrets & given
    answers = {ln for ch in chapters() for c in load(solution_path(ch)).cells for ln in block_lines(c.source, SOLUTION_RE)}
    assert secrets & answers, "answer lines are searched for too"


def test_its_setup_files_are_the_repositorys_own(edition):
    """Nothing is generated: pyproject.toml ships unchanged, learner.mk is its Makefile, edition/ its README."""
    for source, name in FILES:
        assert (edition.folder / name).read_bytes() == (ROOT / source).read_bytes(), name
    project = tomllib.loads((edition.folder / "pyproject.toml").read_text())["project"]
    assert "scripts" not in project, "a console script would point into course_tools/, which the edition lacks"


def _chapter_table(readme: str) -> str:
    return re.search(r"^## The chapters\n.*?(?=^## |\Z)", readme, flags=re.S | re.M).group(0).strip()


def test_the_editions_readme_lists_the_chapters_the_courses_readme_lists():
    """edition/README.md is written by hand for a learner without the repository; its chapter table must be the
    course README's, word for word (edit both together)."""
    assert _chapter_table((ROOT / "edition" / "README.md").read_text()) == _chapter_table((ROOT / "README.md").read_text())


@pytest.mark.slow
def test_the_edition_installs_and_a_chapter_runs_outside_the_repository(edition, tmp_path):
    """pip installs helpers from the zip (non-editable, into a bare folder); 00_start's opening cell, the
    reference answer and a released grade cell run there; every helpers module imports there; asked for an
    instructor command, `python -m helpers` says it is `python -m course_tools`, in the full repository."""
    site, work = tmp_path / "site", tmp_path / "work"
    work.mkdir()
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "-q",
                          "--target", str(site), str(edition.archive)], capture_output=True, text=True, timeout=300)
    assert pip.returncode == 0, pip.stderr
    answer = next(c.source for c in load(solution_path("00_start")).cells if nbgrader_meta(c).get("solution"))
    cells = [c for c in load(edition.folder / "notebooks" / "00_start" / "00_start.ipynb").cells if c.cell_type == "code"]
    opening = [c.source for c in cells[: next(i for i, c in enumerate(cells) if "set_seed(" in c.source) + 1]]
    grade = next(c.source for c in cells if nbgrader_meta(c).get("grade"))
    script = work / "run.py"
    script.write_text(
        "import helpers, importlib, importlib.util, pkgutil\n"
        f"assert helpers.__file__.startswith({str(site)!r}), helpers.__file__\n"
        "assert importlib.util.find_spec('course_tools') is None\n"
        "for m in pkgutil.walk_packages(helpers.__path__, 'helpers.'):\n"
        "    importlib.import_module(m.name)  # every module imports with only what the edition ships\n"
        + "".join(f"exec({source!r})\n" for source in [*opening, answer, grade]))
    # -S: no .pth files, so not the editable install of this repository that the venv holds (its finder would
    # find course_tools here); the venv's packages by path instead. A learner's machine has no such finder.
    packages = next(p for p in sys.path if p.endswith("site-packages"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), packages]), "MPLBACKEND": "Agg"}
    run = subprocess.run([sys.executable, "-S", str(script)], cwd=work, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and "all checks passed" in run.stdout, run.stdout + run.stderr
    grading = subprocess.run([sys.executable, "-S", "-m", "helpers", "grade"], cwd=work, env=env, capture_output=True,
                             text=True, timeout=60)
    assert grading.returncode == 2 and "python -m course_tools" in grading.stdout, grading.stdout + grading.stderr
