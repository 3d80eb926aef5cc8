"""The Korean edition stays in step with the English (course_tools/translation.py, helpers/i18n.py).

Cheap on purpose: nothing here runs a chapter. The Korean notebooks share every code cell with the English
ones (a test proves it), so the English runs under nbval cover their code; what the edition adds (text,
messages, the setting cell, a Hangul font) is checked here.
"""

from __future__ import annotations

import re
import subprocess
import sys

import nbformat
import pytest
from babel.messages.catalog import Catalog

from support.layout import ROOT, chapters
from course_tools import translation as tr

CHAPTERS = chapters()


def english(chapter: str) -> nbformat.NotebookNode:
    return nbformat.read(ROOT / "solutions" / chapter / f"{chapter}.ipynb", as_version=4)


def korean(chapter: str) -> nbformat.NotebookNode:
    return nbformat.read(ROOT / tr.LANGUAGE / "solutions" / chapter / f"{chapter}.ipynb", as_version=4)


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_markdown_cell_has_a_current_korean_entry(chapter):
    """Fails on an English cell changed since its Korean was written (fuzzy), an untranslated or new cell, inline
    code the Korean lost, a glossary term left out or given a second Korean word, or the -십시오 register:
    `python -m course_tools translate check` says which."""
    catalog = tr.load(tr.catalog_path(ROOT, chapter))
    found = tr.problems(catalog, english(chapter), tr.glossary(ROOT))
    assert not found, f"{chapter}: the Korean catalog is not in step with the English:\n" + "\n".join(found)


def _translations(catalog):
    return [m for m in catalog if m.id and m.string and not m.fuzzy]


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_the_chapter_text_uses_one_korean_term_per_idea(chapter):
    """The glossary's rejected variants (translations/ko/glossary.tsv, column 3): 강좌 and not 강의 or 과정, 머신 and
    not 컴퓨터, 계층 and not 층, ... in every cell, so a learner meets one word for one idea."""
    terms = tr.glossary(ROOT)
    found = {m.context: hits for m in _translations(tr.load(tr.catalog_path(ROOT, chapter)))
             if (hits := tr.variant_problems(m.id, m.string, terms))}
    assert not found, f"{chapter}: a glossary term translated a second way: {found}"


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_the_chapter_text_speaks_the_seyo_register(chapter):
    """One register for the whole edition: 합니다 declaratives with -세요 imperatives, never -십시오."""
    found = {m.context: hits for m in _translations(tr.load(tr.catalog_path(ROOT, chapter)))
             if (hits := tr.register_problems(m.string))}
    assert not found, f"{chapter}: the -십시오 register: {found}"


_LINK = re.compile(r"\]\(([^)\s]+)\)")


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_relative_links_in_the_korean_text_open_korean_notebooks(chapter):
    """A relative link (00's "next chapter", 07's checklist) resolves inside ko/solutions and ko/notebooks, so the
    Korean learner is not sent to the English edition."""
    links = [target.split("#")[0] for m in _translations(tr.load(tr.catalog_path(ROOT, chapter)))
             for target in _LINK.findall(m.string) if "://" not in target and not target.startswith("#")]
    edition = tr.edition_root(ROOT).resolve()
    for folder in ("solutions", "notebooks"):
        opened = {target: (edition / folder / chapter / target).resolve() for target in links}
        missing = [target for target, path in opened.items() if not path.is_file() or edition not in path.parents]
        assert not missing, f"ko/{folder}/{chapter}: links that open no Korean notebook: {missing}"


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_the_committed_korean_notebook_is_a_fresh_build(chapter):
    built = tr.korean_notebook(english(chapter), tr.load(tr.catalog_path(ROOT, chapter)))
    assert nbformat.writes(built) == nbformat.writes(korean(chapter)), (
        f"ko/solutions/{chapter} differs from a build: run `python -m course_tools translate build`")


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_code_cells_are_the_english_ones_except_the_setting_cell(chapter):
    code = [c for c in korean(chapter).cells if c.cell_type == "code"]
    setting = [c for c in code if tr.SETTING_TAG in c.metadata.get("tags", [])]
    assert len(setting) == 1 and 'i18n.use("ko")' in setting[0].source
    assert [(c.id, c.source, c.metadata) for c in code if c not in setting] == \
           [(c.id, c.source, c.metadata) for c in english(chapter).cells if c.cell_type == "code"]


EN_STUB, KO_STUB = "# YOUR CODE HERE\n", "# YOUR CODE HERE (여기에 코드를 작성하세요)\n"


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_the_korean_learner_notebook_is_the_english_one_with_the_korean_text(chapter):
    """ko/notebooks (released from ko/solutions with ko/nbgrader_config.py) against notebooks/: the same code cells,
    tags and grade ids, the stub in both languages, the Korean markdown of ko/solutions."""
    en = nbformat.read(ROOT / "notebooks" / chapter / f"{chapter}.ipynb", as_version=4)
    ko = nbformat.read(tr.edition_root(ROOT) / "notebooks" / chapter / f"{chapter}.ipynb", as_version=4)
    code_ko = [c for c in ko.cells if c.cell_type == "code" and tr.SETTING_TAG not in c.metadata.get("tags", [])]

    def meta(cell):  # nbgrader's checksum covers the stub, whose text differs by design
        return {**cell.metadata, "nbgrader": {k: v for k, v in cell.metadata.get("nbgrader", {}).items()
                                              if k != "checksum"}}

    assert [(c.id, c.source.replace(KO_STUB, EN_STUB), meta(c)) for c in code_ko] == \
           [(c.id, c.source, meta(c)) for c in en.cells if c.cell_type == "code"]
    assert any(KO_STUB in c.source for c in code_ko) or not any(EN_STUB in c.source for c in en.cells)
    assert [c.source for c in ko.cells if c.cell_type == "markdown"] == \
           [c.source for c in korean(chapter).cells if c.cell_type == "markdown"]


def _chapter_with(cells: list[tuple[str, str]]) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("import torch", id="open")] + [
        nbformat.v4.new_markdown_cell(text, id=cid) for cid, text in cells]
    return nb


def test_changing_one_english_sentence_makes_its_entry_fuzzy_and_fails_until_it_is_translated():
    before = _chapter_with([("a", "The `device` is chosen once."), ("b", "Unchanged.")])
    catalog = tr.update("x", before, None)
    for m in catalog:
        if m.id:
            m.string = {"a": "`device`는 한 번 고릅니다.", "b": "그대로입니다."}[m.context]
    assert tr.problems(catalog, before) == []
    after = _chapter_with([("a", "The `device` is chosen once, at the top."), ("b", "Unchanged.")])
    assert any("the English changed" in p for p in tr.problems(catalog, after))
    updated = tr.update("x", after, catalog)
    entry = next(m for m in updated if m.context == "a")
    assert entry.fuzzy and entry.previous_id == ["The `device` is chosen once."] and entry.string.startswith("`device`")
    assert tr.problems(updated, after) == ["cell a: fuzzy (the English changed: check the Korean against it, then "
                                           "remove the fuzzy flag)"]
    built = tr.korean_notebook(after, updated)
    assert built.cells[2].source.startswith(tr.FALLBACK_NOTE) and "at the top" in built.cells[2].source
    assert built.cells[3].source == "그대로입니다."


def test_lost_inline_code_and_glossary_misses_are_named():
    nb = _chapter_with([("a", "Call `torch.cuda.synchronize()` to wait for the device.")])
    catalog = tr.update("x", nb, None)
    for m in catalog:
        if m.id:
            m.string = "GPU를 기다리려면 synchronize를 부릅니다."
    found = tr.problems(catalog, nb, {"device": "장치"})
    assert found == ["cell a: the Korean lost inline code `torch.cuda.synchronize()`",
                     "cell a: glossary terms not used: device -> 장치"]
    for m in catalog:
        if m.id:
            m.string = "`torch.cuda.synchronize()`를 불러 GPU를 기다립니다."
    assert tr.problems(catalog, nb, {"device": "장치"}) == ["cell a: glossary terms not used: device -> 장치"]


GLOSSARY = [tr.Term("layer", "계층", rejected=("층",), banned=("레이어",)),
            tr.Term("machine", "머신", rejected=("컴퓨터",)),
            tr.Term("parameter", "매개변수", banned=("파라미터",)),
            tr.Term("launch", "런치", rejected=("커널 실행",), required=False),
            tr.Term("activations", "활성값", rejected=("활성화",), allowed=("활성화 함수",))]


@pytest.mark.parametrize("english, korean, found", [
    ("Freeze the first layer.", "첫 번째 층을 고정하세요.", ["layer -> 계층, not 층"]),
    ("Freeze the first layer.", "첫 번째 계층을 고정하세요.", []),  # 층 inside 계층 is the right term
    ("Freeze the first layers.", "첫 번째 레이어들을 고정하세요.", ["layer -> 계층, not 레이어"]),
    ("Run it on this machine.", "이 컴퓨터에서 실행하세요.", ["machine -> 머신, not 컴퓨터"]),
    ("Run it on any computer.", "어느 컴퓨터에서든 실행하세요.", []),  # a computer is not a machine
    ("Count the weights.", "파라미터를 세세요.", ["parameter -> 매개변수, not 파라미터"]),  # banned everywhere
    ("Count the weights.", "`파라미터`를 세세요.", []),  # code is not prose
    ("The host launched it.", "호스트가 커널 실행을 마쳤습니다.", ["launch -> 런치, not 커널 실행"]),
    ("Saved activations.", "저장된 활성화입니다.", ["activations -> 활성값, not 활성화"]),
    ("Layers and activations.", "계층과 활성화 함수입니다.", []),  # an allowed phrase
])
def test_a_second_korean_word_for_a_glossary_term_is_named(english, korean, found):
    assert tr.variant_problems(english, korean, GLOSSARY) == found


def test_a_planted_second_translation_fails_the_chapter_check():
    nb = _chapter_with([("a", "Each layer runs on the machine.")])
    catalog = tr.update("x", nb, None)
    for m in catalog:
        if m.id:
            m.string = "각 층은 머신에서 실행됩니다."
    assert tr.problems(catalog, nb, GLOSSARY) == [
        "cell a: glossary terms not used: layer -> 계층",
        "cell a: one Korean term per glossary term: layer -> 계층, not 층"]
    for m in catalog:
        if m.id:
            m.string = "각 계층은 머신에서 실행하십시오."
    assert tr.problems(catalog, nb, GLOSSARY) == [
        "cell a: -십시오 register (the edition writes -세요): 실행하십시오"]


def test_the_glossary_names_rejected_banned_and_allowed_variants():
    terms = {t.english: t for t in tr.glossary(ROOT)}
    assert terms["layer"] == tr.Term("layer", "계층", rejected=("층",), banned=("레이어",))
    assert terms["activations"].allowed == ("활성화 함수", "비활성화")
    assert not terms["step"].required and terms["step"].korean == "스텝" and "학습 단계" in terms["step"].rejected
    assert terms["synchronisation"] == tr.Term("synchronisation", "동기화")  # a note in column 4 is no variant


@pytest.mark.parametrize("korean, found", [
    ("셀을 실행하십시오. 바꾸지 마십시오.", ["실행하십시오", "마십시오"]), ("Colab을 사용하십니까?", ["사용하십니까"]),
    ("셀을 실행하세요.", []), ("`# 실행하십시오` 주석", [])])
def test_the_register_rule_names_the_formal_imperative(korean, found):
    assert tr.register_problems(korean) == found


def test_message_problems_holds_the_messages_to_the_glossary_when_given_it():
    template, catalog = Catalog(locale="ko"), Catalog(locale="ko")
    template.add("{n} layers on this machine")
    catalog.add("{n} layers on this machine", "이 컴퓨터에는 층이 {n}개 있습니다. 확인하십시오")
    assert tr.message_problems(catalog, template) == []
    found = tr.message_problems(catalog, template, GLOSSARY)
    assert [line.split(": ", 2)[2] for line in found] == [
        "one Korean term per glossary term: layer -> 계층, not 층; machine -> 머신, not 컴퓨터",
        "-십시오 register (the edition writes -세요): 확인하십시오"]


def test_an_update_without_english_changes_changes_no_byte(tmp_path):
    nb = english("00_start")
    first = tmp_path / "a.po"
    tr.save(tr.update("00_start", nb, None), first)
    second = tmp_path / "b.po"
    tr.save(tr.update("00_start", nb, tr.load(first)), second)
    assert first.read_bytes() == second.read_bytes()


# --------------------------------------------------------------------------- the helpers' messages


def test_every_helper_message_is_translated_with_its_placeholders():
    found = tr.message_problems(tr.load(tr.messages_path(ROOT)), tr.extract_messages(ROOT))
    assert not found, "translations/ko/helpers.po is not in step with the helpers:\n" + "\n".join(found)


def test_helper_messages_use_one_korean_term_per_idea():
    """The chapters' glossary holds for the helpers' messages too: a check message, a verdict or a plot label does
    not call the course 강의 where the chapter says 강좌."""
    terms = tr.glossary(ROOT)
    found = [f"{m.id[:50]!r}: {'; '.join(hits)}" for m in _translations(tr.load(tr.messages_path(ROOT)))
             if (hits := tr.variant_problems(m.id, m.string, terms))]
    assert not found, f"translations/ko/helpers.po: {len(found)} messages translate a glossary term a second " \
                      "way:\n" + "\n".join(found)


def test_helper_messages_speak_the_seyo_register():
    found = [f"{m.id[:50]!r}: {', '.join(hits)}" for m in _translations(tr.load(tr.messages_path(ROOT)))
             if (hits := tr.register_problems(m.string))]
    assert not found, f"translations/ko/helpers.po: {len(found)} messages in the -십시오 register:\n" + "\n".join(found)


def test_the_compiled_messages_are_a_fresh_compile(tmp_path, monkeypatch):
    from babel.messages.mofile import write_mo

    with (tmp_path / "fresh.mo").open("wb") as f:
        write_mo(f, tr.load(tr.messages_path(ROOT)), use_fuzzy=False)
    assert (tmp_path / "fresh.mo").read_bytes() == tr.mo_path(ROOT).read_bytes(), (
        "helpers/locale/ko/LC_MESSAGES/helpers.mo is stale: run `python -m course_tools translate build`")


def test_a_changed_placeholder_is_caught():
    template, catalog = Catalog(locale="ko"), Catalog(locale="ko")
    template.add("{n} host syncs")
    catalog.add("{n} host syncs", "호스트 동기화 {count}회")
    assert "placeholders ['n'] became ['count']" in tr.message_problems(catalog, template)[0]


LANGUAGE_OF = """
import os, sys
from helpers import i18n
print(i18n.current())
"""


@pytest.mark.parametrize("env, expected", [
    ({}, "en"), ({"LANG": "ko_KR.UTF-8"}, "ko"), ({"LANGUAGE": "ko:en", "LANG": "C"}, "ko"),
    ({"COURSE_LANG": "en", "LANG": "ko_KR.UTF-8"}, "en"), ({"COURSE_LANG": "ko"}, "ko"), ({"LANG": "fr_FR"}, "en")])
def test_the_language_comes_from_course_lang_then_the_locale(env, expected):
    clean = {k: v for k, v in __import__("os").environ.items()
             if k not in ("COURSE_LANG", "LANGUAGE", "LC_ALL", "LC_MESSAGES", "LANG")}
    out = subprocess.run([sys.executable, "-c", LANGUAGE_OF], env={**clean, **env}, capture_output=True, text=True,
                         cwd=ROOT, check=True).stdout.strip()
    assert out == expected


def test_the_setting_cell_wins_and_messages_fall_back_to_english(monkeypatch):
    from helpers import i18n

    monkeypatch.setenv("COURSE_LANG", "en")
    monkeypatch.setattr(i18n, "_chosen", None)
    assert i18n._("a message no catalog has") == "a message no catalog has"
    i18n.use("ko")
    try:
        assert i18n.current() == "ko" and i18n._("a message no catalog has") == "a message no catalog has"
    finally:
        i18n._chosen = None
    with pytest.raises(ValueError, match="speaks en, ko"):
        i18n.use("fr")


def test_a_korean_plot_label_renders_without_a_missing_glyph_warning(monkeypatch):
    import warnings

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from helpers import i18n

    monkeypatch.setattr(i18n, "_chosen", None)
    i18n.use("ko")
    try:
        fig, ax = plt.subplots()
        ax.set_title("호스트 동기화: 스텝마다 한 번")
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # "Glyph ... missing from font" would be raised here
            fig.canvas.draw()
        plt.close(fig)
    finally:
        i18n._chosen = None


def _functions_that_shadow_gettext(source: str) -> list[str]:
    """Functions that bind the name ``_`` (``for _ in ...``, ``a, _ = ...``) and also call ``_()``: the call then
    hits the local value ("'int' object is not callable") in the language that reaches that line."""
    import ast

    found = []
    for fn in ast.walk(ast.parse(source)):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        binds = calls = False
        todo = list(fn.body)
        while todo:
            node = todo.pop()
            nested = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda, ast.ListComp,
                                       ast.SetComp, ast.DictComp, ast.GeneratorExp))
            for inner in (ast.walk(node) if nested else [node]):
                calls |= isinstance(inner, ast.Call) and isinstance(inner.func, ast.Name) and inner.func.id == "_"
            if nested:
                continue
            binds |= isinstance(node, ast.Name) and node.id == "_" and isinstance(node.ctx, ast.Store)
            todo.extend(ast.iter_child_nodes(node))
        if binds and calls:
            found.append(f"{fn.name} (line {fn.lineno})")
    return found


def test_no_helper_function_hides_gettext_behind_a_local_underscore():
    found = {str(p.relative_to(ROOT)): hits for p in sorted((ROOT / "helpers").rglob("*.py"))
             if (hits := _functions_that_shadow_gettext(p.read_text()))}
    assert not found, f"rename the throwaway variable `_` in: {found}"


def test_the_shadowing_rule_can_fail():
    assert _functions_that_shadow_gettext("def f():\n    for _ in range(2):\n        pass\n    return _('x')\n") == \
        ["f (line 1)"]
    assert _functions_that_shadow_gettext("def g():\n    return [_('x') for _n in range(2)]\n") == []


def test_a_hidden_checks_label_is_not_shipped_in_the_catalog():
    """helpers.po ships in every learner's package: a label inside a hidden block would tell the hidden case."""
    source = ('check(x, tr("a visible case"))\n### BEGIN HIDDEN TESTS\ncheck(y, tr("a secret case"))\n'
              '### END HIDDEN TESTS\npassed(tr("after"))\n')
    assert [text for _line, text in tr.notebook_messages(source)] == ["a visible case", "after"]


# --------------------------------------------------------------------------- punctuation, glosses, quotations


TRANSLITERATED = [tr.Term("machine", "머신", transliterated=True), tr.Term("kernel", "커널", transliterated=True),
                  tr.Term("launch", "런치", required=False, transliterated=True),
                  tr.Term("gradient", "변화도", banned=("그래디언트",))]


@pytest.mark.parametrize("korean, found", [
    ("스텝은 더 빨리 끝날 수 없습니다: 스텝의 FLOP을 나눈 값입니다.", ["없습니다:"]),
    ("다음 셀을 실행하세요:\n\n- 하나", ["실행하세요:"]),
    ("값은 다음과 같습니다.\n\n- 하나", []),
    ("받은 값: {x}. 오류 메시지: {err}", []),  # a colon after a noun is Korean too
    ("`print('합니다:')`를 보세요.", []),  # code is not prose
])
def test_a_colon_after_a_korean_sentence_ending_is_named(korean, found):
    assert tr.colon_problems(korean) == found


@pytest.mark.parametrize("korean, found", [
    ("이 머신(machine)의 커널(kernels)을 봅니다.", ["머신(machine)", "커널(kernel)"]),
    ("커널 런치(launch)가 병목입니다.", ["런치(launch)"]),
    ("변화도(gradient)를 더합니다. 이 머신(CPU 2개)에서 커널을 봅니다.", []),  # a translation's gloss; not a gloss
])
def test_a_gloss_on_a_transliteration_is_named(korean, found):
    assert tr.gloss_problems(korean, TRANSLITERATED) == found


def test_the_glossary_marks_its_transliterations():
    terms = {t.english: t for t in tr.glossary(ROOT)}
    assert terms["kernel"].transliterated and terms["kernel"].korean == "커널"
    assert terms["machine"].transliterated and terms["launch"].transliterated and not terms["launch"].required
    assert not terms["gradient"].transliterated and not terms["device"].transliterated


def test_a_planted_colon_and_gloss_fail_every_chapters_check_and_the_messages_check():
    """What the third Korean review found in chapter 09 (27 colons, 11 glosses) fails the check of any chapter, and
    of the helpers' messages, with the glossary the course uses."""
    terms = tr.glossary(ROOT)
    planted = "이 머신(machine)은 빠르지 않습니다: 커널(kernel)을 봅니다."
    for chapter in CHAPTERS:
        catalog = tr.load(tr.catalog_path(ROOT, chapter))
        entry = next(m for m in catalog if m.id and m.string)
        entry.string = planted + "\n\n" + entry.string
        found = [line for line in tr.problems(catalog, english(chapter), terms) if line.startswith(f"cell {entry.context}:")]
        assert f"cell {entry.context}: a colon after a sentence ending (end the sentence with a period): 않습니다:" in found
        glosses = [line.rsplit(": ", 1)[1] for line in found if "a gloss on a transliteration" in line]
        assert glosses and set(glosses[0].split(", ")) == {"머신(machine)", "커널(kernel)"}, chapter
    template, catalog = Catalog(locale="ko"), Catalog(locale="ko")
    template.add("the machine is slow, {n}")
    catalog.add("the machine is slow, {n}", "머신(machine)이 느립니다: {n}")
    assert [line.split(": ", 2)[2] for line in tr.message_problems(catalog, template, terms)] == [
        "a colon after a sentence ending (end the sentence with a period): 느립니다:",
        "a gloss on a transliteration (write the Korean alone): 머신(machine)"]


LESSON = tr.source_lesson(ROOT)


def test_a_quotation_of_the_source_lesson_is_exempt_from_the_style_rules_and_held_to_its_words():
    """The lesson says 그래디언트, which the glossary bans: quoted, it is the lesson's word; outside a quotation, or in
    a "quotation" the lesson never wrote, it is the edition's and fails."""
    english = "*\"Each GPU trains a part of the model.\"* Not in DDP: gradients are averaged."
    quoted = "*\"각 GPU에서 모델의 일부를 학습하고, 그래디언트를 동기화합니다.\"* DDP에서는 변화도를 평균냅니다."
    assert tr.variant_problems(english, quoted, TRANSLITERATED) == []
    assert tr.quote_problems(quoted, LESSON) == []
    unquoted = quoted.replace("*\"", "").replace("\"*", "")
    assert tr.variant_problems(english, unquoted, TRANSLITERATED) == ["gradient -> 변화도, not 그래디언트"]
    invented = "*\"각 GPU가 모델의 일부를 학습하며 그래디언트를 맞춘다.\"* DDP에서는 변화도를 평균냅니다."
    assert tr.quote_problems(invented, LESSON) == ["각 GPU가 모델의 일부를 학습하며 그래디언트를 맞춘다."]
    shortened = "*\"`num_workers` 옵션을 사용하여 데이터 로딩을 병렬화하여 속도를 향상시킬 수 있지만, …\"*"
    assert tr.quote_problems(shortened, LESSON) == []  # code marks and an ellipsis keep the lesson's words
    assert tr.quote_problems("*\"even if there is only a single node\"*", LESSON) == []  # English: not the lesson's


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_the_korean_chapters_quote_the_source_lesson_in_its_own_words(chapter):
    """Every Korean quotation (*"…"* with Hangul) is the lesson's own sentence (docs/source/9-1_gpu_lesson.ko.txt),
    not a back-translation of the English paraphrase: a reader holding the lesson finds the words there."""
    found = {m.context: hits for m in _translations(tr.load(tr.catalog_path(ROOT, chapter)))
             if (hits := tr.quote_problems(m.string, LESSON))}
    assert not found, f"{chapter}: quotations that are not the lesson's words: {found}"


def test_the_chapters_that_quote_the_lesson_still_do():
    quoting = {"01_why_gpus": 1, "02_devices": 4, "04_dataloader": 3, "06_multi_gpu": 2, "07_troubleshooting": 2}
    for chapter, least in quoting.items():
        quotes = [q for m in _translations(tr.load(tr.catalog_path(ROOT, chapter)))
                  for q in tr._QUOTE.findall(m.string) if tr._HANGUL.search(q)]
        assert len(quotes) >= least, (chapter, quotes)


def test_a_fuzzy_entrys_previous_english_survives_a_round_trip_and_leaves_no_comment(tmp_path):
    """Babel reads ``#| msgid`` back as a translator comment: 173 of them had piled up in helpers.po, re-wrapped on
    each save, long after their entries were translated again. load() reads them as the previous English."""
    catalog = Catalog(locale="ko")
    old = "a step without syncs: {host} at width 512 (the host's time: the GPU is nearly idle), and a long tail " * 2
    catalog.add("a step without syncs: {host} at the smallest widths", "동기화 없는 스텝", flags=["fuzzy"],
                previous_id=old.strip())
    catalog.add("seconds", "초")
    path = tmp_path / "helpers.po"
    tr.save(catalog, path)
    assert "#| msgid" in path.read_text(encoding="utf-8")
    once = tr.load(path)
    fuzzy = once.get("a step without syncs: {host} at the smallest widths")
    assert fuzzy.previous_id == [old.strip()] and not fuzzy.user_comments
    first = path.read_bytes()
    tr.save(once, path)
    assert path.read_bytes() == first  # a load and a save change no byte
    translated = tr.load(path)
    translated.get("a step without syncs: {host} at the smallest widths").flags.discard("fuzzy")
    tr.save(translated, path)
    text = path.read_text(encoding="utf-8")
    assert "#|" not in text and "# |" not in text  # no comment left behind, then or later
    assert not any(m.user_comments or m.previous_id for m in tr.load(path) if m.id)
