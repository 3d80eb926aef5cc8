"""The assertion core of the checks under every exercise.

A failed check raises :class:`CheckFailed` (an ``AssertionError``, so nbgrader
counts it as a failed test) whose message says three things: what the
learner's code did, what was expected, and what to fix. The message is built
from values, never from the test's source, so a hidden test stays hidden in
the message the learner reads.

Grade cells use these instead of bare ``assert``; a bare ``assert x == y``
tells a learner nothing but ``AssertionError``.
"""

from __future__ import annotations

import contextlib
import dis
import io
import logging
import os
import sys
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import torch

from helpers.checks import display
from helpers.checks.delegation import forbid_course_versions
from helpers.checks.failure import CheckFailed
from helpers.device import explain_device_error
from helpers.i18n import _

# In a notebook, a failed check shows the learner's line and its message, not a traceback through this package;
# a learner's own error under a check keeps their frames only (helpers/checks/display.py says how and why).
display.install()

_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_STDLIB_DIR = os.path.dirname(os.path.abspath(os.__file__)) + os.sep
_HELPERS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep

__all__ = [
    "learner_logs",
    "solved_or",
    "CheckFailed",
    "check",
    "check_close",
    "check_dtype",
    "check_equal",
    "check_raises",
    "check_type",
    "fail_unless",
    "passed",
    "solved",
]


def _fail(what: str, got: Any, expected: Any, hint: str) -> None:
    text = _("{what}: got {got}; expected {expected}.").format(what=what, got=got, expected=expected)
    if hint:
        text += f" {hint}"
    raise CheckFailed(text)


def _either(types: tuple[type, ...]) -> str:
    """The names of the types a check accepts, as "ValueError or KeyError" (in the learner's language)."""
    return _(" or ").join(t.__name__ for t in types)


def _short(value: Any, limit: int = 120) -> str:
    if isinstance(value, torch.Tensor):
        if value.numel() <= 6:
            text = f"tensor({value.tolist()}, dtype={value.dtype}, device={value.device})"
        else:
            text = _("tensor of shape {shape}, dtype={dtype}, device={device}").format(
                shape=tuple(value.shape), dtype=value.dtype, device=value.device)
    else:
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def check(condition: Any, message: str) -> None:
    """Fail with ``message`` (what happened and what to fix) unless ``condition`` holds."""
    if not condition:
        raise CheckFailed(message)


def fail_unless(verdict: str | None) -> None:
    """Fail with ``verdict`` unless it is None: what a ``*_verdict`` function returns, None when all is right,
    else the mistake in words."""
    if verdict is not None:
        raise CheckFailed(verdict)


def check_equal(actual: Any, expected: Any, what: str, hint: str = "") -> None:
    """``actual == expected`` (for tensors: same shape, dtype and values)."""
    if isinstance(actual, torch.Tensor) or isinstance(expected, torch.Tensor):
        ok = (
            isinstance(actual, torch.Tensor)
            and isinstance(expected, torch.Tensor)
            and actual.shape == expected.shape
            and actual.dtype == expected.dtype
            and bool(torch.equal(actual.cpu(), expected.cpu()))
        )
    else:
        ok = actual == expected
    if not ok:
        _fail(what, _short(actual), _short(expected), hint)


def check_close(
    actual: Any,
    expected: Any,
    what: str,
    hint: str = "",
    rtol: float | None = None,
    atol: float | None = None,
) -> None:
    """``torch.testing.assert_close`` with a message a learner can act on."""
    try:
        torch.testing.assert_close(
            torch.as_tensor(actual), torch.as_tensor(expected), rtol=rtol, atol=atol, check_device=False
        )
    except AssertionError as err:
        detail = str(err).strip().splitlines()
        first = detail[0] if detail else ""
        raise CheckFailed(
            _("{what}: got {got}, expected {expected} ({detail}). {hint}").format(
                what=what, got=_short(actual), expected=_short(expected), detail=first, hint=hint).rstrip()
        ) from None


def check_dtype(tensor: Any, dtype: torch.dtype, what: str, hint: str = "") -> None:
    """``tensor`` is a tensor of ``dtype``."""
    if not isinstance(tensor, torch.Tensor):
        _fail(what, _("a {kind}, not a tensor").format(kind=type(tensor).__name__),
              _("a tensor of dtype {dtype}").format(dtype=dtype), hint)
    elif tensor.dtype != dtype:
        _fail(what, _("dtype {dtype}").format(dtype=tensor.dtype), _("dtype {dtype}").format(dtype=dtype), hint)


def check_type(value: Any, types: type | tuple[type, ...], what: str, hint: str = "") -> None:
    """``value`` is an instance of ``types``."""
    if not isinstance(value, types):
        names = _either(types if isinstance(types, tuple) else (types,))
        _fail(what, _("a {kind} ({value})").format(kind=type(value).__name__, value=_short(value, 60)),
              _("a {names}").format(names=names), hint)


def check_raises(
    exc_type: type[BaseException] | tuple[type[BaseException], ...],
    fn: Callable[[], Any],
    what: str,
    hint: str = "",
) -> BaseException:
    """Calling ``fn()`` raises ``exc_type``; returns the exception for further checks."""
    try:
        fn()
    except CheckFailed:
        raise  # e.g. solved() inside fn: "not written yet" says more than "wrong exception"
    except exc_type as err:
        if type(err) is NotImplementedError and not err.args:  # an unsolved stub, not the expected error
            raise CheckFailed(_("{what}: the function is not written yet (it raises NotImplementedError()).").format(
                what=what)) from None
        return err
    except Exception as err:  # noqa: BLE001 - the wrong exception is the learner's mistake to report
        names = exc_type.__name__ if isinstance(exc_type, type) else _either(exc_type)
        _fail(what, f"{type(err).__name__}: {err}", f"{names}", hint)
    names = exc_type.__name__ if isinstance(exc_type, type) else _either(exc_type)
    _fail(what, _("no exception"), _("{names} to be raised").format(names=names), hint)
    raise AssertionError("unreachable")  # pragma: no cover


def raised_by_learner(err: BaseException) -> bool:
    """True when ``err`` comes from a ``raise`` (or ``assert``) in the learner's own code, not from torch.

    A learner's ``raise RuntimeError("No CUDA GPUs are available")`` is their own
    message, not a device mix-up: the innermost frame is a raise statement
    outside torch. An error torch raises (in C++, or in torch's Python code)
    ends in a call, or in a frame inside the torch package.
    """
    tb = err.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None:
        return False
    code = tb.tb_frame.f_code
    if code.co_filename.startswith(_TORCH_DIR) or code.co_filename.startswith(_HELPERS_DIR):
        return False  # torch's own code, or the course's fake machine imitating it
    return code.co_code[tb.tb_lasti] == dis.opmap["RAISE_VARARGS"]


class _Keep(logging.Handler):
    """A log handler that keeps its records (in ``self.records``) instead of writing them."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextlib.contextmanager
def learner_logs() -> Iterator[list[logging.LogRecord]]:
    """While the block runs, records that loggers with their own handlers would write (to stderr) are kept.

    A learner's named logger with a handler of its own
    (``logging.getLogger("pick").addHandler(logging.StreamHandler())``) writes to the stderr it was given
    when it was made, past any redirection, and nbgrader scores 0 for a grade cell with stderr.
    """
    keep = _Keep()

    def to_stderr(handler: logging.Handler) -> bool:  # what the cell's stderr would show; a log file is left alone
        return isinstance(handler, logging.StreamHandler) and getattr(handler, "stream", None) is sys.stderr

    saved = {lg: lg.handlers[:] for lg in logging.Logger.manager.loggerDict.values()
             if isinstance(lg, logging.Logger) and any(to_stderr(h) for h in lg.handlers)}
    for lg, handlers in saved.items():
        lg.handlers = [h for h in handlers if not to_stderr(h)] + [keep]
    try:
        yield keep.records
    finally:
        for lg, handlers in saved.items():
            lg.handlers = handlers


@contextlib.contextmanager
def warnings_as_notes() -> Iterator[None]:
    """Warnings, log records and stderr output inside the block are printed to stdout as notes afterwards.

    nbgrader scores 0 for a grade cell that writes anything to stderr, even when
    every check passed: a correct answer's warning must cost nothing, and the
    learner still sees it. A warning filter set to "error" keeps raising.
    """
    keep = _Keep()
    root = logging.getLogger()
    saved_handlers = root.handlers[:]
    root.handlers = [keep]
    stderr = io.StringIO()
    try:
        with learner_logs() as named, contextlib.redirect_stderr(stderr), warnings.catch_warnings(record=True) as caught:
            yield
    finally:
        root.handlers = saved_handlers
        notes = [f"{w.category.__name__}: {w.message}" for w in caught]
        notes += [_("log {level}: {message}").format(level=r.levelname, message=r.getMessage())
                  for r in [*keep.records, *named]]
        notes += [f"stderr: {line}" for line in stderr.getvalue().splitlines() if line.strip()]
        for note in dict.fromkeys(notes):  # once each, in order
            print(_("note (costs no points) — your code warned: {note}").format(
                note=note if len(note) <= 300 else note[:297] + "..."))


@contextlib.contextmanager
def warnings_dropped() -> Iterator[None]:
    """Warnings raised inside the block are dropped: for what a check does itself around the learner's code.

    Building a case, a fake machine, reading what the learner's function
    returned: their warnings are no news to the learner, and on stderr they
    would cost the cell its points (nbgrader scores 0 for a cell that writes
    there). Filter "always": not even a filter set to "error" turns them into a
    failure. A :func:`solved` call inside the block still reports the learner's
    own warnings, as notes (:func:`warnings_as_notes` records them first).
    """
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        yield


#: Dunders through which a returned object could answer a comparison, a conversion or a type test for itself.
_SELF_JUDGING = frozenset({"__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__bool__",
                           "__int__", "__float__", "__index__", "__complex__", "__abs__", "__round__", "__class__",
                           "__getattribute__", "__torch_function__", "__torch_dispatch__",
                           "__array__", "__instancecheck__", "__subclasscheck__"})
#: Built-in types a task asks for (numbers, strings, lists, dicts...): a learner's subclass of one may not run code
#: when a check reads it, since the check's expected values may be at hand then (a ``dict`` whose ``__getitem__``
#: looks up the caller's frame). Named tuples (``collections.namedtuple``, ``typing.NamedTuple``) define none of these.
_PLAIN = (int, float, complex, str, bytes, list, tuple, dict, set, frozenset)
_READ_BY_CHECKS = frozenset({"__getitem__", "__iter__", "__len__", "__contains__", "__hash__", "__getattr__",
                             "__repr__", "__str__", "__format__", "__del__", "__reversed__", "__missing__", "keys",
                             "values", "items", "get", "__reduce__", "__reduce_ex__", "__copy__", "__deepcopy__"})
#: Packages whose classes a learner's function may return as they are (torch's tensors and containers...).
_TRUSTED_ROOTS = frozenset({"builtins", "torch", "helpers", "numpy", "collections", "enum", "typing", "abc",
                            "types", "functools", "decimal", "fractions"})


def _from_stdlib(member: Any) -> bool:
    """A method Python's own library wrote into the class (a named tuple's ``__repr__``), not the learner."""
    code = getattr(member, "__code__", None)
    return code is not None and os.path.abspath(code.co_filename).startswith(_STDLIB_DIR)


def _self_judging(value: Any, depth: int = 0, budget: list[int] | None = None) -> str:
    """What in ``value`` would decide a check's comparison itself ("" for nothing): an object of a class the
    learner wrote that defines ``__eq__``, ``__bool__``, ``__class__``... (an ``int`` whose ``==`` is always
    True), at any depth of the lists, tuples and dicts returned."""
    budget = budget if budget is not None else [2000]
    budget[0] -= 1
    if budget[0] < 0 or depth > 6:
        return ""
    kind = type(value)
    for cls in (*kind.__mro__, type(kind)):
        root = (getattr(cls, "__module__", None) or "").split(".")[0]
        if cls is object or root in _TRUSTED_ROOTS:
            continue
        reads = {n for n in _READ_BY_CHECKS & set(vars(cls)) if not _from_stdlib(vars(cls)[n])}
        defined = sorted((_SELF_JUDGING & set(vars(cls))) | (reads if issubclass(kind, _PLAIN) else set()))
        if defined:
            return _("a {kind} (its class {cls} defines {names})").format(
                kind=kind.__name__, cls=cls.__name__, names=", ".join(defined))
    if isinstance(value, dict):
        items = [*value.keys(), *value.values()]
    elif isinstance(value, (list, tuple, set, frozenset)):
        items = list(value)
    else:
        return ""
    for item in items:
        found = _self_judging(item, depth + 1, budget)
        if found:
            return found
    return ""


@contextlib.contextmanager
def exercise_running(name: str) -> Iterator[None]:
    """Tell the grader's referee (if one listens) that the exercise ``name`` runs: while it does, the course's
    own versions of it refuse to run for the learner's code, however it reached them (``sys.audit`` is how the
    course talks to the referee, ``course_tools/grading/engine/referee.py``; in a learner's own kernel nothing
    listens, and :func:`helpers.checks.delegation.forbid_course_versions` is the tripwire there)."""
    token = object()
    sys.audit("course.exercise", "enter", name, token)
    try:
        yield
    finally:
        sys.audit("course.exercise", "exit", name, token)


def solved(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call the learner's ``fn``; an unsolved stub fails with a message naming the exercise.

    nbgrader replaces each solution with ``raise NotImplementedError()``; this
    turns that into "``time_on_device`` is not written yet" instead of a bare
    traceback. A device mix-up that torch reports inside ``fn`` (see
    :func:`helpers.device.explain_device_error`) is explained in plain words; an
    error the learner raised themselves is left as it is. While ``fn`` runs, the
    course's own implementation of the exercise is a tripwire
    (:mod:`helpers.checks.delegation`): calling it fails the check. Warnings and
    log records become notes on stdout (:func:`warnings_as_notes`). What it returns may not judge a
    comparison itself (:func:`_self_judging`): an ``int`` whose ``==`` is always True fails here.
    """
    name = getattr(fn, "__name__", repr(fn))
    try:
        with warnings_as_notes(), forbid_course_versions(name, namespaces=[getattr(fn, "__globals__", {})]), \
                exercise_running(name):
            result = fn(*args, **kwargs)
    except NotImplementedError as err:
        if err.args:  # torch raises NotImplementedError("...") for real errors; the stub raises it bare
            raise
        raise CheckFailed(
            _("`{name}` is not written yet: replace `raise NotImplementedError()` in its cell with your code, run "
              "that cell, then run this check again.").format(name=name)
        ) from None
    except (RuntimeError, AssertionError) as err:
        if isinstance(err, CheckFailed) or raised_by_learner(err):
            raise
        meaning = explain_device_error(err)
        if meaning is None:
            raise
        raise CheckFailed(_("`{name}` raised {kind}: {err} This means {meaning}").format(
            name=name, kind=type(err).__name__, err=err, meaning=meaning)) from None
    disguised = _self_judging(result)
    if disguised:
        raise CheckFailed(_("`{name}` returned {disguised}: an object that can answer a check's comparison for itself "
                            "cannot be graded. Return plain values (numbers, strings, tensors, lists, dicts), as the "
                            "task asks.").format(name=name, disguised=disguised))
    return result


def solved_or(fallback: Callable[..., Any], fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``solved(fn, ...)`` for a demonstration after an exercise: when the learner's ``fn`` is not written yet
    (or raises), say so in one line and return ``fallback(...)``, the course's version, instead.

    So a chapter run with an exercise still blank goes on to the end and still shows what the section
    teaches, labelled as the course's result; the exercise's own grade cells are what say what is wrong.
    """
    name = getattr(fn, "__name__", repr(fn))
    try:
        return solved(fn, *args, **kwargs)
    except Exception as err:  # noqa: BLE001 - the exercise not done (or not right yet) must not stop the chapter
        why = str(err) if isinstance(err, CheckFailed) else _("`{name}` raised {kind}: {err}").format(
            name=name, kind=type(err).__name__, err=err)
        fallback_name = f"{getattr(fallback, '__module__', '')}.{getattr(fallback, '__qualname__', fallback)}"
        print(_("note: {why}; this cell uses the course's version ({fallback}) instead.").format(
            why=why[:200], fallback=fallback_name))
        return fallback(*args, **kwargs)


def passed(what: str) -> None:
    """Print the line a learner sees when every check in a cell passed."""
    print("\u2714 " + _("{what}: all checks passed.").format(what=_(what)))
