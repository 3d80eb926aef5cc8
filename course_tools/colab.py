"""Colab: a badge per chapter in the READMEs, and a first cell that installs the helpers there.

One place holds the course repository's address: ``[project.urls] Repository`` in pyproject.toml.
A fork sets it to its own address and runs ``python -m course_tools colab``, which rewrites, from it,

- the README's badge table (between ``<!-- colab-badges -->`` and ``<!-- /colab-badges -->``): each
  chapter's badge opens ``notebooks/NN_topic/NN_topic.ipynb`` of that repository's ``main`` on Colab;
  README.ko.md's table, the same way, opens the Korean edition's ``ko/notebooks/NN_topic/NN_topic.ipynb``;
- the Colab cells at the top of every chapter in ``solutions/`` (inserted where missing): a markdown
  note, and a code cell tagged ``colab`` that, on Colab only (``"google.colab" in sys.modules``),
  pip-installs the helpers from the repository (``pip install --no-deps "git+<address>"``, then the
  runtime requirements but torch, JupyterLab and nbgrader, which stay Colab's own; pyproject.toml
  packages ``helpers*``, so nothing else of the repository is needed), and elsewhere does nothing
  and says so, so nbval and grading run it without touching the network. The cell is code, shared
  by both editions, and runs before the Korean edition chooses its language (and before the helpers
  exist on Colab): what it prints is written twice, English then Korean (:data:`COLAB_CODE`);

then ``python -m course_tools release`` carries the cells into ``notebooks/`` (``make release`` runs this command
first, so the links always come from the setting).

**No setting, no Colab**: without a ``Repository`` address (or with the template's ``your-account`` placeholder)
nothing a learner opens points anywhere: the badge tables become a note saying how to turn them on, and the
Colab cells are taken out of every chapter. A learner who followed a placeholder link got a 404 on Colab (issue
48: 22 files pointed at ``github.com/your-account/...``). Colab has no nbgrader
extension (no Validate button, no Assignments tab); the note says so: the checks run in the cells.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import nbformat

__all__ = ["BADGES_BEGIN", "BADGES_END", "COLAB_TAG", "READMES", "badge_link", "badges_block", "colab_cells",
           "colab_requirements", "repository", "update", "NO_BADGES"]

COLAB_TAG = "colab"
BADGES_BEGIN, BADGES_END = "<!-- colab-badges -->", "<!-- /colab-badges -->"
BADGE_IMAGE = "https://colab.research.google.com/assets/colab-badge.svg"
GITHUB = re.compile(r"^https://github\.com/(?P<owner>[\w.-]+)/(?P<repo>[\w.-]+?)(?:\.git)?/?$")


#: the template's stand-in owner: an address with it is no address
PLACEHOLDER_OWNER = "your-account"


def repository(root: Path) -> tuple[str, str, str] | None:
    """``(address, owner, repo)`` from pyproject.toml's ``[project.urls] Repository``; None where none is set."""
    urls = tomllib.loads((Path(root) / "pyproject.toml").read_text())["project"].get("urls", {})
    address = urls.get("Repository", "")
    if not address:
        return None
    found = GITHUB.match(address)
    if found and found["owner"] == PLACEHOLDER_OWNER:
        return None
    if not found:
        raise ValueError(f"pyproject.toml [project.urls] Repository is {address!r}; set it to the course's GitHub "
                         "address, https://github.com/<owner>/<repo> (your fork's), then run `python -m course_tools colab`")
    return address, found["owner"], found["repo"]


#: README -> (the folder its badges open, the table's header): the Korean README opens the Korean notebooks
READMES = {"README.md": ("notebooks", "| chapter | open on Colab |"),
           "README.ko.md": ("ko/notebooks", "| 장 | Colab에서 열기 |")}


def badge_link(owner: str, repo: str, chapter: str, folder: str = "notebooks") -> str:
    return f"https://colab.research.google.com/github/{owner}/{repo}/blob/main/{folder}/{chapter}/{chapter}.ipynb"


#: what the README shows instead of badges when no repository is set
NO_BADGES = {
    "README.md": "No Colab badges yet: this copy of the course names no repository (`[project.urls] Repository` in "
                 "`pyproject.toml`). Set it to the course's GitHub address, then run `.venv/bin/python -m "
                 "course_tools colab` and `make release`.",
    "README.ko.md": "아직 Colab 배지가 없습니다. 이 강좌 사본에는 저장소 주소(`pyproject.toml`의 `[project.urls] "
                    "Repository`)가 없습니다. 강좌의 GitHub 주소를 넣은 다음 `.venv/bin/python -m course_tools colab`과 "
                    "`make release`를 실행하세요.",
}


def badges_block(root: Path, chapters: list[str], readme: str = "README.md") -> str:
    """``readme``'s badge table, markers included; a note saying how to get one where no repository is set."""
    found = repository(root)
    if found is None:
        return "\n".join([BADGES_BEGIN, NO_BADGES[readme], BADGES_END])
    _, owner, repo = found
    folder, header = READMES[readme]
    rows = [f"| `{ch}` | [![Open {ch} in Colab]({BADGE_IMAGE})]({badge_link(owner, repo, ch, folder)}) |"
            for ch in chapters]
    return "\n".join([BADGES_BEGIN, header, "| --- | --- |", *rows, BADGES_END])


COLAB_NOTE = (
    "**On Colab?** Run the next cell first: there it installs the course's `helpers` package from the course "
    "repository (a minute); anywhere else it does nothing. Colab has no nbgrader extension: the Validate button "
    "and the Assignments tab are not available there, but every check still runs in its cell.")

#: The Colab cell: English and Korean in every line it prints, because it runs before the Korean edition's setting
#: cell (``i18n.use("ko")``) and, on Colab, before the helpers that translate are installed.
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

    print(f"installed the course's helpers from {{repository}}; Colab's torch is {{torch.__version__}}\\n"
          f"강좌의 helpers 패키지를 {{repository}}에서 설치했습니다. Colab의 torch는 {{torch.__version__}}입니다")
    if tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) < {floor}:
        print("note: the course is checked on torch {floor_text} and newer; on this older torch some cells may fail\\n"
              "참고: 강좌는 torch {floor_text} 이상에서 확인했습니다. 이보다 오래된 torch에서는 일부 셀이 실패할 수 있습니다")
else:
    print("not on Colab: nothing to install (this environment has the helpers already)\\n"
          "Colab이 아니므로 설치할 것이 없습니다(이 환경에는 helpers 패키지가 이미 있습니다)")'''

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
    """Put fresh Colab cells after the title cell (replacing old ones; none: removing them); True when changed."""
    old = [c for c in nb.cells if COLAB_TAG in c.metadata.get("tags", [])]
    if not fresh:
        nb.cells = [c for c in nb.cells if all(c is not o for o in old)]
        return bool(old)
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
    """Rewrite the READMEs' badges and every chapter's Colab cells from the address; the files changed.

    README.md must exist; README.ko.md is rewritten where it exists (a copy of the course may lack it)."""
    root = Path(root)
    found = repository(root)
    changed = []
    pattern = re.compile(re.escape(BADGES_BEGIN) + ".*?" + re.escape(BADGES_END), re.S)
    for name in READMES:
        readme = root / name
        if name != "README.md" and not readme.exists():
            continue
        text = readme.read_text()
        if not pattern.search(text):
            raise ValueError(f"{name} has no {BADGES_BEGIN} ... {BADGES_END} block for the badges; add the two markers")
        new = pattern.sub(lambda _, name=name: badges_block(root, chapters, name), text)
        if new != text:
            readme.write_text(new)
            changed.append(readme)
    for chapter in chapters:
        path = root / "solutions" / chapter / f"{chapter}.ipynb"
        nb = nbformat.read(str(path), as_version=4)
        fresh = colab_cells(found[0], *colab_requirements(root)) if found else []
        if _with_colab_cells(nb, fresh):
            nbformat.write(nb, str(path))
            changed.append(path)
    return changed
