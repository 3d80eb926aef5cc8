"""Colab: a badge per chapter in each README (the Korean one opens ko/notebooks) and a first cell that installs the
helpers there, all generated from one address (pyproject.toml's [project.urls] Repository). In-process; under a
second."""

import re
import shutil
import subprocess
import sys
import types
from unittest import mock

import nbformat
import pytest

from support.layout import NOTEBOOKS, ROOT, chapters, load, solution_path
from course_tools.colab import (COLAB_TAG, READMES, badge_link, badges_block, colab_cells, colab_requirements,
                                   repository, update)

ADDRESS, OWNER, REPO = repository(ROOT)
RUNTIME, FLOOR = colab_requirements(ROOT)


def test_the_address_is_one_github_repository_and_a_bad_one_says_what_to_set(tmp_path):
    assert ADDRESS == f"https://github.com/{OWNER}/{REPO}"
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n[project.urls]\nRepository = "git@host:x"\n')
    with pytest.raises(ValueError, match=r"\[project.urls\] Repository.*your fork's"):
        repository(tmp_path)


@pytest.mark.parametrize("name, folder", [("README.md", "notebooks"), ("README.ko.md", "ko/notebooks")])
def test_each_chapter_has_a_badge_that_opens_its_notebook_on_colab(name, folder):
    assert READMES[name][0] == folder
    readme = (ROOT / name).read_text()
    links = re.findall(r"\((https://colab\.research\.google\.com/github/[^)]+)\)", readme)
    for chapter in chapters():
        want = f"https://colab.research.google.com/github/{OWNER}/{REPO}/blob/main/{folder}/{chapter}/{chapter}.ipynb"
        assert badge_link(OWNER, REPO, chapter, folder) == want and links.count(want) == 1, chapter
        assert (ROOT / folder / chapter / f"{chapter}.ipynb").is_file()
    assert len(links) == len(chapters())
    assert badges_block(ROOT, chapters(), name) in readme, f"{name}'s badges differ from the address: run python -m course_tools colab"


@pytest.mark.parametrize("chapter", chapters())
def test_each_chapter_opens_with_the_colab_note_and_cell(chapter):
    want = colab_cells(ADDRESS, RUNTIME, FLOOR)
    for nb in (load(solution_path(chapter)), load(NOTEBOOKS / chapter / f"{chapter}.ipynb")):
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert COLAB_TAG in code[0].metadata.get("tags", []) and code[0].source == want[1].source
        assert COLAB_TAG not in code[1].metadata.get("tags", []) and "set_seed(" in code[1].source
        note = nb.cells[nb.cells.index(code[0]) - 1]
        assert note.source == want[0].source and "Validate" in note.source and "not available" in note.source


def _run_colab_cell(on_colab):
    calls = []
    namespace = {}
    fake = {"google.colab": types.ModuleType("google.colab")} if on_colab else {}
    with mock.patch.dict(sys.modules, fake), mock.patch.object(subprocess, "run", lambda *a, **k: calls.append(a)):
        if not on_colab:
            sys.modules.pop("google.colab", None)
        exec(colab_cells(ADDRESS, RUNTIME, FLOOR)[1].source, namespace)
    return calls


def test_the_colab_cell_does_nothing_off_colab_and_installs_from_the_repository_on_colab(capsys):
    assert _run_colab_cell(on_colab=False) == []
    # it runs before the Korean edition chooses its language: each line it prints is English, then Korean
    assert capsys.readouterr().out.strip().splitlines() == [
        "not on Colab: nothing to install (this environment has the helpers already)",
        "Colab이 아니므로 설치할 것이 없습니다(이 환경에는 helpers 패키지가 이미 있습니다)"]
    helpers_call, runtime_call = _run_colab_cell(on_colab=True)
    assert helpers_call[0] == [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", f"git+{ADDRESS}"]
    assert runtime_call[0][:4] == [sys.executable, "-m", "pip", "install"] and "matplotlib>=3.7" in runtime_call[0]
    assert not any(r.startswith(("torch", "jupyterlab", "nbgrader")) for r in runtime_call[0][5:])  # Colab's own stay
    out = capsys.readouterr().out
    assert "Colab's torch is" in out and "Colab의 torch는" in out


def test_the_requirements_left_to_colab_are_torch_and_its_jupyter():
    assert f'"torch>={FLOOR}"' in (ROOT / "pyproject.toml").read_text() and any(r.startswith("matplotlib") for r in RUNTIME)
    assert not [r for r in RUNTIME if r.split(">")[0] in ("torch", "jupyterlab", "nbgrader")]


def test_a_fork_rewrites_badges_and_cells_from_its_address_once(tmp_path):
    for name in ("README.md", "README.ko.md", "pyproject.toml"):
        shutil.copy(ROOT / name, tmp_path / name)
    shutil.copytree(ROOT / "solutions", tmp_path / "solutions")
    fork = "https://github.com/someone/fork"
    (tmp_path / "pyproject.toml").write_text((tmp_path / "pyproject.toml").read_text().replace(ADDRESS, fork))
    bare = tmp_path / "solutions" / "00_start" / "00_start.ipynb"  # one chapter without the cells: inserted
    nb = load(bare)
    nb.cells = [c for c in nb.cells if COLAB_TAG not in c.metadata.get("tags", [])]
    nbformat.write(nb, str(bare))
    changed = update(tmp_path, chapters())
    assert len(changed) == len(chapters()) + 2
    assert "github/someone/fork/blob/main/notebooks/00_start" in (tmp_path / "README.md").read_text()
    assert "github/someone/fork/blob/main/ko/notebooks/00_start" in (tmp_path / "README.ko.md").read_text()
    for chapter in chapters():
        cells = [c for c in load(tmp_path / "solutions" / chapter / f"{chapter}.ipynb").cells if COLAB_TAG in c.metadata.get("tags", [])]
        assert [c.source for c in cells] == [c.source for c in colab_cells(fork, RUNTIME, FLOOR)], chapter
    assert update(tmp_path, chapters()) == []
