"""Injected timings for a CPU-vs-accelerator comparison, to grade it on any machine (chapter 01's sweep).

:class:`FakeComparison` hands the learner's ``compare_devices`` its own
``make_work`` and ``timer``: the timer reports the seconds the check chose,
so a comparison is graded fast, without a GPU and without noise, and the log
says what was made and timed where. Built on the one patching utility;
what the log means is judged by :mod:`helpers.checks.ch01`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from helpers.checks.fakes.simulated_gpu import kind_of, sync_routes
from helpers.checks.patching import patched
from helpers.i18n import _
from helpers.record import Record

__all__ = ["FakeComparison"]


class FakeComparison:
    """Injected timings for grading ``compare_devices`` on any machine, fast and without a GPU.

    ``seconds = {"cpu": [...], "cuda": [...]}`` gives the seconds per call
    that :meth:`timer` reports for the work :meth:`make_work` made, one per
    size, in the order of the sizes. The work functions carry their
    ``(size, device type)``; the timer calls a function it does not recognise
    (one that makes its inputs while it is timed) to find out what it made.
    ``log`` records ``("make", size, type, inside_timed_region)`` and
    ``("time", size, work type, timer type)``. What the log means for the
    learner is judged by :mod:`helpers.checks.ch01` (``speedup_verdict`` and
    the verdicts beside it).
    """

    def __init__(self, seconds: dict[str, Sequence[float]], *, run_timed: bool = False) -> None:
        self.seconds = {k: list(v) for k, v in seconds.items()}
        self.run_timed = run_timed
        self.log = Record()  # the grader keeps a copy: a log the learner's code rewrote is found (trusted_log)
        self._sizes: list[int] = []
        self._timing = False
        self._made_inside: list[tuple[int, str]] = []

    def make_work(self, size: int, device: Any) -> Callable[[], None]:
        kind = kind_of(device)
        self.log.append(("make", size, kind, self._timing))
        if self._timing:
            self._made_inside.append((size, kind))
        if size not in self._sizes:
            self._sizes.append(size)

        def work() -> None:
            pass

        work.tag = (size, kind)  # type: ignore[attr-defined]
        return work

    def timer(self, fn: Callable[[], Any], device: Any = None, *args: Any, **kwargs: Any) -> float:
        tag = getattr(fn, "tag", None)
        if tag is None or self.run_timed:
            self._timing, self._made_inside = True, []
            try:
                fn()
            finally:
                self._timing = False
            if tag is None and self._made_inside:
                tag = self._made_inside[-1]
        if tag is None:
            raise TypeError(_("the timer was given a function that is not the work make_work(size, device) "
                              "returned"))
        size, kind = tag
        self.log.append(("time", size, kind, kind_of(device)))
        return self.seconds[kind][sorted(self._sizes).index(size)]

    @contextlib.contextmanager
    def active(self, namespaces: Iterable[dict] = ()) -> Iterator["FakeComparison"]:
        """Make every public way to synchronise a no-op while it is active (names in ``namespaces`` too).

        The injected work runs on no device; a comparison that (wrongly) times
        it with its own timer then gets a verdict, not a crash from
        ``torch.cuda.synchronize()`` on a machine without CUDA.
        """
        noop = lambda *args, **kwargs: None  # noqa: E731
        with patched([(owner, attr, noop) for owner, attr in sync_routes()], namespaces):
            yield self

    def speedups(self) -> list[float]:
        """The true speed-ups: the injected CPU seconds over the accelerator's, size by size."""
        return [c / a for c, a in zip(self.seconds["cpu"], self.seconds["cuda"])]

    def measured(self, sizes: Sequence[int]) -> bool:
        """Whether every size was made, or timed, on every device: speed-ups that come from a measurement."""
        covered = {(e[1], e[2]) for e in self.log if e[0] == "make"}
        covered |= {(e[1], e[3]) for e in self.log if e[0] == "time"}
        return all((n, kind) in covered for n in sizes for kind in self.seconds)

    def wrong_device(self) -> list[tuple[int, str, str]]:
        """``(size, made on, timed with)`` for each timing of work with a device other than the one it was made on."""
        return [(n, kind, with_) for _, n, kind, with_ in (e for e in self.log if e[0] == "time") if kind != with_]
