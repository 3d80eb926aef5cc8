"""helpers.checks.display: in a notebook, a failed check shows the learner's line and its message, not a traceback
through the course's code; a learner's own error under a check keeps their frames, the course's taken out.

The shell is IPython's own ``InteractiveShell`` (cells compiled and run by its ``run_cell``, so the handler is
called exactly where a Jupyter kernel calls it), with ``_showtraceback`` (where every traceback IPython shows ends)
recording the lines instead of printing them. The process state a shell takes over (``__main__``, the display and
except hooks) is put back after each test.
"""

from __future__ import annotations

import builtins
import re
import sys

import pytest
from IPython.core.interactiveshell import InteractiveShell
from traitlets.config import Config

from helpers import i18n
from helpers.checks import display

ANSI = re.compile(r"\x1b\[[0-9;]*m")
COURSE = re.compile(r"helpers[/\\]checks[/\\]|course_tools[/\\]")
BLANK = "def count_parameters(model):\n    raise NotImplementedError()\n"
CHECK = ("from helpers.checks import ch00\nfrom helpers.models import SimpleModel\n\n"
         "ch00.check_count(count_parameters, SimpleModel(), 11, 'count_parameters(SimpleModel())')\n")


class Shown:
    """What the shell showed: one entry per error, each the plain text of its traceback."""

    def __init__(self) -> None:
        self.errors: list[tuple[str, str]] = []

    def __call__(self, etype, evalue, stb) -> None:
        self.errors.append((etype.__name__, ANSI.sub("", "\n".join(stb))))

    @property
    def last(self) -> str:
        assert self.errors, "the shell showed no error"
        return self.errors[-1][1]


@pytest.fixture
def shell(monkeypatch):
    """A fresh IPython shell with the course's handler installed; ``shell.shown`` records what it shows."""
    saved = (sys.modules.get("__main__"), sys.displayhook, sys.excepthook, builtins.__dict__.copy())
    config = Config()
    config.HistoryManager.enabled = False
    ipython = InteractiveShell(config=config)
    try:
        ipython.shown = Shown()
        monkeypatch.setattr(ipython, "_showtraceback", ipython.shown)
        assert display.install(ipython)
        yield ipython
    finally:
        ipython.cleanup()
        main, sys.displayhook, sys.excepthook, names = saved
        sys.modules["__main__"] = main
        for added in set(builtins.__dict__) - set(names):
            del builtins.__dict__[added]
        builtins.__dict__.update(names)


def run(shell, *cells: str) -> None:
    for cell in cells:
        shell.run_cell(cell, store_history=True)


def test_a_failed_check_shows_the_learners_line_and_the_message_in_a_few_lines(shell):
    run(shell, BLANK, CHECK)
    (name, text), = shell.shown.errors
    assert name == "CheckFailed"
    lines = text.splitlines()
    assert len(lines) <= 12, text
    assert not COURSE.search(text), f"a frame of the course's code is shown:\n{text}"
    assert "Traceback (most recent call last)" not in text
    assert "ch00.check_count(count_parameters, SimpleModel(), 11" in text, "the learner's call is not named"
    assert re.match(r"Cell In\[\d+\], line 4$", lines[0]), text
    assert lines[-1].startswith("CheckFailed: `count_parameters` is not written yet: replace")


def test_a_failed_check_still_ends_the_cell_in_error(shell):
    """What nbgrader grades by: the execution fails (an ``error`` output, the reply's status "error")."""
    run(shell, BLANK)
    result = shell.run_cell(CHECK, store_history=True)
    assert not result.success
    assert type(result.error_in_exec).__name__ == "CheckFailed"
    assert sys.last_value is result.error_in_exec
    files = []
    tb = sys.last_traceback
    while tb is not None:
        files.append(tb.tb_frame.f_code.co_filename)
        tb = tb.tb_next
    assert any(COURSE.search(f) for f in files), "sys.last_traceback (%tb, %debug) lost the course's frames"


def test_under_korean_the_korean_message_alone(shell, monkeypatch):
    monkeypatch.setattr(i18n, "_chosen", "ko")
    run(shell, BLANK, CHECK)
    text = shell.shown.last
    assert "아직 작성되지 않았습니다" in text, text
    assert "is not written yet" not in text and "replace `raise" not in text, f"the English text is shown:\n{text}"
    assert len(text.splitlines()) <= 12 and not COURSE.search(text)


def test_a_check_called_in_the_learners_own_function_names_their_line(shell):
    run(shell, "from helpers.checks import check\n\ndef mine():\n    check(1 == 2, 'one is not two')\n\nmine()\n")
    text = shell.shown.last
    assert "----> 4 check(1 == 2, 'one is not two')" in text, text
    assert text.splitlines()[-1] == "CheckFailed: one is not two"
    assert not COURSE.search(text)


def test_a_learners_own_error_under_a_check_keeps_their_frames_only(shell):
    run(shell, "import torch\n\ndef count_parameters(model):\n    x = torch.ones(3, 4)\n"
               "    return int((x @ x).sum())  # a shape error in their code\n", CHECK)
    (name, text), = shell.shown.errors
    assert name == "RuntimeError"
    assert "in count_parameters(model)" in text and "return int((x @ x).sum())" in text, text
    assert "ch00.check_count(count_parameters, SimpleModel(), 11" in text
    assert "shapes cannot be multiplied" in text.splitlines()[-1]
    assert not COURSE.search(text), f"a frame of the course's code is shown:\n{text}"


def test_a_learners_name_error_under_a_check_keeps_their_frame(shell):
    run(shell, "def count_parameters(model):\n    return sum(p.numel() for p in model.parameters()) + oops\n", CHECK)
    text = shell.shown.last
    assert "in count_parameters(model)" in text and "+ oops" in text, text
    assert text.splitlines()[-1] == "NameError: name 'oops' is not defined"
    assert not COURSE.search(text)


def test_errors_that_never_reach_the_course_look_as_ipython_shows_them(shell):
    run(shell, "1 / 0", "def f(:\n    pass", "if True:\npass")
    names = [name for name, _ in shell.shown.errors]
    assert names == ["ZeroDivisionError", "SyntaxError", "IndentationError"]
    assert "Traceback (most recent call last)" in shell.shown.errors[0][1]
    assert "----> 1 1 / 0" in shell.shown.errors[0][1]


def test_a_handler_that_fails_falls_back_to_the_full_traceback(shell, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("the handler broke")

    monkeypatch.setattr(display, "short_failure", broken)
    run(shell, BLANK, CHECK)
    text = shell.shown.last
    assert "Traceback (most recent call last)" in text and "is not written yet" in text
    assert shell.custom_exceptions, "the handler was unregistered"


def test_install_does_nothing_outside_ipython_and_keeps_anothers_handler(shell, monkeypatch):
    monkeypatch.delitem(sys.modules, "IPython")
    assert display.install() is False  # IPython not imported: not a notebook, nothing installed
    assert display.install(shell)  # twice is once
    theirs = (ValueError,)
    shell.set_custom_exc(theirs, lambda *a, **k: None)
    assert display.install(shell) is False and shell.custom_exceptions is theirs
