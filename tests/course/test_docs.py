"""Every document the course cites is in the repository: a newcomer can follow each reference from a clone.

Two kinds of reference are checked in every tracked text file: a document named by its file name
(``ARCHITECTURE.md``, ``docs/STACK_NOTES.md``), and a relative link in a markdown file.
"""

import re
import subprocess

from support.layout import ROOT

TEXT = (".py", ".md", ".ipynb", ".toml", ".mk", ".yml", ".txt", ".cfg")
#: a document named in prose or code: an upper-case name, optionally with a folder (README.md, docs/STYLE.md)
CITED = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[A-Z][A-Z0-9_]*(?:\.[a-z]+)?\.md)\b")
SELF = "tests/course/test_docs.py"  # its examples name documents that do not exist, on purpose
LINK = re.compile(r"\]\(((?!https?:|mailto:|#)[^)\s#]+)(?:#[^)]*)?\)")


def tracked() -> list[str]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [p for p in out.splitlines() if (p.endswith(TEXT) or p.endswith("Makefile")) and p != SELF]


def missing_citations(files: list[str], text_of) -> list[str]:
    """``file: cited`` for each document a file names that the repository lacks (by path, else by file name)."""
    names = {p.rsplit("/", 1)[-1] for p in files} | {p for p in files}
    found = []
    for path in files:
        for cited in set(CITED.findall(text_of(path))):
            if cited not in names and cited.rsplit("/", 1)[-1] not in names:
                found.append(f"{path}: {cited}")
    return sorted(found)


def broken_links(files: list[str], text_of) -> list[str]:
    found = []
    for path in (p for p in files if p.endswith(".md")):
        folder = (ROOT / path).parent
        found += [f"{path}: {target}" for target in LINK.findall(text_of(path)) if not (folder / target).exists()]
    return sorted(found)


def _read(path: str) -> str:
    return (ROOT / path).read_text(errors="replace")


def test_every_cited_document_is_in_the_repository():
    files = tracked()
    assert "ARCHITECTURE.md" in files and "docs/STACK_NOTES.md" in files
    assert missing_citations(files, _read) == []


def test_every_relative_link_in_the_markdown_resolves():
    assert broken_links(tracked(), _read) == []


def test_the_checks_find_a_missing_document_and_a_broken_link():
    texts = {"a.py": '"""See NBGRADER_NOTES.md and ARCHITECTURE.md."""', "ARCHITECTURE.md": "[x](docs/NOPE.md) [y](https://e.org)"}
    assert missing_citations(list(texts), texts.get) == ["ARCHITECTURE.md: docs/NOPE.md", "a.py: NBGRADER_NOTES.md"]
    assert broken_links(list(texts), texts.get) == ["ARCHITECTURE.md: docs/NOPE.md"]
