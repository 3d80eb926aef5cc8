"""How a failed check looks in a notebook: its message and the learner's line, not a traceback through the course.

Why a module of its own: a grade cell's failure is shown by IPython, not by the checks, so what decides that look
is one hook into IPython, kept apart from the assertions (``core``) that raise the failures. ``core`` installs it
when it is imported inside an IPython shell (a Jupyter kernel); anywhere else (pytest, the grader's verdict worker,
plain Python) nothing is installed and nothing of IPython is imported.

Without it, a failed check shows some 30 lines through ``helpers/checks/`` (the source lines of the course's
checks, their comments and their English message text, highlighted, in front of the message in the learner's
language) before the one line that says what to fix. With it:

- a :class:`~helpers.checks.failure.CheckFailed` shows the learner's line that ran the check (their cell, or their
  function where it called the course's code) and the message, in the learner's language: four lines and the
  message's own;
- any other error whose traceback passes through the course's own code (``helpers/checks/``, ``course_tools/``),
  such as a ``NameError`` or a shape error inside the learner's function while a check runs it, keeps IPython's
  usual traceback, with the course's frames taken out: the learner's cell and their function stay;
- every other error is shown exactly as IPython shows it.

The hook is IPython's own, documented one, :meth:`IPython.core.interactiveshell.InteractiveShell.set_custom_exc`,
and the handler shows what it made through ``shell._showtraceback``, the method IPython's own ``showtraceback``
ends in: in a kernel that is still an ``error`` output (``ename`` and ``evalue`` unchanged, a shorter
``traceback``), and the execution still ends in error, so nbgrader scores a failed grade cell 0 as before and
``nbgrader validate`` (the Validate button), which prints the error outputs' ``traceback``, shows the short one.
``sys.last_traceback`` keeps the whole traceback: ``%tb`` and ``%debug`` still see every frame. If the handler
itself fails, it falls back to IPython's full traceback, so an error is never lost.

Why not ``__tracebackhide__`` (the local variable IPython's verbose tracebacks skip a frame for): it hides only the
frames of the functions that set it, so every function of every check module would have to, and a new check that
forgot it would show its frames again; it leaves a "[... skipping hidden N frames]" line, and the header and the
innermost frame (the ``raise`` with its English message) stay. Nor a ``_render_traceback_`` method on
``CheckFailed``: it covers the check's own failures only, not the learner's errors raised under a check.
"""

from __future__ import annotations

import linecache
import os
import sys
import sysconfig
import types
from typing import Any

from helpers.checks.failure import CheckFailed

__all__ = ["COURSE_DIRS", "install", "short_failure"]

_HELPERS = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
#: the folders of the course's own code, whose frames a learner never needs to read: the checks, and the grader's
#: tools (a sibling of helpers/ in the course repository; the student edition has none)
COURSE_DIRS = (os.path.join(_HELPERS, "checks") + os.sep,
               os.path.join(os.path.dirname(_HELPERS.rstrip(os.sep)), "course_tools") + os.sep)
#: code that is neither the learner's nor a place to point them to: all of helpers/, Python's library, installed
#: packages (torch, IPython)
_NOT_THEIRS = tuple(dict.fromkeys([
    _HELPERS, os.path.dirname(os.path.abspath(os.__file__)) + os.sep,
    *(os.path.abspath(sysconfig.get_paths()[key]) + os.sep for key in ("purelib", "platlib")),
    *COURSE_DIRS]))
_RED, _GREEN, _RESET = "\x1b[31m", "\x1b[32m", "\x1b[0m"


def _file(tb: types.TracebackType) -> str:
    name = tb.tb_frame.f_code.co_filename
    return os.path.abspath(name) if name and not name.startswith("<") else name


def _course(tb: types.TracebackType) -> bool:
    return _file(tb).startswith(COURSE_DIRS)


def _entries(tb: types.TracebackType | None) -> list[types.TracebackType]:
    found = []
    while tb is not None:
        found.append(tb)
        tb = tb.tb_next
    return found


def _chain(value: BaseException) -> list[BaseException]:
    """``value`` and the exceptions it was raised from or while handling (as IPython shows them), once each."""
    seen: list[BaseException] = []
    while value is not None and not any(value is s for s in seen):
        seen.append(value)
        value = value.__cause__ or (None if value.__suppress_context__ else value.__context__)
    return seen


def _without_course(tb: types.TracebackType | None, keep_first: int) -> types.TracebackType | None:
    """The same traceback without the frames of the course's code (the first ``keep_first`` entries, IPython's
    own, are kept: IPython skips them when it shows a traceback)."""
    kept = [entry for i, entry in enumerate(_entries(tb)) if i < keep_first or not _course(entry)]
    rebuilt = None
    for entry in reversed(kept):
        rebuilt = types.TracebackType(rebuilt, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return rebuilt


def _place(shell: Any, entry: types.TracebackType) -> str:
    """Where ``entry`` is, named as IPython names it: "Cell In[7], line 6", else "File /path/to/mine.py:12"."""
    name = entry.tb_frame.f_code.co_filename
    label = None
    with_name = getattr(getattr(shell, "compile", None), "format_code_name", None)
    if with_name is not None:
        label = with_name(name)
    if label:
        return f"{label[0]} {label[1]}, line {entry.tb_lineno}"
    return f"File {name}:{entry.tb_lineno}"


def short_failure(shell: Any, value: BaseException, tb: types.TracebackType | None, skip: int) -> list[str]:
    """The lines a failed check shows: the learner's line that ran it, then the message (no frame of the course).

    The learner's line is the innermost frame of their own code (their cell, or their function where it called
    the course's code); else the outermost frame after the ``skip`` entries of IPython's own that is not the
    course's; else none, and the message alone.
    """
    entries = _entries(tb)[skip:]
    theirs = [e for e in entries if not _file(e).startswith(_NOT_THEIRS)]
    lines = []
    where = theirs[-1] if theirs else next((e for e in entries if not _course(e)), None)
    if where is not None and where.tb_lineno is not None:
        source = linecache.getline(where.tb_frame.f_code.co_filename, where.tb_lineno,
                                   where.tb_frame.f_globals).strip()
        lines.append(f"{_GREEN}{_place(shell, where)}{_RESET}")
        if source:
            lines.append(f"{_GREEN}---->{_RESET} {where.tb_lineno} {source}")
        lines.append("")
    lines.append(f"{_RED}{type(value).__name__}{_RESET}: {value}")
    return ["\n".join(lines)]


def _learner_error(shell: Any, etype: type, value: BaseException, tb: types.TracebackType | None,
                   skip: int, tb_offset: int | None) -> list[str]:
    """IPython's usual traceback of ``value`` (and what it was raised from), the course's frames taken out."""
    chained = _chain(value)[1:]
    saved = [err.__traceback__ for err in chained]
    try:
        for err in chained:
            err.__traceback__ = _without_course(err.__traceback__, 0)
        return shell.InteractiveTB.structured_traceback(etype, value, _without_course(tb, skip), tb_offset=tb_offset)
    finally:
        for err, old in zip(chained, saved):
            err.__traceback__ = old


def _as_ipython_would(shell: Any, etype: type, value: BaseException, tb: types.TracebackType | None,
                      tb_offset: int | None) -> None:
    """What IPython does without a handler: at run time its full traceback; while compiling the cell (the
    handler is called there too), its syntax error display."""
    if tb is not None and tb.tb_frame.f_code.co_name == "run_code":
        shell.showtraceback((etype, value, tb), tb_offset=tb_offset, running_compiled_code=True)
    elif issubclass(etype, IndentationError):
        shell.showindentationerror()
    elif issubclass(etype, (OverflowError, SyntaxError, ValueError, TypeError, MemoryError)):
        shell.showsyntaxerror()
    else:
        shell.showtraceback((etype, value, tb), tb_offset=tb_offset)


def _handler(shell: Any, etype: type, value: BaseException, tb: types.TracebackType | None,
             tb_offset: int | None = None) -> None:
    """IPython's custom exception handler (``set_custom_exc``): shows the error itself, returns nothing."""
    try:
        compiling = tb is None or tb.tb_frame.f_code.co_name != "run_code"
        through_course = any(_course(entry) for err in _chain(value) for entry in _entries(err.__traceback__))
        is_group = any(isinstance(err, BaseExceptionGroup) for err in _chain(value))
        if compiling or is_group or not (isinstance(value, CheckFailed) or through_course):
            _as_ipython_would(shell, etype, value, tb, tb_offset)
            return
        skip = shell.InteractiveTB.tb_offset if tb_offset is None else tb_offset
        if isinstance(value, CheckFailed):
            stb = short_failure(shell, value, tb, skip)
        else:
            stb = _learner_error(shell, etype, value, tb, skip, tb_offset)
        shell._get_exc_info((etype, value, tb))  # sys.last_traceback: the whole traceback, for %tb and %debug
        shell._showtraceback(etype, value, stb)
        if getattr(shell, "call_pdb", False):
            shell.debugger(force=True)
    except Exception:  # noqa: BLE001 - never lose an error: show it the way IPython would
        shell.showtraceback((etype, value, tb), tb_offset=tb_offset, running_compiled_code=True)


_EXCEPTIONS = (Exception,)  # what the handler is set for: this very tuple is how install() knows its own


def install(shell: Any = None) -> bool:
    """Show failed checks short in ``shell`` (by default the running IPython shell, if any); True if installed.

    Does nothing outside IPython (and imports nothing of it), and leaves alone a shell where someone else set a
    custom exception handler (IPython keeps one only).
    """
    if shell is None:
        ipython = sys.modules.get("IPython")  # not imported: not in an IPython shell
        shell = ipython.get_ipython() if ipython is not None and hasattr(ipython, "get_ipython") else None
    if shell is None or not hasattr(shell, "set_custom_exc"):
        return False
    current = getattr(shell, "custom_exceptions", ())
    if current and current is not _EXCEPTIONS:
        return False
    shell.set_custom_exc(_EXCEPTIONS, _handler)
    return True
