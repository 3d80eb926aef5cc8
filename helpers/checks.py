"""Assertion helpers for the checks under every exercise.

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
import functools
from collections.abc import Callable, Iterator
from typing import Any

import torch

from helpers.device import explain_device_error

__all__ = [
    "CallLog",
    "CheckFailed",
    "check",
    "check_close",
    "check_dtype",
    "check_equal",
    "check_raises",
    "check_type",
    "fake_machine",
    "passed",
    "record_calls",
    "solved",
]


class CheckFailed(AssertionError):
    """A check under an exercise failed; the message tells the learner what to fix."""


def _fail(what: str, got: Any, expected: Any, hint: str) -> None:
    parts = [f"{what}: got {got}", f"expected {expected}"]
    text = "; ".join(parts) + "."
    if hint:
        text += f" {hint}"
    raise CheckFailed(text)


def _short(value: Any, limit: int = 120) -> str:
    if isinstance(value, torch.Tensor):
        if value.numel() <= 6:
            text = f"tensor({value.tolist()}, dtype={value.dtype}, device={value.device})"
        else:
            text = f"tensor of shape {tuple(value.shape)}, dtype={value.dtype}, device={value.device}"
    else:
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def check(condition: Any, message: str) -> None:
    """Fail with ``message`` (what happened and what to fix) unless ``condition`` holds."""
    if not condition:
        raise CheckFailed(message)


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
            f"{what}: got {_short(actual)}, expected {_short(expected)} ({first}). {hint}".rstrip()
        ) from None


def check_dtype(tensor: Any, dtype: torch.dtype, what: str, hint: str = "") -> None:
    """``tensor`` is a tensor of ``dtype``."""
    if not isinstance(tensor, torch.Tensor):
        _fail(what, f"a {type(tensor).__name__}, not a tensor", f"a tensor of dtype {dtype}", hint)
    elif tensor.dtype != dtype:
        _fail(what, f"dtype {tensor.dtype}", f"dtype {dtype}", hint)


def check_type(value: Any, types: type | tuple[type, ...], what: str, hint: str = "") -> None:
    """``value`` is an instance of ``types``."""
    if not isinstance(value, types):
        names = " or ".join(t.__name__ for t in (types if isinstance(types, tuple) else (types,)))
        _fail(what, f"a {type(value).__name__} ({_short(value, 60)})", f"a {names}", hint)


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
            raise CheckFailed(f"{what}: the function is not written yet (it raises NotImplementedError()).") from None
        return err
    except Exception as err:  # noqa: BLE001 - the wrong exception is the learner's mistake to report
        names = exc_type.__name__ if isinstance(exc_type, type) else " or ".join(t.__name__ for t in exc_type)
        _fail(what, f"{type(err).__name__}: {err}", f"{names}", hint)
    names = exc_type.__name__ if isinstance(exc_type, type) else " or ".join(t.__name__ for t in exc_type)
    _fail(what, "no exception", f"{names} to be raised", hint)
    raise AssertionError("unreachable")  # pragma: no cover


def solved(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call the learner's ``fn``; an unsolved stub fails with a message naming the exercise.

    nbgrader replaces each solution with ``raise NotImplementedError()``; this
    turns that into "``time_on_device`` is not written yet" instead of a bare
    traceback. A device mix-up inside ``fn`` (see
    :func:`helpers.device.explain_device_error`) is explained in plain words.
    """
    name = getattr(fn, "__name__", repr(fn))
    try:
        return fn(*args, **kwargs)
    except NotImplementedError as err:
        if err.args:  # torch raises NotImplementedError("...") for real errors; the stub raises it bare
            raise
        raise CheckFailed(
            f"`{name}` is not written yet: replace `raise NotImplementedError()` in its cell with your "
            f"code, run that cell, then run this check again."
        ) from None
    except (RuntimeError, AssertionError) as err:
        if isinstance(err, CheckFailed):
            raise
        meaning = explain_device_error(err)
        if meaning is None:
            raise
        raise CheckFailed(f"`{name}` raised {type(err).__name__}: {err} This means {meaning}") from None


def passed(what: str) -> None:
    """Print the line a learner sees when every check in a cell passed."""
    print(f"\u2714 {what}: all checks passed.")


class CallLog:
    """The order in which spied functions were called, e.g. ``["sync", "clock"]``."""

    def __init__(self) -> None:
        self.events: list[str] = []

    def record(self, name: str) -> None:
        self.events.append(name)

    def count(self, name: str) -> int:
        return self.events.count(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self.events)

    def __repr__(self) -> str:
        return f"CallLog({self.events!r})"


@contextlib.contextmanager
def record_calls(targets: dict[str, tuple[Any, str]], log: CallLog | None = None) -> Iterator[CallLog]:
    """Spy on functions: ``{"sync": (torch.cuda, "synchronize")}`` logs each call as "sync".

    The original still runs (unless it is replaced beforehand), so the
    learner's code behaves as usual; every spy is removed on exit, even after
    an error.
    """
    log = log if log is not None else CallLog()
    saved: list[tuple[Any, str, Any]] = []
    try:
        for name, (owner, attr) in targets.items():
            original = getattr(owner, attr)

            def spy(*args: Any, __name: str = name, __original: Any = original, **kwargs: Any) -> Any:
                log.record(__name)
                return __original(*args, **kwargs)

            functools.update_wrapper(spy, original)
            saved.append((owner, attr, original))
            setattr(owner, attr, spy)
        yield log
    finally:
        for owner, attr, original in reversed(saved):
            setattr(owner, attr, original)


@contextlib.contextmanager
def fake_machine(cuda: int = 0, mps: bool = False, built_for: str | None = None) -> Iterator[None]:
    """Make torch report ``cuda`` CUDA GPUs and/or an MPS device, for grading device logic on a CPU.

    Only the questions a program asks about the machine are faked
    (``torch.cuda.is_available``, ``device_count``, ``get_device_name``,
    ``current_device``, ``torch.backends.cuda.is_built``,
    ``torch.backends.mps.is_available`` / ``is_built`` and ``torch.accelerator``'s
    equivalents, ``current_device_index`` included); no tensor can really be
    created on a faked device. Everything is restored on exit.

    ``built_for`` is the accelerator torch was compiled for ("cuda", "mps" or
    None); by default the one the machine has. ``fake_machine(built_for="cuda")``
    is a CUDA build of torch on a machine without a GPU (a CUDA wheel on a
    laptop, a CPU-only cloud runtime): ``torch.accelerator.current_accelerator()``
    then names CUDA although ``is_available()`` is False, as real torch does.
    """
    accel = torch.device("cuda", 0) if cuda else torch.device("mps") if mps else None
    if built_for is None:
        built_for = accel.type if accel is not None else None
    built = accel if accel is not None else torch.device(built_for, 0) if built_for == "cuda" else \
        torch.device(built_for) if built_for else None

    def current_accelerator(check_available: bool = False) -> torch.device | None:
        return accel if check_available else built

    def current_device_index() -> int:
        if accel is None:
            raise RuntimeError("Cannot access accelerator device when none is available.")
        return 0

    fakes: list[tuple[Any, str, Any]] = [
        (torch.cuda, "is_available", lambda: cuda > 0),
        (torch.cuda, "device_count", lambda: cuda),
        (torch.cuda, "current_device", lambda: 0),
        (torch.cuda, "get_device_name", lambda device=None: f"Simulated GPU {getattr(device, 'index', device) or 0}"),
        (torch.backends.cuda, "is_built", lambda: cuda > 0 or built_for == "cuda"),
        (torch.backends.mps, "is_available", lambda: mps),
        (torch.backends.mps, "is_built", lambda: mps or built_for == "mps"),
    ]
    if hasattr(torch, "accelerator"):
        fakes += [
            (torch.accelerator, "is_available", lambda: accel is not None),
            (torch.accelerator, "current_accelerator", current_accelerator),
            (torch.accelerator, "device_count", lambda: cuda if cuda else int(mps)),
        ]
        fakes += [(torch.accelerator, name, current_device_index)
                  for name in ("current_device_index", "current_device_idx") if hasattr(torch.accelerator, name)]
    saved = [(owner, attr, getattr(owner, attr)) for owner, attr, _ in fakes]
    try:
        for owner, attr, fake in fakes:
            setattr(owner, attr, fake)
        yield
    finally:
        for owner, attr, original in saved:
            setattr(owner, attr, original)
