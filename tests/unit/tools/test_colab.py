"""Colab: a badge per chapter in each README (the Korean one opens ko/notebooks) and a first cell that installs the
helpers there, all generated from one address (pyproject.toml's [project.urls] Repository); with no address set,
no badge and no Colab cell ship (a placeholder link was a 404 for learners, issue 48). In-process; under a second,
but for the fork test, which rewrites a copy of solutions/."""

import re
import shutil
import subprocess
import sys
import types
from unittest import mock

import nbformat
import pytest

from support.layout import NOTEBOOKS, ROOT, chapters, load, solution_path
from course_tools.colab import (COLAB_TAG, NO_BADGES, READMES, badge_link, badges_block, colab_cells,
                                colab_requirements, repository, update)

FORK = "https://github.com/someone/fork"
RUNTIME, FLOOR = colab_requirements(ROOT)
SET = repository(ROOT)  # this repository's own setting: None until the course's address is set


def _with_address(tmp_path, address: str | None):
    """A copy of the course's READMEs, pyproject.toml and solutions/ whose Repository is ``address``."""
    for name in ("README.md", "README.ko.md"):
        shutil.copy(ROOT / name, tmp_path / name)
    text = re.sub(r"(?m)^\[project\.urls\]\nRepository = .*\n", "", (ROOT / "pyproject.toml").read_text())
    if address:
        text += f'\n[project.urls]\nRepository = "{address}"\n'
    (tmp_path / "pyproject.toml").write_text(text)
    shutil.copytree(ROOT / "solutions", tmp_path / "solutions")
    return tmp_path


def test_the_address_is_one_github_repository_and_a_bad_one_says_what_to_set(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n[project.urls]\nRepository = "git@host:x"\n')
    with pytest.raises(ValueError, match=r"\[project.urls\] Repository.*your fork's"):
        repository(tmp_path)
    (tmp_path / "pyproject.toml").write_text(f'[project]\nname = "x"\n[project.urls]\nRepository = "{FORK}"\n')
    assert repository(tmp_path) == (FORK, "someone", "fork")
    for unset in ('[project]\nname = "x"\n',
                  '[project]\nname = "x"\n[project.urls]\nRepository = "https://github.com/your-account/course"\n'):
        (tmp_path / "pyproject.toml").write_text(unset)
        assert repository(tmp_path) is None, unset


@pytest.mark.parametrize("name, folder", [("README.md", "notebooks"), ("README.ko.md", "ko/notebooks")])
def test_each_readme_has_the_badges_the_setting_gives_and_no_placeholder(name, folder):
    readme = (ROOT / name).read_text()
    assert "your-account" not in readme, f"{name} points learners at the placeholder repository"
    assert badges_block(ROOT, chapters(), name) in readme, f"{name}'s badges differ from the setting: run make release"
    links = re.findall(r"\((https://colab\.research\.google\.com/github/[^)]+)\)", readme)
    if SET is None:
        assert links == [] and NO_BADGES[name] in readme
    else:
        _, owner, repo = SET
        assert sorted(links) == sorted(badge_link(owner, repo, ch, folder) for ch in chapters())


@pytest.mark.parametrize("chapter", chapters())
def test_each_chapter_has_the_colab_cells_the_setting_gives(chapter):
    want = colab_cells(SET[0], RUNTIME, FLOOR) if SET else []
    for nb in (load(solution_path(chapter)), load(NOTEBOOKS / chapter / f"{chapter}.ipynb")):
        found = [c for c in nb.cells if COLAB_TAG in c.metadata.get("tags", [])]
        assert [c.source for c in found] == [c.source for c in want], chapter
        assert not any("your-account" in c.source for c in nb.cells)
        code = [c for c in nb.cells if c.cell_type == "code" and COLAB_TAG not in c.metadata.get("tags", [])]
        assert "set_seed(" in code[0].source


def _run_colab_cell(on_colab):
    calls = []
    namespace = {}
    fake = {"google.colab": types.ModuleType("google.colab")} if on_colab else {}
    with mock.patch.dict(sys.modules, fake), mock.patch.object(subprocess, "run", lambda *a, **k: calls.append(a)):
        if not on_colab:
            sys.modules.pop("google.colab", None)
        exec(colab_cells(FORK, RUNTIME, FLOOR)[1].source, namespace)
    return calls


def test_the_colab_cell_does_nothing_off_colab_and_installs_from_the_repository_on_colab(capsys):
    note = colab_cells(FORK, RUNTIME, FLOOR)[0].source
    assert "Validate" in note and "not available" in note
    assert _run_colab_cell(on_colab=False) == []
    # it runs before the Korean edition chooses its language: each line it prints is English, then Korean
    assert capsys.readouterr().out.strip().splitlines() == [
        "not on Colab: nothing to install (this environment has the helpers already)",
        "Colab이 아니므로 설치할 것이 없습니다(이 환경에는 helpers 패키지가 이미 있습니다)"]
    helpers_call, runtime_call = _run_colab_cell(on_colab=True)
    assert helpers_call[0] == [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", f"git+{FORK}"]
    assert runtime_call[0][:4] == [sys.executable, "-m", "pip", "install"] and "matplotlib>=3.7" in runtime_call[0]
    assert not any(r.startswith(("torch", "jupyterlab", "nbgrader")) for r in runtime_call[0][5:])  # Colab's own stay
    out = capsys.readouterr().out
    assert "Colab's torch is" in out and "Colab의 torch는" in out


def test_the_requirements_left_to_colab_are_torch_and_its_jupyter():
    assert f'"torch>={FLOOR}"' in (ROOT / "pyproject.toml").read_text() and any(r.startswith("matplotlib") for r in RUNTIME)
    assert not [r for r in RUNTIME if r.split(">")[0] in ("torch", "jupyterlab", "nbgrader")]


def test_a_fork_that_sets_its_address_gets_badges_and_cells_once_and_unsetting_removes_them(tmp_path):
    course = _with_address(tmp_path, FORK)
    changed = update(course, chapters())
    assert "github/someone/fork/blob/main/notebooks/00_start" in (course / "README.md").read_text()
    assert "github/someone/fork/blob/main/ko/notebooks/00_start" in (course / "README.ko.md").read_text()
    for chapter in chapters():
        nb = load(course / "solutions" / chapter / f"{chapter}.ipynb")
        cells = [c for c in nb.cells if COLAB_TAG in c.metadata.get("tags", [])]
        assert [c.source for c in cells] == [c.source for c in colab_cells(FORK, RUNTIME, FLOOR)], chapter
        assert nb.cells.index(cells[0]) == 1, "the cells go right after the title"
    assert len(changed) >= 2 and update(course, chapters()) == []
    (course / "pyproject.toml").write_text(re.sub(r"\[project\.urls\]\nRepository = .*\n", "",
                                                  (course / "pyproject.toml").read_text()))
    update(course, chapters())
    for name in READMES:
        assert "colab.research.google.com/github" not in (course / name).read_text() and NO_BADGES[name] in (
            course / name).read_text()
    for chapter in chapters():
        nb = load(course / "solutions" / chapter / f"{chapter}.ipynb")
        assert not [c for c in nb.cells if COLAB_TAG in c.metadata.get("tags", [])], chapter
    assert update(course, chapters()) == []
