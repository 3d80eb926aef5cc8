"""helpers.i18n's Hangul font: Korean plots draw Hangul, Latin text and the minus sign of a log axis."""

import io
import logging
import warnings

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from helpers import i18n  # noqa: E402

pytest.importorskip("koreanize_matplotlib")


@pytest.fixture
def korean():
    """``i18n.use("ko")`` for one test; the language and matplotlib's settings put back after it."""
    chosen = i18n._chosen
    with matplotlib.rc_context():
        i18n.use("ko")
        yield
    i18n._chosen = chosen


def _draw_log_plot_with_hangul(dpi: int) -> None:
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.plot([1e-3, 1e-1, 10], [-1.0, 0.5, 2.0])
    ax.set_xscale("log")  # ticks 10^{-3} ... in mathtext: the minus is U+2212
    ax.set_title("한 번에 하나씩 바꾸는 사다리")
    ax.set_xlabel("초당 샘플 수(µs)")
    fig.savefig(io.BytesIO(), format="png", dpi=dpi)  # a dpi of its own: mathtext's parse cache cannot hide a warning
    plt.close(fig)


def test_a_korean_log_axis_draws_its_minus_signs_and_hangul_without_missing_glyphs(korean, caplog):
    with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.WARNING, logger="matplotlib"):
        warnings.simplefilter("always")
        _draw_log_plot_with_hangul(dpi=61)
    logged = [r.getMessage() for r in caplog.records if "glyph" in r.getMessage().lower()]
    missing = [str(w.message) for w in caught if "missing from font" in str(w.message)]
    assert logged == [], logged  # "Font 'default' does not have a glyph for '\u2212'": boxes on the log axis
    assert missing == [], missing  # "Glyph 54620 (\N{HANGUL SYLLABLE HAN}) missing": Hangul without NanumGothic


def test_korean_keeps_the_true_minus_on_linear_axes(korean):
    assert matplotlib.rcParams["axes.unicode_minus"] is True
    assert "NanumGothic" in matplotlib.rcParams["font.family"]
