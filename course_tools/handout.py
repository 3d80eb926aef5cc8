"""The student edition: what a learner needs, and nothing more (``python -m course_tools handout --out DIR``).

Cloning the repository hands a learner ``solutions/`` (every answer, every hidden test) and
``tests/submissions/``. The student edition is a folder, and a zip of it beside it, holding:

- ``notebooks/``: the released learner notebooks (generated from ``solutions/`` by nbgrader), and
  ``ko/notebooks/``, the Korean edition's (released from ``ko/solutions/``, README.ko.md);
- ``helpers/``, whole: the teaching modules and ``helpers/checks/``, which the grade cells import (they
  hold verdicts, never hidden cases). Nothing is stripped: the instructor's tooling is a package of its
  own, ``course_tools/``, which the edition simply does not copy;
- ``results/`` when the repository has it: real GPU results the chapters display;
- ``pyproject.toml``, unchanged (it lists both packages; an edition has only ``helpers/`` to find),
  ``environment.yml``, ``learner.mk`` as the edition's ``Makefile`` (the same recipe that sets up and
  opens the course repository), and the files of ``edition/`` (its README and ``.gitignore``);
- the learner view (``.jupyter/learner``), less the Assignments list (an edition has no exchange).

Safety is a scan, not a list: before the edition is moved into place, every file of it, and every
member of its zip, is searched for every secret line of the course (:mod:`course_tools.grading.hidden`
says which lines are secret and why). One found, and nothing is written. Paths that must never
ship (``.git``, ``solutions``, ``tests``, ``course_tools``, ``gradebook.db``, ``submitted``, ...) are
refused by name too.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from course_tools.grading.hidden import Finding, scan, secret_lines

__all__ = ["COPIED", "FORBIDDEN", "Edition", "HandoutError", "build", "forbidden_paths"]

#: folders copied whole from the course repository (ko/notebooks: the Korean edition's learner notebooks, which
#: `make lab COURSE_LANG=ko` opens; .jupyter/korean: JupyterLab's menus in Korean for them)
COPIED = ("notebooks", "helpers", "results", "ko/notebooks", ".jupyter/korean")
#: files copied from the course repository: (source, name in the edition)
FILES = (("pyproject.toml", "pyproject.toml"), ("environment.yml", "environment.yml"), ("learner.mk", "Makefile"),
         ("edition/README.md", "README.md"), ("edition/README.ko.md", "README.ko.md"), ("edition/.gitignore", ".gitignore"))
#: names that never ship, at any depth (instructor data and tooling, caches, environments)
FORBIDDEN = {".git", "solutions", "tests", "course_tools", "gradebook.db", "submitted", "autograded", "feedback",
             "downloaded", "nbgrader_config.py", "__pycache__", ".venv", ".ipynb_checkpoints", "outcomes.json", "outcomes.sqlite"}
MARKER = ".student-edition"
_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints", "*.bak-*", "*.egg-info")


class HandoutError(RuntimeError):
    """No edition was written; the message says why and what to do."""


@dataclass
class Edition:
    folder: Path
    archive: Path
    files: int
    secrets: int


def forbidden_paths(folder: Path) -> list[str]:
    """Paths under ``folder`` whose name is on :data:`FORBIDDEN` (the edition's must be none)."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.name in FORBIDDEN)


def _write_edition(root: Path, folder: Path) -> None:
    for name in COPIED:
        if (root / name).is_dir():
            shutil.copytree(root / name, folder / name, ignore=_IGNORE)
    for source, name in FILES:
        if not (root / source).is_file():
            raise HandoutError(f"{root / source} is missing; the edition's {name} is copied from it")
        shutil.copyfile(root / source, folder / name)
    _write_learner_view(root, folder)
    (folder / MARKER).write_text("The course's student edition, written by `python -m course_tools handout`.\n")


def _write_learner_view(root: Path, folder: Path) -> None:
    """The course's learner view (``.jupyter/learner``), less the Assignments list: an edition has no exchange
    (its learners hand in through an LMS), so that panel could only say the exchange does not exist."""
    source, view = root / ".jupyter" / "learner", folder / ".jupyter" / "learner"
    if not source.is_dir():
        return
    shutil.copytree(source, view)
    page = view / "labconfig" / "page_config.json"
    config = json.loads(page.read_text())
    config.setdefault("disabledExtensions", {})["@jupyter/nbgrader:assignment-list"] = True
    page.write_text(json.dumps(config, indent=2) + "\n")


def _zip(folder: Path, archive: Path, top: str) -> None:
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z:
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            z.write(path, f"{top}/{path.relative_to(folder)}")


def _check(staging: Path, secrets: list[str]) -> None:
    bad = forbidden_paths(staging)
    findings: list[Finding] = scan(staging, secrets)
    if bad or findings:
        listed = "; ".join([*bad[:5], *map(str, findings[:5])])
        raise HandoutError(f"the edition would hold what a learner must not get ({len(bad) + len(findings)} "
                           f"finding(s): {listed}); nothing was written. Move answers and hidden cases back into "
                           "solutions/ (### BEGIN SOLUTION / ### BEGIN HIDDEN TESTS), run `python -m course_tools "
                           "release`, then hand out again")


def _target(root: Path, out: Path) -> Path:
    out = Path(out).expanduser().resolve()
    if any(out == root / n or (root / n) in out.parents for n in (*COPIED, "ko", "solutions", "tests")):
        raise HandoutError(f"{out} is inside a folder the edition is made from; choose a folder elsewhere")
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / MARKER).is_file())):
        raise HandoutError(f"{out} exists and is not an earlier student edition; choose a new or empty folder")
    return out


def build(root: Path, out: Path) -> Edition:
    """Write the student edition of the course at ``root`` into ``out`` and ``out``.zip beside it.

    ``out`` must be new, empty, or an earlier edition (replaced whole). Everything is built and
    scanned in a scratch folder beside ``out`` first, so a refusal leaves ``out`` as it was.
    """
    root = Path(root).resolve()
    out = _target(root, out)
    out.parent.mkdir(parents=True, exist_ok=True)
    secrets = secret_lines(root)
    archive = out.parent / f"{out.name}.zip"
    with tempfile.TemporaryDirectory(prefix=f".{out.name}-", dir=out.parent) as scratch:
        staging = Path(scratch) / out.name
        staging.mkdir()
        _write_edition(root, staging)
        _check(staging, secrets)
        _zip(staging, Path(scratch) / archive.name, out.name)
        if scan(Path(scratch) / archive.name, secrets):  # the zip holds what the folder holds; prove it
            raise HandoutError("the zip holds a secret line the folder did not; nothing was written")
        shutil.rmtree(out, ignore_errors=True)
        staging.rename(out)
        (Path(scratch) / archive.name).replace(archive)
    return Edition(out, archive, sum(1 for p in out.rglob("*") if p.is_file()), len(secrets))
