"""The Korean edition's text: one gettext catalog per chapter, one entry per markdown cell, keyed by the cell's id.

``solutions/`` stays the only place a chapter's code, checks and English text are edited. The Korean text of
chapter ``NN_topic`` lives in ``translations/ko/NN_topic.po``: each entry's context (``msgctxt``) is the id
of one markdown cell, its ``msgid`` that cell's English source, its ``msgstr`` the Korean. Catalogs are
read and written with Babel (``babel.messages``), the library Jinja, Flask and Sphinx translate with.

* :func:`update` brings a catalog in step with the English: a new cell gets an empty entry; a cell whose
  English changed keeps its Korean but is marked **fuzzy**, with the old English kept as ``#| msgid`` so a
  translator sees what changed; a cell that is gone is dropped.
* :func:`problems` lists what keeps a catalog from being used: untranslated entries, fuzzy ones, entries
  whose English is not the notebook's any more, and inline code (`` `...` ``) that the Korean lost. The
  suite fails on any (``tests/course/test_translation.py``), so an English edit fails CI until its Korean entry is
  updated: a reader never gets Korean that says something the English no longer says. It also holds the
  edition to one voice: a glossary term the Korean left out, a second Korean word for a glossary term
  (:func:`variant_problems`, the glossary's column of rejected variants), the formal ``-십시오`` register
  (:func:`register_problems`: the edition writes ``-세요``), an English colon after a Korean sentence ending
  (:func:`colon_problems`: "…합니다: …" is English punctuation, Korean ends the sentence) and a gloss on a
  transliteration (:func:`gloss_problems`: 커널(kernel) says the same word twice) are problems too;
  :func:`message_problems` applies the same rules to the helpers' messages when it is given the glossary.
  A quotation of the source lesson (``*"…"*``, :data:`_QUOTE`) is the lesson's own words and none of these
  rules' business; :func:`quote_problems` holds it to those words instead.
* :func:`korean_notebook` builds the Korean instructor notebook from the English one and the catalog:
  markdown replaced, code cells unchanged, one tagged setting cell before the opening cell that selects the
  language for the helpers' messages (:data:`SETTING_CELL`). Where an entry cannot be used (only while a
  translator works: CI refuses it) the English cell stays and says so in Korean, visibly.

Usage: ``python -m course_tools translate update|build|check [CHAPTER...]``.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import nbformat
from babel.messages.catalog import Catalog
from babel.messages.pofile import read_po, unescape, write_po

__all__ = ["LANGUAGE", "SETTING_CELL", "SETTING_TAG", "Term", "catalog_path", "colon_problems", "edition_root",
           "gloss_problems", "glossary", "korean_notebook", "load", "problems", "quote_problems", "register_problems",
           "save", "source_lesson", "update", "variant_problems"]

LANGUAGE = "ko"
SETTING_TAG = "language"
SETTING_CELL = ('# 이 판(edition)의 언어: 도우미(helpers)의 메시지, 검사 결과, 그래프가 한국어로 나옵니다.\n'
                'from helpers import i18n\n\ni18n.use("ko")')
FALLBACK_NOTE = ("> **아직 번역되지 않은 셀입니다** (영어 원문이 바뀌었거나 번역이 없습니다). "
                 "아래는 영어 원문입니다.\n\n")
_CODE_SPAN = re.compile(r"`[^`]+`")  # a code span may run over a line break, as in Markdown
_FENCED = re.compile(r"```.*?```", re.S)


def edition_root(root: Path, language: str = LANGUAGE) -> Path:
    """The Korean edition's own course folder (``ko/``): its nbgrader_config.py, solutions/ and notebooks/.

    One course folder per edition, because nbgrader scores a notebook missing from an assignment 0: a Korean
    class submits ``ko/notebooks/NN/NN.ipynb`` into the Korean course, with the same grade ids and points."""
    return root / language


def catalog_path(root: Path, chapter: str, language: str = LANGUAGE) -> Path:
    return root / "translations" / language / f"{chapter}.po"


def markdown_cells(nb: nbformat.NotebookNode) -> list[nbformat.NotebookNode]:
    return [c for c in nb.cells if c.cell_type == "markdown"]


def load(path: Path) -> Catalog:
    """The catalog at ``path``, its ``#| msgid`` lines read back as the previous English, not as comments.

    Why: Babel (2.19) writes a fuzzy entry's old English as ``#| msgid "..."`` but reads those lines back as
    translator comments, so every load-and-save kept them as ``# |`` comments, re-wrapped, long after the entry was
    translated again (173 such lines had piled up in ``helpers.po``). The course's catalogs hold no translator
    comments ("edit msgstr only", each header says), so every comment line is dropped here; a fuzzy entry keeps its
    previous English, read from them.
    """
    with path.open("rb") as f:
        catalog = read_po(f, locale=LANGUAGE)
    for message in catalog:
        if message.id:
            previous = _previous_id(message.user_comments) if message.fuzzy else None
            message.user_comments = []
            message.previous_id = [previous] if previous else []
    return catalog


def _previous_id(comments: list[str]) -> str | None:
    """The previous English a fuzzy entry's ``#| msgid "..."`` lines held (Babel wraps them at 76 columns)."""
    text = " ".join(c[1:].strip() for c in comments if c.startswith("|"))
    if not text.startswith('msgid "') or not text.endswith('"'):
        return None
    return unescape(text[len("msgid "):])


def save(catalog: Catalog, path: Path) -> None:
    """Write ``catalog`` to ``path``; an entry keeps its previous English (``#| msgid``) only while it is fuzzy."""
    for message in catalog:
        if message.id and not message.fuzzy:
            message.previous_id = []
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as f:
        write_po(f, catalog, width=0, include_previous=True, sort_output=False, omit_header=False)


def update(chapter: str, nb: nbformat.NotebookNode, old: Catalog | None) -> Catalog:
    """The catalog for ``nb``'s markdown cells, carrying over ``old``'s Korean (fuzzy where the English moved)."""
    previous = {m.context: m for m in old if m.id and m.context} if old is not None else {}
    # the dates of the first update, kept: an update that changes no text changes no byte
    created = old.creation_date if old is not None else datetime.now(timezone.utc).replace(second=0, microsecond=0)
    catalog = Catalog(locale=LANGUAGE, project=f"gpu-pytorch-course {chapter}", version="1", fuzzy=False,
                      creation_date=created, revision_date=created,
                      msgid_bugs_address="", last_translator="", language_team="",
                      header_comment=f"# Korean text of chapter {chapter}: one entry per markdown cell, keyed by its "
                                     "id.\n# Edit msgstr only; `python -m course_tools translate update` writes the "
                                     "rest.")
    for cell in markdown_cells(nb):
        before = previous.get(cell.id)
        string, flags, previous_id = "", (), ()
        if before is not None and before.string:
            string = before.string
            if before.id != cell.source:
                flags, previous_id = ("fuzzy",), (before.previous_id or (before.id,))[0]
            elif before.fuzzy:
                flags, previous_id = ("fuzzy",), before.previous_id[0] if before.previous_id else ()
        catalog.add(cell.source, string, context=cell.id, flags=flags,
                    previous_id=previous_id if previous_id else ())
    return catalog


def lost_code(english: str, korean: str) -> list[str]:
    """Code of the English (inline spans, fenced blocks) that the Korean does not contain: code stays as it is.

    Spaces and line breaks count as one space on both sides: a translator may wrap a line elsewhere."""
    flat = " ".join(korean.split())
    inline = _FENCED.sub(" ", english)  # a fenced block's backticks are not code spans (the block stays whole anyway)
    spans = dict.fromkeys(" ".join(span.split()) for span in _FENCED.findall(english) + _CODE_SPAN.findall(inline))
    return [span for span in spans if span not in flat]


@dataclass(frozen=True)
class Term:
    """One line of the glossary: the English term, its one Korean term, and the Korean it must not be given as.

    ``rejected`` variants are wrong where the English uses the term (단계 is a stage elsewhere, 컴퓨터 a
    computer); ``banned`` ones (``!`` in the glossary) are wrong wherever they appear (파라미터, 대기열);
    ``allowed`` phrases (``+``) contain a variant but are right (활성화 함수, an activation function).
    ``required`` is False for an English word with other senses (``~`` in the glossary: torchrun *launches*
    processes, NaN *spreads*): its Korean term is not asked for wherever the word appears, only its variants
    are refused. ``transliterated`` (``=`` before the Korean term: =커널) marks Korean that is the English word
    sounded out, which is never glossed: 커널(kernel) says one word twice (:func:`gloss_problems`)."""

    english: str
    korean: str
    rejected: tuple[str, ...] = ()
    banned: tuple[str, ...] = ()
    allowed: tuple[str, ...] = ()
    required: bool = True
    transliterated: bool = False


def glossary(root: Path, language: str = LANGUAGE) -> list[Term]:
    """The terms of ``translations/<language>/glossary.tsv``: one per line, tab-separated English term (``~``
    before one with other senses), Korean term (``=`` before a transliteration), rejected Korean variants
    (comma-separated, ``!`` before one that is wrong everywhere, ``+`` before a phrase that contains a variant and
    is right) and a note; ``#`` lines are comments."""
    terms = []
    for line in (root / "translations" / language / "glossary.tsv").read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            english, korean, variants, *_ = line.split("\t") + ["", ""]
            variants = [v.strip() for v in variants.split(",") if v.strip()]
            terms.append(Term(english.strip().lstrip("~").strip(), korean.strip().lstrip("=").strip(),
                              rejected=tuple(v for v in variants if v[0] not in "!+"),
                              banned=tuple(v[1:].strip() for v in variants if v.startswith("!")),
                              allowed=tuple(v[1:].strip() for v in variants if v.startswith("+")),
                              required=not english.strip().startswith("~"),
                              transliterated=korean.strip().startswith("=")))
    return terms


def _terms(terms: Iterable[Term] | Mapping[str, str] | None) -> list[Term]:
    """Glossary terms from a :func:`glossary` list or a plain ``{English: Korean}`` mapping."""
    if terms is None:
        return []
    if isinstance(terms, Mapping):
        return [Term(english, korean) for english, korean in terms.items()]
    return list(terms)


def _prose(markdown: str) -> str:
    """The text outside code spans, code blocks and link targets: where a glossary term is a word, not code."""
    markdown = _FENCED.sub(" ", markdown)
    markdown = _CODE_SPAN.sub(" ", markdown)
    return re.sub(r"\]\([^)]*\)", "] ", markdown)


#: A quotation of the source lesson, as the chapters write one: in italics and quotation marks, *"…"* (bold
#: inside it allowed, never across a blank line). Its words are the lesson's: the Korean edition quotes the
#: Korean lesson as it is (그래디언트, 커널 실행, a colon where it put one), so the edition's style rules
#: (:func:`style_problems`) skip it, and :func:`quote_problems` checks that it is the lesson's words.
_QUOTE = re.compile(r'(?<!\*)\*"((?:(?!\n\s*\n).)+?)"\*(?!\*)', re.S)
_HANGUL = re.compile(r"[가-힣]")


def _own_words(korean: str) -> str:
    """The Korean prose that is the edition's own: outside code and outside quotations of the source lesson."""
    return _prose(_QUOTE.sub(" ", korean))


def _flat(text: str) -> str:
    """Text as words only: no Markdown emphasis or code marks, every run of white space one space."""
    return " ".join(re.sub(r"\*\*|`", "", text).split())


def source_lesson(root: Path) -> str:
    """The Korean lesson the course follows (``docs/source/9-1_gpu_lesson.ko.txt``): what a quotation quotes."""
    return (root / "docs" / "source" / "9-1_gpu_lesson.ko.txt").read_text(encoding="utf-8")


def quote_problems(korean: str, source: str) -> list[str]:
    """Quotations in ``korean`` (``*"…"*`` with Hangul in them) whose words are not the source lesson's.

    A quotation may leave words out with "…" and mark code (`` `nvcc --version` ``) or emphasis; every piece
    between the ellipses must be in the lesson as it is written. A quotation in English (torch's documentation,
    an error message) is not the lesson's and not checked here."""
    lesson = _flat(source)
    found = []
    for quote in _QUOTE.findall(korean):
        if not _HANGUL.search(quote):
            continue
        pieces = [piece.strip(" ,.") for piece in re.split(r"…|\.\.\.", _flat(quote))]
        if any(piece and piece not in lesson for piece in pieces):
            found.append(_flat(quote)[:60])
    return found


def _uses(prose: str, term: str, endings: str = "s|es") -> bool:
    """Whether lower-case English ``prose`` uses ``term`` as a word (a plural, or another listed ending, too)."""
    return re.search(rf"\b{re.escape(term.lower())}(?:{endings})?\b", prose) is not None


def glossary_misses(english: str, korean: str, terms: Iterable[Term] | Mapping[str, str]) -> list[str]:
    """Glossary terms the English prose uses whose Korean term the translation lacks ("device -> 장치")."""
    prose = _prose(english).lower()
    return [f"{t.english} -> {t.korean}" for t in _terms(terms)
            if t.required and _uses(prose, t.english) and t.korean not in korean]


def variant_problems(english: str, korean: str, terms: Iterable[Term] | Mapping[str, str]) -> list[str]:
    """Second Korean words for a glossary term in the Korean prose ("layer -> 계층, not 층").

    A rejected variant counts where the English (prose, any ending: launch, launches, launched) uses the term,
    a banned one anywhere. The Korean term itself and the term's allowed phrases are taken out first, so a
    variant inside them (층 in 계층, 원본 in 원본 문서, 활성화 in 활성화 함수) is not one. Code spans and link
    targets are not prose: `tensor.shape` names no 모양; a quotation of the source lesson is the lesson's words."""
    en = _prose(english).lower()
    found = []
    for t in _terms(terms):
        if not (t.banned or t.rejected):
            continue
        ko = _own_words(korean)
        for right in sorted({t.korean, *t.allowed} - {""}, key=len, reverse=True):
            ko = ko.replace(right, " ")
        wrong = [v for v in t.banned if v in ko]
        if t.rejected and _uses(en, t.english, "s|es|d|ed|ing"):
            wrong += [v for v in t.rejected if v in ko and v not in wrong]
        if wrong:
            found.append(f"{t.english} -> {t.korean}, not {', '.join(wrong)}")
    return found


#: The formal imperative and question (하십시오, 하십니까): the edition speaks 합니다 with -세요 imperatives
_FORMAL = re.compile(r"[가-힣]*(?:십시오|십니까)")


def register_problems(korean: str) -> list[str]:
    """Words of the Korean prose in the -십시오 register, which the edition does not use ("실행하십시오")."""
    return list(dict.fromkeys(_FORMAL.findall(_own_words(korean))))


#: A Korean sentence ending (합니다, 하세요, 할까요, 하나요) followed by an English colon: "…없습니다: 스텝의 FLOP…".
#: Korean ends the sentence there ("…없습니다. 스텝의 FLOP…", "…다음과 같습니다."); a colon after a noun
#: ("받은 값: {x}", "오류 메시지: {err}") is Korean too and not matched.
_COLON = re.compile(r"[가-힣]*(?:니다|세요|까요|나요)\s*:(?!:)")


def colon_problems(korean: str) -> list[str]:
    """Sentence endings of the Korean prose followed by an English colon ("실행될 수 없습니다:")."""
    return list(dict.fromkeys(" ".join(hit.split()) for hit in _COLON.findall(_own_words(korean))))


def gloss_problems(korean: str, terms: Iterable[Term] | Mapping[str, str]) -> list[str]:
    """Transliterations glossed with their own English word (머신(machine), 커널 런치(launch)): the glossary's
    ``=`` terms. A real translation is glossed once per chapter (변화도(gradient)); a transliteration is the
    English word already."""
    ko = _own_words(korean)
    found = []
    for t in _terms(terms):
        if t.transliterated and t.korean:
            pattern = rf"{re.escape(t.korean)}\s*\(\s*{re.escape(t.english)}(?:s|es)?\b"
            found += [f"{t.korean}({t.english})"] if re.search(pattern, ko, re.I) else []
    return found


def style_problems(english: str, korean: str, terms: Iterable[Term] | Mapping[str, str]) -> list[str]:
    """The edition's voice in one translation: a second Korean word for a glossary term, the -십시오 register,
    an English colon after a sentence ending, a gloss on a transliteration. Quotations of the source lesson are
    left out: their words are the lesson's (:func:`quote_problems`)."""
    variants = variant_problems(english, korean, terms)
    formal = register_problems(korean)
    colons = colon_problems(korean)
    glosses = gloss_problems(korean, terms)
    return ([f"one Korean term per glossary term: {'; '.join(variants)}"] if variants else []) + \
           ([f"-십시오 register (the edition writes -세요): {', '.join(formal)}"] if formal else []) + \
           ([f"a colon after a sentence ending (end the sentence with a period): {', '.join(colons)}"]
            if colons else []) + \
           ([f"a gloss on a transliteration (write the Korean alone): {', '.join(glosses)}"] if glosses else [])


def problems(catalog: Catalog, nb: nbformat.NotebookNode,
             terms: Iterable[Term] | Mapping[str, str] | None = None, source: str | None = None) -> list[str]:
    """Every reason the catalog cannot stand for ``nb``'s English, one line each (empty: usable).

    ``terms`` (the :func:`glossary`) adds the edition's one term per idea: glossary terms left out, second
    Korean words for a term, glosses on transliterations. The -십시오 register and a colon after a sentence
    ending are problems with or without it. ``source`` (:func:`source_lesson`) adds quotations of the lesson
    that are not its words."""
    terms = _terms(terms)
    found = []
    entries = {m.context: m for m in catalog if m.id}
    for cell in markdown_cells(nb):
        m = entries.pop(cell.id, None)
        if m is None:
            found.append(f"cell {cell.id}: no entry (run `python -m course_tools translate update`)")
        elif m.id != cell.source:
            found.append(f"cell {cell.id}: the English changed since the catalog was updated "
                         "(run `python -m course_tools translate update`, then translate the fuzzy entry)")
        elif not m.string:
            found.append(f"cell {cell.id}: not translated")
        elif m.fuzzy:
            found.append(f"cell {cell.id}: fuzzy (the English changed: check the Korean against it, then remove "
                         "the fuzzy flag)")
        else:
            lost = lost_code(m.id, m.string)
            if lost:
                found.append(f"cell {cell.id}: the Korean lost inline code {', '.join(lost[:4])}")
            misses = glossary_misses(m.id, m.string, terms)
            if misses:
                found.append(f"cell {cell.id}: glossary terms not used: {'; '.join(misses)}")
            found += [f"cell {cell.id}: {line}" for line in style_problems(m.id, m.string, terms)]
            if source is not None:
                found += [f"cell {cell.id}: a quotation of the source lesson that is not its words: {quote!r}"
                          for quote in quote_problems(m.string, source)]
    found += [f"entry {ctx}: no such markdown cell any more" for ctx in entries]
    return found


def usable(catalog: Catalog) -> dict[str, str]:
    """cell id -> Korean, for the entries that are translated, not fuzzy, and keep every inline code span."""
    return {m.context: m.string for m in catalog
            if m.id and m.context and m.string and not m.fuzzy and not lost_code(m.id, m.string)}


def korean_notebook(nb: nbformat.NotebookNode, catalog: Catalog) -> nbformat.NotebookNode:
    """The Korean instructor notebook: markdown from the catalog, code unchanged, the setting cell inserted."""
    korean = copy.deepcopy(nb)
    text = {m.context: m for m in catalog if m.id}
    good = usable(catalog)
    for cell in markdown_cells(korean):
        m = text.get(cell.id)
        if cell.id in good and m is not None and m.id == cell.source:
            cell.source = good[cell.id]
        else:
            cell.source = FALLBACK_NOTE + cell.source
    setting = nbformat.v4.new_code_cell(SETTING_CELL, id="ko-language")
    setting.metadata["tags"] = [SETTING_TAG]
    opening = next(i for i, c in enumerate(korean.cells)
                   if c.cell_type == "code" and "colab" not in c.metadata.get("tags", []))
    korean.cells.insert(opening, setting)  # before the opening cell, so its first line is Korean too
    korean.metadata["language_info"] = {**korean.metadata.get("language_info", {}), "name": "python"}
    korean.metadata["course_edition"] = LANGUAGE
    return korean


def chapters(root: Path) -> list[str]:
    return sorted(p.parent.name for p in (root / "solutions").glob("*/*.ipynb") if p.parent.name == p.stem)


def run(command: str, root: Path, only: Iterable[str] = ()) -> int:
    """``update``: catalogs in step with the English; ``build``: the Korean notebooks; ``check``: problems."""
    status = 0
    only = list(only)
    if not only or "helpers" in only:  # the helpers' messages belong to every chapter ("helpers": only them)
        if command == "update":
            update_messages(root)
            print(f"updated {messages_path(root).relative_to(root)}")
        elif command == "build":
            print(f"compiled {compile_messages(root).relative_to(root)}")
        elif command == "check":
            found = message_problems(load(messages_path(root)), extract_messages(root), glossary(root))
            for line in found:
                print(f"helpers: {line}")
            status |= bool(found)
    for chapter in [c for c in only if c != "helpers"] if only else chapters(root):
        nb = nbformat.read(root / "solutions" / chapter / f"{chapter}.ipynb", as_version=4)
        path = catalog_path(root, chapter)
        old = load(path) if path.exists() else None
        if command == "update":
            save(update(chapter, nb, old), path)
            print(f"updated {path.relative_to(root)}")
        elif command == "build":
            out = edition_root(root) / "solutions" / chapter / f"{chapter}.ipynb"
            out.parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(korean_notebook(nb, old or Catalog(locale=LANGUAGE)), out)
            print(f"built {out.relative_to(root)}")
        elif command == "check":
            found = (problems(old, nb, glossary(root), source_lesson(root)) if old is not None
                     else [f"{path.relative_to(root)}: no catalog"])
            for line in found:
                print(f"{chapter}: {line}")
            status |= bool(found)
        else:
            raise ValueError(f"unknown command {command!r}: update, build or check")
    return status


# --------------------------------------------------------------------------- the helpers' own messages


def messages_path(root: Path, language: str = LANGUAGE) -> Path:
    return root / "translations" / language / "helpers.po"


def mo_path(root: Path, language: str = LANGUAGE) -> Path:
    return root / "helpers" / "locale" / language / "LC_MESSAGES" / "helpers.mo"


def extract_messages(root: Path) -> Catalog:
    """Every string the helpers pass to ``i18n._``, with where it is (Babel's Python extractor)."""
    from babel.messages.extract import extract_from_dir

    template = Catalog(locale=LANGUAGE, project="gpu-pytorch-course helpers", version="1")
    for filename, lineno, message, comments, context in extract_from_dir(
            str(root / "helpers"), method_map=[("**.py", "python")], keywords={"_": None, "N_": None},
            comment_tags=("Translators:",)):
        template.add(message, None, [(f"helpers/{filename}", lineno)], auto_comments=comments, context=context)
    for chapter in chapters(root):
        nb = nbformat.read(root / "solutions" / chapter / f"{chapter}.ipynb", as_version=4)
        for cell in nb.cells:
            if cell.cell_type == "code":
                for lineno, message in notebook_messages(cell.source):
                    template.add(message, None, [(f"solutions/{chapter} cell {cell.id}", lineno)])
    return template


#: English that notebook code hands to a helper which shows it through ``_()``: the title under a passed check,
#: the role ``describe_leader`` names, the titles and axis labels the course's plot functions draw, and the
#: chapters' own printed text, written ``tr("...")`` (helpers.i18n.tr)
_NOTEBOOK_POSITIONAL = {"passed": 0, "describe_leader": 1, "stamp": 1, "tr": 0}
_NOTEBOOK_KEYWORDS = ("title", "xlabel", "ylabel")


def notebook_messages(source: str) -> list[tuple[int, str]]:
    """(line, English) of each string literal a code cell passes where a helper translates it.

    Not those inside ``### BEGIN HIDDEN TESTS``: ``helpers.po`` ships in the installed package every learner
    has, and a hidden check's label ("a layer with a 0-d parameter and a buffer") tells what the hidden case
    is. Those labels stay English in both editions."""
    import ast

    code = "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    hidden, inside = set(), False
    for number, line in enumerate(code.splitlines(), start=1):
        inside = (inside or "### BEGIN HIDDEN TESTS" in line) and "### END HIDDEN TESTS" not in line
        if inside:
            hidden.add(number)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or node.lineno in hidden:
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        owner = func.value.id if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) else ""
        index = _NOTEBOOK_POSITIONAL.get(name)
        if index is not None and len(node.args) > index and isinstance(node.args[index], ast.Constant) \
                and isinstance(node.args[index].value, str):
            found.append((node.lineno, node.args[index].value))
        if owner == "plots":
            found += [(node.lineno, k.value.value) for k in node.keywords
                      if k.arg in _NOTEBOOK_KEYWORDS and isinstance(k.value, ast.Constant) and isinstance(k.value.value, str)]
    return found


def update_messages(root: Path) -> Catalog:
    """``helpers.po`` in step with the helpers' code: Babel's update marks a changed message fuzzy."""
    path = messages_path(root)
    template = extract_messages(root)
    if path.exists():
        catalog = load(path)
        catalog.update(template, update_creation_date=False)
        catalog.obsolete.clear()  # a message the code no longer has is not kept
    else:
        catalog = Catalog(locale=LANGUAGE, project="gpu-pytorch-course helpers", version="1",
                          creation_date=datetime.now(timezone.utc).replace(second=0, microsecond=0))
        catalog.update(template)
    catalog.revision_date = catalog.creation_date
    save(catalog, path)
    return catalog


def placeholders(text: str) -> set[str]:
    """The ``{name}`` fields of a ``str.format`` message (``{{`` is a literal brace, not a field)."""
    import string

    try:
        return {field for _, field, _, _ in string.Formatter().parse(text) if field is not None}
    except ValueError:
        return {"<unbalanced braces>"}


def message_problems(catalog: Catalog, template: Catalog,
                     terms: Iterable[Term] | Mapping[str, str] | None = None) -> list[str]:
    """Why ``helpers.po`` cannot be compiled as it is: messages missing, untranslated, fuzzy, placeholders changed.

    Given ``terms`` (the :func:`glossary`), also a message that breaks the chapters' style rules
    (:func:`style_problems`: a second Korean word for a glossary term, the -십시오 register, a colon after a
    sentence ending, a gloss on a transliteration); a message is not asked to use every glossary term."""
    terms = _terms(terms)
    found = []
    have = {m.id: m for m in catalog if m.id}
    for m in template:
        if not m.id:
            continue
        t = have.get(m.id)
        where = ", ".join(f"{f}:{n}" for f, n in m.locations[:1])
        if t is None:
            found.append(f"{where}: {m.id[:60]!r} has no entry (run `python -m course_tools translate update`)")
        elif not t.string:
            found.append(f"{where}: {m.id[:60]!r} is not translated")
        elif t.fuzzy:
            found.append(f"{where}: {m.id[:60]!r} is fuzzy (the English changed)")
        elif placeholders(m.id) != placeholders(t.string):
            found.append(f"{where}: {m.id[:60]!r}: placeholders {sorted(placeholders(m.id))} became "
                         f"{sorted(placeholders(t.string))}")
        elif terms:
            found += [f"{where}: {m.id[:60]!r}: {line}" for line in style_problems(m.id, t.string, terms)]
    return found





def compile_messages(root: Path) -> Path:
    """``helpers.po`` -> ``helpers/locale/ko/LC_MESSAGES/helpers.mo`` (fuzzy entries left out: English shows)."""
    from babel.messages.mofile import write_mo

    out = mo_path(root)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("wb") as f:
        write_mo(f, load(messages_path(root)), use_fuzzy=False)
    return out
