"""The student edition: what a learner needs, and nothing more (``python -m helpers handout --out DIR``).

Cloning the repository hands a learner ``solutions/`` (every answer, every hidden test) and
``tests/submissions/``. The student edition is a folder, and a zip of it beside it, holding:

- ``notebooks/``: the released learner notebooks (generated from ``solutions/`` by nbgrader);
- ``results/`` when the repository has it: real GPU results the chapters display;
- ``helpers/`` without ``helpers/grading/`` and ``helpers/gpu_check/``: the teaching modules and
  ``helpers/checks/``, which the grade cells import (they hold verdicts, never hidden cases);
- ``pyproject.toml`` and ``Makefile`` generated from the repository's own (the dependency list,
  the build-system and ``TORCH_SPEC`` are read from them, never copied by hand), so ``make lab``
  sets the edition up and opens it like the full repository; a short ``README.md``; ``.gitignore``.

Why ``helpers/grading/`` and ``helpers/gpu_check/`` stay out (:data:`INSTRUCTOR_ONLY`, the face
floor's packages): they are the instructor's and maintainer's tooling (release, grade, the sandbox,
feedback, this module; the GPU check that writes ``results/``). Their commands work on
``solutions/``, ``nbgrader_config.py``, a gradebook or ``tests/``, which a learner does not have, so
shipping them would only offer commands that cannot work. They hold no secret (leaving them out is
about a clear package, not safety). Without them, ``python -m helpers grade`` (or any instructor
command) says in one line that it comes with the full repository; ``env`` and ``bench`` work. ``nbgrader_config.py`` stays out with it (it imports
``helpers.grading``); a learner's JupyterLab Validate button needs no course config.

Safety is a scan, not a list: before the edition is moved into place, every file of it, and every
member of its zip, is searched for every secret line of the course (:mod:`helpers.grading.hidden`
says which lines are secret and why). One found, and nothing is written. Paths that must never
ship (``.git``, ``solutions``, ``tests``, ``gradebook.db``, ``submitted``, ``autograded``,
``feedback``, ``__pycache__``, ``.venv``, ...) are refused by name too.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path

from helpers.grading.hidden import Finding, scan, secret_lines

__all__ = ["FORBIDDEN", "INSTRUCTOR_ONLY", "Edition", "HandoutError", "build", "edition_makefile", "edition_pyproject", "forbidden_paths"]

#: the packages of helpers/ a learner does not get (the face floor's tooling; __main__ ships, and says so)
INSTRUCTOR_ONLY = ("grading", "gpu_check")
#: names that never ship, at any depth (instructor data, tooling, caches, environments)
FORBIDDEN = {".git", "solutions", "tests", "gradebook.db", "submitted", "autograded", "feedback", "downloaded",
             "nbgrader_config.py", "__pycache__", ".venv", ".ipynb_checkpoints", "outcomes.json", *INSTRUCTOR_ONLY}
COPIED = ("notebooks", "helpers", "results")
MARKER = ".student-edition"
_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints", "*.bak-*", "*.egg-info", *INSTRUCTOR_ONLY)


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


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[\n" + "".join(f"    {_toml_value(v)},\n" for v in value) + "]"
    return json.dumps(value)  # a TOML basic string: JSON's escapes are TOML's


def _toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)


def _toml(table: dict, prefix: tuple[str, ...] = ()) -> str:
    """A small TOML writer for what pyproject.toml holds: tables of strings, lists and booleans."""
    plain = [f"{_toml_key(k)} = {_toml_value(v)}" for k, v in table.items() if not isinstance(v, dict)]
    parts = [("[" + ".".join(map(_toml_key, prefix)) + "]\n" if prefix else "") + "\n".join(plain) + "\n"] if plain else []
    parts += [_toml(v, (*prefix, k)) for k, v in table.items() if isinstance(v, dict)]
    return "\n".join(parts)


def edition_pyproject(root: Path) -> str:
    """The edition's pyproject.toml: the repository's package metadata and dependencies, no test setup."""
    ours = tomllib.loads((root / "pyproject.toml").read_text())
    project = {k: v for k, v in ours["project"].items() if k not in ("optional-dependencies", "readme")}
    project["readme"] = "README.md"
    find = ours.get("tool", {}).get("setuptools", {}).get("packages", {}).get("find", {"include": ["helpers*"]})
    data = {"build-system": ours["build-system"], "project": project,
            "tool": {"setuptools": {"packages": {"find": find}}}}
    return "# Generated by `python -m helpers handout` from the course repository's pyproject.toml.\n\n" + _toml(data)


def _make_setting(root: Path, name: str) -> str:
    found = re.search(rf"^{name} \?= (.+)$", (root / "Makefile").read_text(), flags=re.M)
    if not found:
        raise HandoutError(f"the Makefile sets no `{name} ?= ...`; the edition's Makefile copies it from there")
    return found.group(1).strip()


EDITION_MAKEFILE = """\
# Generated by `python -m helpers handout` from the course repository's Makefile.
#   make lab    set up .venv the first time, then open the course in JupyterLab
#   make env    what this machine offers the course
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# torch is installed before the course's helpers, so pip never pulls a build you did not choose;
# another build:  make lab TORCH_SPEC="torch --index-url <your wheel index>"  (see README.md)
TORCH_SPEC ?= {torch_spec}
STAMP := $(VENV)/.installed
export PATH := $(abspath $(VENV))/bin:$(PATH)
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)
LAB_ARGS ?=

.PHONY: help setup lab env clean-venv

help:
\t@echo "make lab   open the course in JupyterLab (sets up .venv first if needed)"
\t@echo "make env   what this machine offers the course"

setup: $(STAMP)

$(STAMP): pyproject.toml
\t@test -x $(PY) || $(PYTHON) -m venv $(VENV)
\t$(PY) -m pip install --quiet --upgrade pip
\t$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install --quiet "$(TORCH_SPEC)"
\t$(PY) -m pip install --quiet .
\t@touch $(STAMP)

# the learner's view (.jupyter/learner): no instructor panels, no news pop-up
lab: $(STAMP)
\tJUPYTER_CONFIG_PATH="$(abspath .jupyter/learner)$${{JUPYTER_CONFIG_PATH:+:$$JUPYTER_CONFIG_PATH}}" \\
\t\t$(VENV)/bin/jupyter lab $(ROOT_FLAG) --ServerApp.root_dir=. $(LAB_ARGS) notebooks/00_start/00_start.ipynb

env: $(STAMP)
\t$(PY) -m helpers env

clean-venv:
\trm -rf $(VENV)
"""


def edition_makefile(root: Path) -> str:
    return EDITION_MAKEFILE.format(torch_spec=_make_setting(root, "TORCH_SPEC"))


STUDENT_README = """\
# Using GPUs with PyTorch — student edition

Jupyter chapters that teach you to use GPUs with PyTorch by measuring things on the machine in front
of you. **No GPU needed**: every chapter runs on a laptop's CPU, and does more on a machine with a GPU.

## Two commands

You need Python 3.10 or newer (with `venv`) and `make`.

```bash
make lab     # the first time: sets up .venv with torch, JupyterLab and the course's helpers (a few minutes); then opens the course
make env     # what this machine offers the course: torch's build, GPUs, CPU threads
```

`make lab` opens `notebooks/00_start/00_start.ipynb`, which explains how the course works. The
Makefile installs `{torch_spec}` first (`TORCH_SPEC`). On Linux that is a CUDA build of several GB
even without a GPU; on a Linux laptop without an NVIDIA GPU ask for the small CPU build from
PyTorch's CPU wheel index: `make lab TORCH_SPEC="{torch_spec} --index-url <PyTorch's CPU wheel index>"`
(the address is on pytorch.org's "Get started" page). Without `make`:
`python3 -m venv .venv && .venv/bin/pip install "{torch_spec}" && .venv/bin/pip install . && .venv/bin/jupyter lab`.

## Exercises and handing in

Each exercise has a cell for your answer and check cells below it that tell you at once what to
fix. Your instructor grades with more cases than the ones you see, so an answer that only fits the
visible checks can still lose points. Hand in the notebook itself, under its own name (for example
`notebooks/02_devices/02_devices.ipynb`, or a zip of it), the way your instructor says: a renamed
copy (`02_devices-Copy1.ipynb`) is not found by the grader.

{chapters}"""


def _chapters_section(root: Path) -> str:
    """The README's chapter table, so the two READMEs never disagree about what the course holds."""
    found = re.search(r"^## The chapters\n.*?(?=^## )", (root / "README.md").read_text(), flags=re.S | re.M)
    return found.group(0).rstrip() + "\n" if found else ""


def _write_edition(root: Path, folder: Path) -> None:
    for name in COPIED:
        if (root / name).is_dir():
            shutil.copytree(root / name, folder / name, ignore=_IGNORE)
    torch_spec = _make_setting(root, "TORCH_SPEC")
    (folder / "README.md").write_text(STUDENT_README.format(torch_spec=torch_spec, chapters=_chapters_section(root)))
    (folder / "Makefile").write_text(edition_makefile(root))
    (folder / "pyproject.toml").write_text(edition_pyproject(root))
    (folder / ".gitignore").write_text(".venv/\n__pycache__/\n*.egg-info/\nbuild/\n.ipynb_checkpoints/\n")
    _write_learner_view(root, folder)
    (folder / MARKER).write_text("The course's student edition, written by `python -m helpers handout`.\n")


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
                           "solutions/ (### BEGIN SOLUTION / ### BEGIN HIDDEN TESTS), run `python -m helpers "
                           "release`, then hand out again")


def _target(root: Path, out: Path) -> Path:
    out = Path(out).expanduser().resolve()
    if any(out == root / n or (root / n) in out.parents for n in (*COPIED, "solutions", "tests")):
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
