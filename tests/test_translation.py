"""The Korean edition stays in step with the English (course_tools/translation.py, helpers/i18n.py).

Cheap on purpose: nothing here runs a chapter. The Korean notebooks share every code cell with the English
ones (a test proves it), so the English runs under nbval cover their code; what the edition adds (text,
messages, the setting cell, a Hangul font) is checked here.
"""

from __future__ import annotations

import subprocess
import sys

import nbformat
import pytest
from babel.messages.catalog import Catalog

from course import ROOT, chapters
from course_tools import translation as tr

CHAPTERS = chapters()


def english(chapter: str) -> nbformat.NotebookNode:
    return nbformat.read(ROOT / "solutions" / chapter / f"{chapter}.ipynb", as_version=4)


def korean(chapter: str) -> nbformat.NotebookNode:
    return nbformat.read(ROOT / tr.LANGUAGE / "solutions" / chapter / f"{chapter}.ipynb", as_version=4)


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_markdown_cell_has_a_current_korean_entry(chapter):
    """Fails on an English cell changed since its Korean was written (fuzzy), an untranslated or new cell, inline
    code the Korean lost, or a glossary term left out: `python -m course_tools translate check` says which."""
    catalog = tr.load(tr.catalog_path(ROOT, chapter))
    found = tr.problems(catalog, english(chapter), tr.glossary(ROOT))
    assert not found, f"{chapter}: the Korean catalog is not in step with the English:\n" + "\n".join(found)


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
