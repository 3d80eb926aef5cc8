"""What a learner must never be given, and a scan that finds it in a folder or an archive.

Two kinds of line are secret:

- a line of a **hidden test** (between ``### BEGIN HIDDEN TESTS`` and ``### END HIDDEN TESTS`` in any
  notebook of ``solutions/``);
- a line of a **reference answer** (between ``### BEGIN SOLUTION`` and ``### END SOLUTION``).

Lines are compared whole, without their indentation and a trailing ``  # comment``
(:func:`normal`): a secret is found where it stands as a line of code, in a notebook (its JSON
decoded), a module, a README, or inside an archive. A line is not secret, whatever block it
stands in, when:

- it is shorter than :data:`MIN_CHARS` once stripped (``)``, ``else:``, ``x = 3``): such a line
  says nothing and stands in unrelated files;
- every learner is given it anyway: it stands outside every hidden test and every answer in
  ``solutions/`` (any chapter), i.e. in what nbgrader releases, e.g. ``with fake_machine(cuda=1):``
  in a check's visible half and again in its hidden half, or a solution's ``return x.to(device)``
  that a demonstration cell also shows. This is computed from the source, not from
  ``notebooks/``, so a broken release that leaks a line is still caught;
- for answer lines only: it stands in the ``helpers`` package that ships to every learner (the
  course's own implementation of an exercise is public by design; calling it earns nothing). Hidden
  test lines get no such pass: hidden *cases* must never be in the package, so one found there is
  a real finding.

``python -m course_tools feedback`` searches its pages for hidden-test lines with the same blocks and the
same length rule (:func:`course_tools.grading.class_level.feedback.hidden_lines`); what counts as given there is the
assignment as released and the learner's own submission.
"""

from __future__ import annotations

import io
import json
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path

__all__ = ["HIDDEN_RE", "MIN_CHARS", "SOLUTION_RE", "Finding", "block_lines", "normal", "released_source", "scan",
           "scan_file", "secret_lines"]

HIDDEN_RE = re.compile(r"### BEGIN HIDDEN TESTS\n(.*?)### END HIDDEN TESTS", re.S)
SOLUTION_RE = re.compile(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", re.S)
#: shorter lines (stripped) are never secret: they say nothing and stand in unrelated files
MIN_CHARS = 8
INLINE_COMMENT = re.compile(r"\s\s+#.*$")


def released_source(source: str) -> str:
    """A test cell's source as the learner received it: hidden tests removed, by nbgrader's own
    ``ClearHiddenTests`` (so what counts as released is what nbgrader releases, not a second reading of it)."""
    from nbformat.v4 import new_code_cell
    from nbgrader.preprocessors import ClearHiddenTests

    cell = new_code_cell(source)
    ClearHiddenTests()._remove_hidden_test_region(cell)
    return cell.source


@dataclass(frozen=True)
class Finding:
    """A secret ``line`` found in ``where`` (a path, or ``archive.zip!member``)."""

    where: str
    line: str

    def __str__(self) -> str:
        return f"{self.where}: {self.line!r}"


def normal(line: str) -> str:
    """A line as the scan compares it: without indentation and without a trailing ``  # comment``."""
    return INLINE_COMMENT.sub("", line).strip()


def block_lines(source: str, block: re.Pattern) -> list[str]:
    """The lines (:func:`normal`), :data:`MIN_CHARS` or longer, inside every ``block`` of ``source``."""
    return [normal(ln) for text in block.findall(source) for ln in text.splitlines() if len(normal(ln)) >= MIN_CHARS]


def _cell_sources(folder: Path) -> list[str]:
    return [cell.get("source", "") if isinstance(cell.get("source"), str) else "".join(cell.get("source", []))
            for path in sorted(folder.glob("*/*.ipynb")) for cell in json.loads(path.read_text())["cells"]]


def _lines(texts) -> set[str]:
    return {normal(ln) for text in texts for ln in text.splitlines()}


def secret_lines(root: Path, package_root: Path | None = None) -> list[str]:
    """Every secret line of the course at ``root`` (read from ``solutions/``, and ``helpers/`` of ``package_root``,
    by default ``root``: an instructor's course folder holds solutions but not the package learners are given)."""
    sources = _cell_sources(root / "solutions")
    given = _lines(SOLUTION_RE.sub("", HIDDEN_RE.sub("", s)) for s in sources)
    package = _lines(p.read_text() for p in sorted((Path(package_root or root) / "helpers").rglob("*.py")))
    hidden = [ln for s in sources for ln in block_lines(s, HIDDEN_RE) if ln not in given]
    answers = [ln for s in sources for ln in block_lines(s, SOLUTION_RE) if ln not in given and ln not in package]
    return list(dict.fromkeys(hidden + answers))


def _texts(name: str, data: bytes):
    """(where, text) for a file's content; an archive's members one by one, a notebook's JSON decoded."""
    if name.endswith(".zip"):
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            for member in archive.namelist():
                if not member.endswith("/"):
                    yield from _texts(f"{name}!{member}", archive.read(member))
        return
    text = data.decode("utf-8", errors="replace")
    if name.endswith(".ipynb"):
        try:  # search what a reader sees: sources and outputs with JSON's escapes undone
            text = "\n".join(_strings(json.loads(text)))
        except ValueError:
            pass
    yield name, text


def _strings(node) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, list) and all(isinstance(x, str) for x in node):
        return ["".join(node)]
    items = node.values() if isinstance(node, dict) else node if isinstance(node, list) else []
    return [s for item in items for s in _strings(item)]


def scan_file(data: bytes, name: str, secrets: list[str]) -> list[Finding]:
    """Every secret line found in one file's ``data`` (an archive's members, a notebook's JSON decoded)."""
    findings = []
    for where, text in _texts(name, data):
        lines = _lines([text])
        findings += [Finding(where, line) for line in secrets if line in lines]
    return findings


def scan(path: Path, secrets: list[str]) -> list[Finding]:
    """Every secret line found in ``path`` (a folder: every file under it, archives opened; or one file)."""
    path = Path(path)
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    findings = []
    for file in files:
        findings += scan_file(file.read_bytes(), str(file.relative_to(path)) if path.is_dir() else file.name, secrets)
    return findings
