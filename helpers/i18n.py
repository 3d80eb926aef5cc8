"""The language the helpers speak: English, or Korean in the Korean edition.

Messages a learner reads (a check's verdict, a helper's printed conclusion, a plot's labels) are written in
English in the code and pass through :func:`_`, which looks them up in a gettext catalog (the standard
library's ``gettext``; the catalogs are ``translations/ko/helpers.po``, compiled into
``helpers/locale/ko/LC_MESSAGES/helpers.mo`` by ``python -m course_tools translate build``). English is the
fallback: a message without a Korean entry is shown in English, never dropped.

Which language: the one the Korean edition's setting cell chose (``i18n.use("ko")``), else the
``COURSE_LANG`` environment variable, else the usual locale variables (``LANGUAGE``, ``LC_ALL``,
``LC_MESSAGES``, ``LANG``), else English. A message with placeholders is written
``_("{n} host syncs").format(n=n)``: the placeholders survive translation (a test compares them).

Korean text in a plot needs a font with Hangul: :func:`use` registers NanumGothic, which the
``koreanize-matplotlib`` package ships inside the package itself, so it works wherever pip works (Linux,
macOS, Windows, Colab) without a system font. Ground floor: standard library only, matplotlib imported
only when Korean is chosen.
"""

from __future__ import annotations

import gettext
import os
from functools import lru_cache
from pathlib import Path

__all__ = ["LANGUAGES", "N_", "_", "current", "tr", "use"]

#: the languages the course has catalogs for; anything else is English
LANGUAGES = ("en", "ko")
LOCALE_DIR = Path(__file__).resolve().parent / "locale"
_chosen: str | None = None


def _from_locale(value: str | None) -> str | None:
    """``"ko_KR.UTF-8"`` -> ``"ko"``; a list such as ``LANGUAGE="ko:en"`` gives its first known language."""
    for part in (value or "").split(":"):
        code = part.split(".")[0].split("_")[0].split("-")[0].lower()
        if code in LANGUAGES:
            return code
    return None


def current() -> str:
    """The language messages are shown in now (see the module's docstring for the order it is chosen in)."""
    if _chosen is not None:
        return _chosen
    for variable in ("COURSE_LANG", "LANGUAGE", "LC_ALL", "LC_MESSAGES", "LANG"):
        found = _from_locale(os.environ.get(variable))
        if found:
            return found
    return "en"


def use(language: str) -> str:
    """Show the helpers' messages in ``language`` ("ko" or "en") from now on; returns it.

    The Korean edition's setting cell calls ``use("ko")``. With Korean, plots get a Hangul font.
    """
    global _chosen
    code = _from_locale(language)
    if code is None:
        raise ValueError(f"no messages in {language!r}: the course speaks {', '.join(LANGUAGES)}")
    _chosen = code
    if code == "ko":
        _hangul_font()
    return code


def _hangul_font() -> None:
    """DejaVu Sans first, NanumGothic (from koreanize-matplotlib) behind it for Hangul.

    Ordinary text falls back glyph by glyph through the family list, so either order draws Hangul; but the
    mathtext of a log axis's ticks (``10^{-1}``) draws only in the *first* family and always writes the
    minus as U+2212, which NanumGothic lacks: with Nanum first every such tick drew a box and logged
    "Font 'default' does not have a glyph for '\u2212'". DejaVu Sans has every Latin glyph, µ and the minus,
    so Latin text and numbers look as in the English edition and only Hangul comes from Nanum. For the same
    reason the true minus comes back on linear axes (koreanize-matplotlib turns ``axes.unicode_minus`` off)."""
    try:
        import koreanize_matplotlib  # noqa: F401 - registers NanumGothic (bundled) with matplotlib's fonts
    except ImportError:  # an environment without it (pyproject.toml requires it): English labels stay readable
        return
    import matplotlib

    matplotlib.rcParams["font.family"] = ["DejaVu Sans", "NanumGothic"]
    matplotlib.rcParams["axes.unicode_minus"] = True


@lru_cache(maxsize=None)
def _catalog(language: str) -> gettext.NullTranslations:
    return gettext.translation("helpers", localedir=str(LOCALE_DIR), languages=[language], fallback=True)


def N_(message: str) -> str:
    """Mark ``message`` for translation where it is defined (a table of texts) and return it unchanged: it is
    translated where it is shown, with :func:`_`, in the language chosen by then."""
    return message


def _(message: str) -> str:
    """``message`` in the current language (English when it has no translation)."""
    language = current()
    if language == "en" or not message:  # gettext("") is the catalog's header, never a message
        return message
    return _catalog(language).gettext(message)


#: ``_`` under a name notebook code can keep: in a notebook ``_`` is IPython's last output and a common throwaway
#: loop variable, so cells write ``print(tr("... {n} ...").format(n=n))`` (the chapters' own printed text).
tr = _
