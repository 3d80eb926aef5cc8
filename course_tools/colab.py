"""Colab: a badge per chapter in the README, and a first cell that installs the helpers there.

One place holds the course repository's address: ``[project.urls] Repository`` in pyproject.toml.
A fork sets it to its own address and runs ``python -m course_tools colab``, which rewrites, from it,

- the README's badge table (between ``<!-- colab-badges -->`` and ``<!-- /colab-badges -->``): each
  chapter's badge opens ``notebooks/NN_topic/NN_topic.ipynb`` of that repository's ``main`` on Colab;
- the Colab cells at the top of every chapter in ``solutions/`` (inserted where missing): a markdown
  note, and a code cell tagged ``colab`` that, on Colab only (``"google.colab" in sys.modules``),
  pip-installs the helpers from the repository (``pip install --no-deps "git+<address>"``, then the
  runtime requirements but torch, JupyterLab and nbgrader, which stay Colab's own; pyproject.toml
  packages ``helpers*``, so nothing else of the repository is needed), and elsewhere does nothing
  and says so in one line, so nbval and grading run it without touching the network;

then ``python -m course_tools release`` carries the cells into ``notebooks/``. Colab has no nbgrader
extension (no Validate button, no Assignments tab); the note says so: the checks run in the cells.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import nbformat

__all__ = ["BADGES_BEGIN", "BADGES_END", "COLAB_TAG", "badge_link", "badges_block", "colab_cells",
           "colab_requirements", "repository", "update"]

COLAB_TAG = "colab"
BADGES_BEGIN, BADGES_END = "<!-- colab-badges -->", "<!-- /colab-badges -->"
BADGE_IMAGE = "https://colab.research.google.com/assets/colab-badge.svg"
GITHUB = re.compile(r"^https://github\.com/(?P<owner>[\w.-]+)/(?P<repo>[\w.-]+?)(?:\.git)?/?$")


def repository(root: Path) -> tuple[str, str, str]:
    """``(address, owner, repo)`` from pyproject.toml's ``[project.urls] Repository``."""
    urls = tomllib.loads((Path(root) / "pyproject.toml").read_text())["project"].get("urls", {})
    address = urls.get("Repository", "")
    found = GITHUB.match(address)
    if not found:
        raise ValueError(f"pyproject.toml [project.urls] Repository is {address!r}; set it to the course's GitHub "
                         "address, https://github.com/<owner>/<repo> (your fork's), then run `python -m course_tools colab`")
    return address, found["owner"], found["repo"]


def badge_link(owner: str, repo: str, chapter: str) -> str:
    return f"https://colab.research.google.com/github/{owner}/{repo}/blob/main/notebooks/{chapter}/{chapter}.ipynb"


def badges_block(root: Path, chapters: list[str]) -> str:
    """The README's badge table, markers included."""
    _, owner, repo = repository(root)
    rows = [f"| `{ch}` | [![Open {ch} in Colab]({BADGE_IMAGE})]({badge_link(owner, repo, ch)}) |" for ch in chapters]
    return "\n".join([BADGES_BEGIN, "| chapter | open on Colab |", "| --- | --- |", *rows, BADGES_END])


COLAB_NOTE = (
    "**On Colab?** Run the next cell first: there it installs the course's `helpers` package from the course "
    "repository (a minute); anywhere else it does nothing. Colab has no nbgrader extension: the Validate button "
    "and the Assignments tab are not available there, but every check still runs in its cell.")

COLAB_CODE = '''\
# On Colab only: install the course's helpers from the course repository. Anywhere else: nothing to do.
import sys

if "google.colab" in sys.modules:
    import subprocess

    repository = "{address}"
    pip = [sys.executable, "-m", "pip", "install", "--quiet"]
    subprocess.run([*pip, "--no-deps", f"git+{{repository}}"], check=True)  # Colab's torch and Jupyter stay
    subprocess.run([*pip, {runtime}], check=True)  # what the helpers import
    import torch

    print(f"installed the course's helpers from {{repository}}; Colab's torch is {{torch.__version__}}")
    if tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) < {floor}:
        print("note: the course is checked on torch {floor_text} and newer; on this older torch some cells may fail")
else:
    print("not on Colab: nothing to install (this environment has the helpers already)")'''

#: What the Colab cell leaves to Colab: its own torch (a multi-GB reinstall otherwise) and its Jupyter, which
#: has no nbgrader extension anyway.
LEFT_TO_COLAB = ("torch", "jupyterlab", "nbgrader",
                 # the Korean edition's tooling and JupyterLab menus: Colab's interface is its own, the helpers
                 # read their compiled messages with the standard library's gettext
                 "babel", "jupyterlab-language-pack-ko-kr")


def colab_requirements(root: Path) -> tuple[list[str], str]:
    """``(the helpers' runtime requirements Colab may lack, the torch floor)`` from pyproject.toml."""
    deps = tomllib.loads((Path(root) / "pyproject.toml").read_text())["project"]["dependencies"]
    name = lambda d: re.split(r"[<>=!~ ;\[]", d, maxsplit=1)[0].lower()  # noqa: E731
    floor = next(d.split(">=")[1].split(",")[0] for d in deps if name(d) == "torch")
    return [d for d in deps if name(d) not in LEFT_TO_COLAB], floor


def colab_cells(address: str, runtime: list[str], floor: str) -> list[nbformat.NotebookNode]:
    """The markdown note and the install cell, both tagged ``colab``."""
    meta = {"tags": [COLAB_TAG]}
    major_minor = tuple(int(p) for p in floor.split(".")[:2])
    code = COLAB_CODE.format(address=address, runtime=", ".join(repr(r) for r in runtime), floor=major_minor,
                             floor_text=floor)
    return [nbformat.v4.new_markdown_cell(COLAB_NOTE, metadata=meta), nbformat.v4.new_code_cell(code, metadata=dict(meta))]


def _with_colab_cells(nb: nbformat.NotebookNode, fresh: list[nbformat.NotebookNode]) -> bool:
    """Put fresh Colab cells after the title cell (replacing old ones); True when the notebook changed."""
    old = [c for c in nb.cells if COLAB_TAG in c.metadata.get("tags", [])]
    fresh = [nbformat.from_dict(c) for c in fresh]  # a copy per notebook
    if [(c.cell_type, c.source) for c in old] == [(c.cell_type, c.source) for c in fresh]:
        return False
    for cell, was in zip(fresh, old):
        cell.id = was.get("id", cell.get("id"))  # an updated cell keeps its id: a smaller diff
    at = nb.cells.index(old[0]) if old else 1 if nb.cells and nb.cells[0].cell_type == "markdown" else 0
    nb.cells = [c for c in nb.cells if all(c is not o for o in old)]
    nb.cells[at:at] = fresh
    return True


def update(root: Path, chapters: list[str]) -> list[Path]:
    """Rewrite the README's badges and every chapter's Colab cells from the address; the files changed."""
    root = Path(root)
    address, _, _ = repository(root)
    changed = []
    readme = root / "README.md"
    text = readme.read_text()
    pattern = re.compile(re.escape(BADGES_BEGIN) + ".*?" + re.escape(BADGES_END), re.S)
    if not pattern.search(text):
        raise ValueError(f"README.md has no {BADGES_BEGIN} ... {BADGES_END} block for the badges; add the two markers")
    new = pattern.sub(lambda _: badges_block(root, chapters), text)
    if new != text:
        readme.write_text(new)
        changed.append(readme)
    for chapter in chapters:
        path = root / "solutions" / chapter / f"{chapter}.ipynb"
        nb = nbformat.read(str(path), as_version=4)
        if _with_colab_cells(nb, colab_cells(address, *colab_requirements(root))):
            nbformat.write(nb, str(path))
            changed.append(path)
    return changed
