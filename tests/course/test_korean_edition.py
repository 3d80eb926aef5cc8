"""The Korean edition leaves out nothing the English README says, and quotes what a Korean learner sees.

- README.ko.md has a section for every section of README.md: the same headings, level by level and in order
  (its own extra sections are named in :data:`KOREAN_ONLY`, and must exist), and each section says the commands,
  paths, code and links its English section says. A link to a document that exists only in English says "(영어)".
- Where an English chapter quotes the course's own message ("write it yourself") or a JupyterLab menu
  (*Kernel → Restart Kernel and Run All Cells*), the Korean chapter quotes what the Korean learner sees: the
  message as translations/ko/helpers.po translates it, the menu as the installed Korean language pack
  (jupyterlab-language-pack-ko-KR, which the Korean edition's JupyterLab uses) labels it.

  Which quotes are UI is explicit: :data:`COURSE_MESSAGES` and :data:`MENUS` list them, each checked against the
  catalog or the pack, and a scan of the English chapters makes sure no quoted message or menu is left out of
  them (:data:`NOT_UI` lists what the scan finds that is not the course's UI, and why). A quote is a code span,
  a span in double quotes ("…", “…”) or 「…」, or an italic span (*…*).

Cheap: reads markdown, the catalog and the pack's JSON; runs nothing.
"""

from __future__ import annotations

import importlib.util
import json
import re
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest

from support.layout import ROOT, chapters
from course_tools import translation as tr

# --------------------------------------------------------------------------- README.ko.md against README.md

#: sections README.ko.md has and README.md has not (how the edition is made, what stays English)
KOREAN_ONLY = ("한국어판은 어떻게 만들어지나요", "영어로 남는 것")
#: the documents that exist only in English: a Korean link to one says so, "(영어)"
ENGLISH_ONLY = ("README.md", "INSTRUCTORS.md", "MAINTAINERS.md", "ARCHITECTURE.md")

_FENCE = re.compile(r"^```.*?^```[^\n]*$", re.S | re.M)
_HEADING = re.compile(r"^(#{1,6}) +(.+?) *#*$")
_CODE = re.compile(r"`([^`]+)`")
_LINK = re.compile(r"\]\(([^)\s]+)\)")


@dataclass
class Section:
    level: int
    title: str
    body: str


def sections(markdown: str) -> list[Section]:
    """The ATX headings (outside fenced code) with the text under each, up to the next heading of any level."""
    found: list[Section] = []
    fenced = [(m.start(), m.end()) for m in _FENCE.finditer(markdown)]
    offset = 0
    for line in markdown.splitlines(keepends=True):
        heading = _HEADING.match(line.rstrip("\n"))
        if heading and not any(a <= offset < b for a, b in fenced):
            found.append(Section(len(heading[1]), heading[2], ""))
        elif found:
            found[-1].body += line
        offset += len(line)
    return found


def _normal(text: str) -> str:
    """Text as the comparison reads it: the Korean edition's switch (COURSE_LANG=ko) left out, a prose placeholder
    (``<PyTorch's CPU wheel index>``, ``<저장소>``) only a placeholder, every run of white space one space."""
    text = re.sub(r"(?<!\S)COURSE_LANG=ko(?!\S)", " ", text)
    text = re.sub(r"<[^<>`\n]*>", "<>", text)
    return " ".join(text.split())


def links(section: Section) -> list[str]:
    """The section's links to files of the repository (README.ko.md's counterpart is README.md)."""
    prose = _CODE.sub(" ", _FENCE.sub(" ", section.title + "\n" + section.body))
    return list(dict.fromkeys("README.md" if link == "README.ko.md" else link for link in _LINK.findall(prose)
                              if not link.startswith(("http://", "https://", "#"))))


def required(section: Section) -> list[str]:
    """What a translation of ``section`` must say as it is: its inline code and the commands of its code blocks
    (without their comments)."""
    text = section.title + "\n" + section.body
    items = []
    for block in _FENCE.findall(text):
        items += [line.split("  #")[0].strip() for line in block.splitlines()[1:-1] if line.split("  #")[0].strip()]
    items += _CODE.findall(_FENCE.sub(" ", text))
    return [_normal(item) for item in dict.fromkeys(items)]


def readme_problems(english: str, korean: str) -> list[str]:
    """Why ``korean`` (README.ko.md) does not carry every section of ``english`` (README.md); empty: it does."""
    problems = []
    en = sections(english)
    ko_all = sections(korean)
    ko = [s for s in ko_all if s.title not in KOREAN_ONLY]
    problems += [f"the Korean-only section {title!r} is missing" for title in KOREAN_ONLY
                 if title not in [s.title for s in ko_all]]
    problems += [f"the heading {s.title!r} is not Korean" for s in ko_all if not re.search(r"[가-힣]", s.title)]
    for level in sorted({s.level for s in en + ko}):
        en_titles = [s.title for s in en if s.level == level]
        ko_titles = [s.title for s in ko if s.level == level]
        if len(en_titles) != len(ko_titles):
            problems.append(f"level {level}: README.md has {len(en_titles)} headings {en_titles}, README.ko.md "
                            f"{len(ko_titles)} {ko_titles}")
    if [s.level for s in en] != [s.level for s in ko]:
        problems.append(f"the headings' levels differ in order: {[s.level for s in en]} against {[s.level for s in ko]}")
        return problems
    for e, k in zip(en, ko):
        said = _normal(k.title + "\n" + k.body)
        problems += [f"section {k.title!r} (README.md {e.title!r}) does not say {item!r}" for item in required(e)
                     if item not in said]
        problems += [f"section {k.title!r} (README.md {e.title!r}) does not link to {link}" for link in links(e)
                     if link not in links(k)]
    for m in re.finditer(r"\[[^\]]*\]\(([^)\s]+)\)([^\n]{0,6})", _CODE.sub(" ", _FENCE.sub(" ", korean))):
        if m[1].split("#")[0] in ENGLISH_ONLY and "영어" not in m[2]:
            problems.append(f"the link to {m[1]} does not say the document is in English ((영어) after it)")
    return problems


def test_the_korean_readme_has_every_section_of_the_english_one():
    problems = readme_problems((ROOT / "README.md").read_text(), (ROOT / "README.ko.md").read_text())
    assert not problems, "README.ko.md is missing what README.md says:\n" + "\n".join(problems)


def _without_section(markdown: str, title: str) -> str:
    """``markdown`` less the section headed ``title`` (its heading and text, up to the next heading)."""
    pattern = re.compile(rf"^#+ {re.escape(title)}\n.*?(?=^#)", re.S | re.M)
    assert pattern.search(markdown), title
    return pattern.sub("", markdown, count=1)


def test_the_readme_comparison_can_fail():
    english, korean = (ROOT / "README.md").read_text(), (ROOT / "README.ko.md").read_text()
    assert readme_problems(english, korean) == []
    # a section left out: the level-3 headings no longer pair up
    missing = readme_problems(english, _without_section(korean, "설치되는 torch"))
    assert any(p.startswith("level 3: README.md has 3 headings") for p in missing), missing
    # a Korean-only section renamed away, so that it would pair with an English one: named, not counted
    assert any("Korean-only section '영어로 남는 것' is missing" in p
               for p in readme_problems(english, korean.replace("## 영어로 남는 것", "## 영어로 남는 부분")))
    # a section left in English
    assert readme_problems(english, korean.replace("## 장 목록", "## The chapters")) == [
        "the heading 'The chapters' is not Korean"]
    # every heading kept, one command left out of its section
    assert readme_problems(english, korean.replace("make handout OUT=../gpu-course", "make handout")) == [
        "section '강사와 관리자' (README.md 'Instructors and maintainers') does not say 'make handout OUT=../gpu-course'"]
    # a link lost (its text kept)
    assert readme_problems(english, korean.replace("(INSTRUCTORS.md)", "(docs/)")) == [
        "section '강사와 관리자' (README.md 'Instructors and maintainers') does not link to INSTRUCTORS.md"]
    # a link to an English-only document without "(영어)"
    assert readme_problems(english, korean.replace("[MAINTAINERS.md](MAINTAINERS.md)(영어)",
                                                   "[MAINTAINERS.md](MAINTAINERS.md)", 1)) == [
        "the link to MAINTAINERS.md does not say the document is in English ((영어) after it)"]


# --------------------------------------------------------------------------- quoted UI in the Korean chapters

#: the course's own messages the English chapters quote -> the words the Korean learner sees instead; both must
#: stand in one entry of helpers.po (msgid and msgstr)
COURSE_MESSAGES = {
    "all checks passed": "모든 검사를 통과했습니다",  # passed(): "✔ {what}: all checks passed."
    "write it yourself": "직접 작성하세요",  # helpers/checks/delegation.py
    "within the noise on this machine": "이 머신의 잡음 범위 안",  # bench.compare's verdict
    "of measured peak": "측정한 최대 성능 대비",  # chapter 09's ladder table header
}
#: the JupyterLab labels the English chapters quote in italics -> the pack's msgids they name, one per menu level
#: ("menu\x04Kernel" is the Kernel menu itself). *Run All* is the Run menu's "Run All Cells".
MENUS = {
    "Kernel → Restart Kernel and Run All Cells": ("menu\x04Kernel", "Restart Kernel and Run All Cells…"),
    "Run All": ("Run All Cells",),
}
#: quotes the scan of the English chapters finds in helpers.po's English that are not the course's UI
NOT_UI = {
    "Tried to allocate": "torch's out-of-memory message, which stays English (README.ko.md says so)",
    "CUDA out of memory": "torch's own message, as above",
    "on the device": "emphasis in 07's prose (*on the device*)",
    "on the GPU": "emphasis in 01's prose (*on the GPU*)",
}

_QUOTES = (re.compile(r'"([^"\n]+)"'), re.compile(r"“([^”\n]+)”"), re.compile(r"「([^」\n]+)」"))
_ITALIC = re.compile(r"(?<!\*)\*(?![\s*])([^*\n]+?)(?<!\s)\*(?!\*)")
_MESSAGE_LIKE = re.compile(r"[A-Za-z' ,]+")


def quotes(markdown: str) -> tuple[list[str], list[str]]:
    """(every quoted span: code, double quotes, 「」 and italics; the italic spans alone), outside fenced code."""
    text = _FENCE.sub(" ", markdown)
    code = _CODE.findall(text)
    text = _CODE.sub(" ", text)
    italic = _ITALIC.findall(text)
    quoted = [q for pattern in _QUOTES for q in pattern.findall(text)]
    return code + quoted + italic, italic


def _core(quote: str) -> str:
    return " ".join(quote.replace("...", " ").replace("…", " ").replace("✔", " ").split())


def pack_labels() -> dict[str, str]:
    """The installed Korean language pack's JupyterLab labels: msgid (with its context) -> Korean."""
    spec = importlib.util.find_spec("jupyterlab_language_pack_ko_KR")
    assert spec is not None and spec.submodule_search_locations, (
        "jupyterlab-language-pack-ko-KR is not installed: pyproject.toml requires it (the Korean edition's menus)")
    path = Path(next(iter(spec.submodule_search_locations))) / "locale" / "ko_KR" / "LC_MESSAGES" / "jupyterlab.json"
    return {k: v[0] for k, v in json.loads(path.read_text(encoding="utf-8")).items()
            if isinstance(v, list) and v and v[0]}


def korean_path(english: str, labels: dict[str, str]) -> str:
    return " → ".join(labels[msgid].rstrip("…") for msgid in MENUS[english])


def _label_names(labels: dict[str, str]) -> set[str]:
    """What a label reads as in the English UI: its msgid without its context and without a trailing "…"."""
    return {k.split("\x04")[-1].rstrip("…") for k in labels}


def english_cells() -> dict[str, dict[str, str]]:
    return {ch: {c.id: c.source for c in nbformat.read(ROOT / "solutions" / ch / f"{ch}.ipynb", as_version=4).cells
                 if c.cell_type == "markdown"} for ch in chapters()}


def korean_cells() -> dict[str, dict[str, str]]:
    """What a Korean learner reads: the markdown of ko/solutions (built from the chapter catalogs)."""
    root = tr.edition_root(ROOT) / "solutions"
    return {ch: {c.id: c.source for c in nbformat.read(root / ch / f"{ch}.ipynb", as_version=4).cells
                 if c.cell_type == "markdown"} for ch in chapters()}


def unregistered(english: dict[str, dict[str, str]], messages: list[str], labels: dict[str, str]) -> list[str]:
    """Quotes of the English chapters that look like the course's UI but are in no registry: a message (three words or
    more of plain English that stand in a helpers.po msgid), or a menu (an italic span with "→", or one whose every
    part is a JupyterLab label)."""
    names = _label_names(labels)
    found = []
    for chapter, cells in english.items():
        for cid, text in cells.items():
            every, italic = quotes(text)
            for q in every:
                core = _core(q)
                if (len(core.split()) >= 3 and _MESSAGE_LIKE.fullmatch(core) and any(core in m for m in messages)
                        and not any(key in core for key in COURSE_MESSAGES) and core not in NOT_UI):
                    found.append(f"{chapter} {cid}: quotes the course's message {q!r}: add it to COURSE_MESSAGES or NOT_UI")
            for q in italic:
                parts = [p.strip().rstrip("…") for p in q.split("→")]
                if ("→" in q or all(p in names for p in parts)) and q not in MENUS:
                    found.append(f"{chapter} {cid}: quotes the JupyterLab label {q!r}: add it to MENUS")
    return found


def misquoted(english: dict[str, dict[str, str]], korean: dict[str, dict[str, str]],
              labels: dict[str, str]) -> list[str]:
    """Where an English cell quotes a registered message or menu and the Korean cell does not quote what the Korean
    learner sees, and Korean menu paths (italics with "→") that are not the pack's labels."""
    found = []
    korean_names = set(labels.values())
    for chapter, cells in english.items():
        for cid, text in cells.items():
            ko_text = korean.get(chapter, {}).get(cid, "")
            ko_every, ko_italic = quotes(ko_text)
            every, italic = quotes(text)
            for en, ko in COURSE_MESSAGES.items():
                if any(en in _core(q) for q in every) and not any(ko in _core(q) for q in ko_every):
                    found.append(f"{chapter} {cid}: the English quotes {en!r}; the Korean must quote {ko!r}, "
                                 "which is what the Korean learner sees")
            for en in MENUS:
                want = korean_path(en, labels)
                if en in italic and want not in [q.rstrip("…") for q in ko_italic]:
                    found.append(f"{chapter} {cid}: the English quotes the menu *{en}*; the Korean must quote "
                                 f"*{want}*, as JupyterLab shows it in Korean")
            for q in ko_italic:
                parts = [p.strip().rstrip("…") for p in q.split("→")]
                if "→" in q and q not in MENUS and not all(p in korean_names for p in parts):
                    found.append(f"{chapter} {cid}: *{q}* is not a menu path of the Korean JupyterLab")
    return found


@pytest.fixture(scope="module")
def catalog():
    return tr.load(tr.messages_path(ROOT))


@pytest.fixture(scope="module")
def labels():
    return pack_labels()


def test_each_registered_message_is_one_entry_of_the_catalog(catalog):
    for en, ko in COURSE_MESSAGES.items():
        assert any(m.id and en in m.id and ko in m.string for m in catalog), (
            f"no entry of helpers.po has {en!r} in its English and {ko!r} in its Korean: fix COURSE_MESSAGES")


def test_each_registered_menu_is_the_korean_packs(labels):
    for en, msgids in MENUS.items():
        assert all(msgid in labels for msgid in msgids), f"{en}: {msgids} not all in the pack"
        assert all(re.search(r"[가-힣]", labels[msgid]) for msgid in msgids), f"{en}: the pack does not translate it"
    assert korean_path("Kernel → Restart Kernel and Run All Cells", labels) == "커널 → 커널 재시작 후 모든 셀 실행"


def test_no_quoted_message_or_menu_of_the_english_chapters_is_left_out_of_the_registries(catalog, labels):
    found = unregistered(english_cells(), [m.id for m in catalog if m.id and isinstance(m.id, str)], labels)
    assert not found, "\n".join(found)


def test_the_korean_chapters_quote_what_the_korean_learner_sees(labels):
    """Chapter text (the chapter catalogs): the Korean quotes the Korean message and the Korean menu."""
    found = misquoted(english_cells(), korean_cells(), labels)
    assert not found, "\n".join(found)


def test_the_quote_rules_can_fail(catalog, labels):
    english = {"00": {"a": "Each prints `✔ ... all checks passed`; the check says \"write it yourself\". Run "
                           "*Kernel → Restart Kernel and Run All Cells*, then *Run All*."}}
    wrong = {"00": {"a": "각 셀은 `✔ ... all checks passed`를 출력하고, 검사가 \"write it yourself\"라고 알립니다. "
                         "*Kernel → Restart Kernel and Run All Cells*, 그다음 *모두 실행*을 하세요."}}
    found = misquoted(english, wrong, labels)
    assert len(found) == 4, found
    assert all(f.startswith(f"00 a: the English quotes {what}") for f, what in zip(found, [
        "'all checks passed'; the Korean must quote '모든 검사를 통과했습니다'",
        "'write it yourself'; the Korean must quote '직접 작성하세요'",
        "the menu *Kernel → Restart Kernel and Run All Cells*; the Korean must quote *커널 → 커널 재시작 후 모든 셀 실행*",
        "the menu *Run All*; the Korean must quote *모든 셀 실행*"])), found
    right = {"00": {"a": "각 셀은 `✔ …: 모든 검사를 통과했습니다.`를 출력하고, 검사가 \"직접 작성하세요\"라고 알립니다. "
                         "*커널 → 커널 재시작 후 모든 셀 실행*(영어 메뉴: *Kernel → Restart Kernel and Run All Cells*), "
                         "그다음 *모든 셀 실행*을 하세요."}}
    assert misquoted(english, right, labels) == []
    invented = {"00": {"a": right["00"]["a"].replace("*커널 → 커널 재시작 후 모든 셀 실행*",
                                                   "*커널 → 커널 재시작 후 모든 셀 실행*, *커널 → 모든 셀 다시 실행*")}}
    assert misquoted(english, invented, labels) == ["00 a: *커널 → 모든 셀 다시 실행* is not a menu path of the Korean "
                                                    "JupyterLab"]
    # the scan finds a quoted message or menu that no registry names
    messages = [m.id for m in catalog if m.id and isinstance(m.id, str)]
    assert unregistered({"00": {"a": "the check says \"is not written yet\" and *File → Save Notebook*"}},
                        messages, labels) == [
        "00 a: quotes the course's message 'is not written yet': add it to COURSE_MESSAGES or NOT_UI",
        "00 a: quotes the JupyterLab label 'File → Save Notebook': add it to MENUS"]
