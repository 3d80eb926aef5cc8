"""The one patching utility every stand-in in ``helpers.checks`` is built from.

A check often has to change what torch or the clock answers for a moment: a
fake machine, a simulated GPU's virtual clock, a spy that records calls. All
of them go through :func:`patched`, so there is one place that restores
everything on exit (on error too) and one rule for a learner's own bindings
(``from time import perf_counter`` is replaced as well, and put back).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterable, Iterator
from typing import Any
from unittest import mock

from helpers.checks.failure import CheckFailed
from helpers.i18n import _

__all__ = ["CallLog", "patched", "record_calls"]

Change = tuple[Any, str, Any]  # (owner, attribute, new value)


@contextlib.contextmanager
def patched(changes: Iterable[Change], namespaces: Iterable[dict] = ()) -> Iterator[None]:
    """Set ``owner.attribute = new`` for each change while the block runs; restore all on exit.

    An attribute the owner lacks (``torch.accelerator`` differs between torch
    versions) is skipped rather than created, so a stand-in never invents API.
    In each dict of ``namespaces`` (a learner's module globals), a name bound
    to a replaced original, or to a ``functools.partial`` of one, is rebound
    to its replacement (a partial of it) too, and put back on exit; other
    names, including ones the learner adds meanwhile, are left alone
    (``mock.patch.dict`` would clear and refill the whole dict).

    A stand-in the learner's code replaces while the block runs (a spy on ``synchronize`` swapped back for
    the original, so calls go unseen) fails the check on exit: the check could not watch what it must.
    """
    last: dict[tuple[int, str], Change] = {}
    for owner, attr, new in changes:  # a later change of the same attribute wins
        last.pop((id(owner), attr), None)
        last[(id(owner), attr)] = (owner, attr, new)
    with contextlib.ExitStack() as stack:
        replacement: dict[int, tuple[Any, Any]] = {}
        for owner, attr, new in last.values():
            if not hasattr(owner, attr):
                continue
            old = getattr(owner, attr)
            replacement.setdefault(id(old), (old, new))
            stack.enter_context(mock.patch.object(owner, attr, new))
        for ns in namespaces:
            for name, value in list(ns.items()):
                new = _rebound(value, replacement)
                if new is not None:
                    stack.callback(ns.__setitem__, name, value)
                    ns[name] = new
        installed = [(owner, attr, new) for owner, attr, new in last.values() if hasattr(owner, attr)]
        stack.callback(_still_installed, installed)  # registered last, so it runs first: before anything is restored
        yield


def _still_installed(installed: list[Change]) -> None:
    """Fail when a stand-in was replaced while the check relied on it (the learner's code swapped it)."""
    gone = [f"{getattr(owner, '__name__', type(owner).__name__)}.{attr}" for owner, attr, new in installed
            if getattr(owner, attr, None) is not new]
    if gone:
        raise CheckFailed(_("while this check watched your code, your code replaced {names}, which the check had "
                            "put in place to observe it; the check cannot trust what it saw. Call torch's functions; "
                            "do not reassign them.").format(names=", ".join(gone)))


def _rebound(value: Any, replacement: dict[int, tuple[Any, Any]]) -> Any:
    """What a learner's binding becomes while originals are replaced: the replacement, a partial of it, or None."""
    hit = replacement.get(id(value))
    if hit is not None and hit[0] is value:
        return hit[1]
    if isinstance(value, functools.partial):
        inner = replacement.get(id(value.func))
        if inner is not None and inner[0] is value.func:
            return functools.partial(inner[1], *value.args, **value.keywords)
    return None


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


def _spy(name: str, original: Any, log: CallLog) -> Any:
    @functools.wraps(original)
    def spy(*args: Any, **kwargs: Any) -> Any:
        log.record(name)
        return original(*args, **kwargs)

    return spy


@contextlib.contextmanager
def record_calls(targets: dict[str, tuple[Any, str]], log: CallLog | None = None,
                 namespaces: Iterable[dict] = ()) -> Iterator[CallLog]:
    """Spy on functions: ``{"sync": (torch.cuda, "synchronize")}`` logs each call as "sync".

    The original still runs, so the learner's code behaves as usual; every spy
    is removed on exit, even after an error.
    """
    log = log if log is not None else CallLog()
    changes = [(owner, attr, _spy(name, getattr(owner, attr), log))
               for name, (owner, attr) in targets.items() if hasattr(owner, attr)]
    with patched(changes, namespaces):
        yield log
