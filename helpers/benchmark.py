"""Time a callable correctly on any device; sweeps and comparison tables.

Chapter 01 (why GPUs) teaches it; every later chapter measures through it.

Built on :mod:`torch.utils.benchmark` rather than beside it: :func:`time_callable`
times blocks of calls with ``torch.utils.benchmark.Timer`` and judges them with
its ``Measurement`` (median and interquartile range), and adds what a
CPU-vs-GPU comparison needs on top:

* its own block size (:func:`measure_blocks`): torch's ``blocked_autorange``
  makes the clock a ten-thousandth of a block, which with a clock that
  synchronises a GPU (microseconds) leaves one block and no spread (GPU
  review 3, W1); here the clock may take 1 % of a block, and a measurement
  has at least :data:`MIN_BLOCKS` blocks;

* an explicit warm-up before anything is timed (first calls pay for lazy
  initialisation, allocation and caches);
* a clock that synchronises *the device being measured* before every read
  (GPU kernels run asynchronously: a bare host clock times only the launch);
* threads that default to what torch uses for real work,
  ``torch.get_num_threads()``, instead of ``Timer``'s default of 1, which makes
  a CPU baseline look several times slower than it is;
* throughput (FLOP/s, bytes/s) when the caller says how much work one call does;
* one rule for "too noisy to draw a conclusion from" (:meth:`Timing.meets_confidence`:
  torch's own ``Measurement.meets_confidence``, over enough blocks), which the
  :class:`NoisyTimingWarning`, :attr:`Timing.noisy` and a :class:`Table`'s
  ``noisy``, ``best`` and :func:`describe_noisy` all ask;
* one rule for "A is faster than B" (:func:`compare`, a :class:`Conclusion`): a
  conclusion only when the two measurements' bands (median plus or minus half
  the IQR, at least :data:`MIN_SPREAD` of the median) do not overlap, so a
  difference within the noise is said to be one, and no chapter prints a
  winner that one noisy reading made. :func:`leaders` names every measurement
  the rule cannot tell apart from the fastest (or slowest), and
  :func:`describe_leader` says it in words; :func:`verdicts_by_size` judges a
  sweep's two devices size by size, and :func:`crossover` claims a crossover
  only where those conclusions are beyond the noise. (A *verdict*, in this
  course, is only a check's judgement of a learner's code: ``helpers.checks``.)

It also holds :class:`BackgroundQueue`, the stand-in chapter 01 *teaches*
with on a machine without a GPU: real work queued on a background thread and
finished only by ``synchronize()``, so the missing-synchronisation mistake
can be seen there too. (What only grades the chapter's exercises, a
simulated device with a virtual clock, lives in :mod:`helpers.checks.ch01`.)
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import queue
import statistics
import sys
import threading
import timeit
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import torch

from helpers.device import available_devices, pick_device, synchronize
from helpers.i18n import _
from helpers.units import format_rate, format_seconds  # noqa: F401  (the chapters call bench.format_*)


def _import_torch_benchmark() -> Any:
    """``import torch.utils.benchmark``, without the C++-extension builder's note on stderr.

    It imports ``torch.utils.cpp_extension``, which on a CUDA build of torch
    with no GPU to use and a CUDA toolkit (or ``CUDA_HOME``) on the machine
    logs "No CUDA runtime is found, using CUDA_HOME=..." (seen with torch
    2.11+cu130): a note for compiling extensions, which the course never does,
    landing in a chapter's opening cell. Errors from that logger still show.
    """
    log = logging.getLogger("torch.utils.cpp_extension")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        import torch.utils.benchmark as module
    finally:
        log.setLevel(level)
    return module


torch_benchmark = _import_torch_benchmark()

__all__ = [
    "COURSE_WARNINGS",
    "BackgroundQueue",
    "Conclusion",
    "NoisyTimingWarning",
    "Table",
    "Timing",
    "UNKNOWN_SPREAD",
    "add_work",
    "compare",
    "compare_with_torch_timer",
    "copy_work",
    "crossover",
    "describe_leader",
    "describe_noisy",
    "format_rate",
    "format_seconds",
    "leaders",
    "limited_by",
    "matmul_work",
    "measure_blocks",
    "report",
    "sweep",
    "sync_timer",
    "synchronize",
    "time_callable",
    "verdicts_by_size",
]

#: From this IQR / median up a measurement is noisy (torch's own threshold, and its stop rule in adaptive_autorange).
NOISE_THRESHOLD = 0.1
#: With fewer measured blocks than this, the spread is unknown: such a measurement counts as noisy.
MIN_BLOCKS = 3
#: On a device whose clock waits for it (a GPU: a synchronize costs 3-10 us), the clock's own cost stays below this
#: share of a block. torch's ``blocked_autorange`` asks for 1e-4 and grows the block 10x at a time, which on a GPU
#: makes one block longer than the whole measurement: one repeat, no spread (review 3, W1).
CLOCK_SHARE = 0.01
#: The least spread :func:`compare` grants a measurement, as a fraction of its median: a suspiciously steady
#: one (three equal blocks) says nothing about the next run on a shared machine, whose load changes between them.
MIN_SPREAD = NOISE_THRESHOLD


class NoisyTimingWarning(UserWarning):
    """The spread of a measurement is large: another program competed, or the work varies per call."""


#: The course's own warnings: shown as ``"NoisyTimingWarning: <the message>"``, without the ``file:line:`` prefix
#: and source line Python puts before every warning (:func:`_formatwarning`).
COURSE_WARNINGS: tuple[type[Warning], ...] = (NoisyTimingWarning,)
#: what showed warnings before this module (a reload of it replaces its own formatter, never wraps it)
_python_formatwarning = getattr(warnings.formatwarning, "_python", warnings.formatwarning)


def _formatwarning(message: Any, category: type[Warning], filename: str, lineno: int, line: str | None = None) -> str:
    """How Python shows a warning, less the place for the course's own (:data:`COURSE_WARNINGS`).

    The warning is raised at the learner's call (``stacklevel``), which is what filters and ``-W error`` need;
    but in a notebook that place is the kernel's temporary file (``/tmp/ipykernel_1234/567.py:3:``), a name no
    learner wrote, and no other frame is better: the rest are the course's internals. The message already
    names what was measured and where (its label and device), so only the place is dropped, and only from
    what is shown: which call warned, for a filter or ``warnings.catch_warnings(record=True)``, is unchanged.
    Every other warning is shown as Python (or whoever replaced ``formatwarning`` before us) shows it.
    """
    if isinstance(category, type) and issubclass(category, COURSE_WARNINGS):
        return f"{category.__name__}: {message}\n"
    return _python_formatwarning(message, category, filename, lineno, line)


_formatwarning._python = _python_formatwarning  # type: ignore[attr-defined]
warnings.formatwarning = _formatwarning


# --------------------------------------------------------------------------- timing


@dataclasses.dataclass
class Timing:
    """One measurement: seconds per call of some work on one device.

    ``median`` is the headline figure: it is robust to the odd slow call (an
    interrupt, another program), where a mean is pulled up by it. ``iqr`` (the
    spread of the middle half of ``times``) says how far to trust it.
    """

    median: float  #: seconds per call, median over the measured blocks
    iqr: float  #: interquartile range of ``times``, seconds
    times: list[float]  #: seconds per call, one entry per measured block
    num_threads: int  #: torch intra-op threads while measuring
    device: str  #: e.g. "cpu", "cuda:0"
    label: str = ""
    flops: float | None = None  #: floating-point operations in one call, if given
    nbytes: float | None = None  #: bytes moved to and from memory in one call, if given
    number_per_run: int = 1  #: calls per measured block (chosen by torch's Timer)
    warmup: int = 0  #: untimed calls made first
    #: torch's own record of it (``torch.utils.benchmark.Measurement``) when torch's Timer measured it
    measurement: torch_benchmark.Measurement | None = dataclasses.field(default=None, repr=False, compare=False)

    @property
    def flops_per_s(self) -> float | None:
        """Achieved FLOP/s, or None when no work size was given."""
        return None if self.flops is None else self.flops / self.median

    @property
    def bytes_per_s(self) -> float | None:
        """Achieved memory bandwidth in bytes/s, or None when no byte count was given."""
        return None if self.nbytes is None else self.nbytes / self.median

    @property
    def mean(self) -> float:
        return statistics.fmean(self.times)

    @property
    def relative_iqr(self) -> float:
        """IQR / median: the spread :meth:`meets_confidence` judges."""
        return self.iqr / self.median if self.median > 0 else math.inf

    def meets_confidence(self, threshold: float = NOISE_THRESHOLD) -> bool:
        """Whether the median is steady enough to draw a conclusion from: the course's one noise rule.

        It is torch's rule, ``Measurement.meets_confidence`` (IQR / median
        below ``threshold``), asked of torch's own measurement when torch's
        Timer made this one, and of these fields otherwise (:meth:`from_times`,
        a Timing made by hand). First it needs :data:`MIN_BLOCKS` blocks, which
        torch's rule does not: one or two blocks have no spread to judge (one
        slow block has an IQR of 0), and a zero median no relative spread.
        """
        if len(self.times) < MIN_BLOCKS or not self.median > 0:
            return False
        if self.measurement is not None:
            return self.measurement.meets_confidence(threshold)
        return self.relative_iqr < threshold

    @property
    def noisy(self) -> bool:
        """Whether the median is not to be trusted: :meth:`meets_confidence` at :data:`NOISE_THRESHOLD` fails."""
        return not self.meets_confidence()

    @property
    def spread_known(self) -> bool:
        """Whether there are blocks enough (:data:`MIN_BLOCKS`) to know the spread: one block has an IQR of 0,
        which is no spread but no knowledge of one either. Tables and summaries then print ``"—"``."""
        return len(self.times) >= MIN_BLOCKS

    def describe_spread(self) -> str:
        """The spread in words, ``"IQR 70% of the median"``: what a warning or a table says when it is too large."""
        if not self.spread_known:
            return _("too few blocks to know its spread")
        return _("IQR {share:.0%} of the median").format(share=self.relative_iqr)

    def summary(self) -> str:
        """``"2 workers: 120 ms (IQR 8% of the median, 5 repeats, 2 threads)"``: a figure with its spread.

        What a chapter prints beside a :class:`Conclusion`, so the reader sees the
        numbers the conclusion came from.
        """
        repeats = (_("{n} repeat") if len(self.times) == 1 else _("{n} repeats")).format(n=len(self.times))
        head = f"{self.label}: " if self.label else ""
        return head + _("{median} ({spread}, {repeats}, {threads})").format(
            median=format_seconds(self.median), spread=self.describe_spread(), repeats=repeats,
            threads=_thread_count(self.num_threads))

    @classmethod
    def from_times(cls, times: Sequence[float], device: str | torch.device = "cpu", label: str = "",
                   num_threads: int | None = None) -> "Timing":
        """A Timing of single calls timed one by one (``times`` in seconds), e.g. by a script of its own."""
        times = [float(t) for t in times]
        if not times:
            raise ValueError(_("Timing.from_times needs at least one time"))
        q1, _q2, q3 = statistics.quantiles(times, n=4, method="inclusive") if len(times) > 1 else times * 3
        return cls(median=statistics.median(times), iqr=q3 - q1, times=times, device=str(device), label=label,
                   num_threads=num_threads if num_threads is not None else torch.get_num_threads())

    @classmethod
    def from_measurement(cls, m: torch_benchmark.Measurement, device: str | torch.device = "cpu", label: str = "",
                         **fields: Any) -> "Timing":
        """A Timing of what ``torch.utils.benchmark.Timer`` measured itself (``blocked_autorange`` and the like).

        The threads are the ones the Timer ran with (``m.task_spec.num_threads``:
        one unless it was told otherwise); torch's own ``meets_confidence``
        judges the spread, as for :func:`time_callable`'s measurements.
        ``fields`` sets the rest (``flops``, ``nbytes``, ``warmup``).
        """
        fields.setdefault("num_threads", int(m.task_spec.num_threads))
        return cls(median=float(m.median), iqr=float(m.iqr), times=[float(t) for t in m.times], device=str(device),
                   label=label, number_per_run=int(m.number_per_run), measurement=m, **fields)

    def stands_out(self, seconds: float, k: float = 3.0) -> bool:
        """Whether one call of ``seconds`` is clearly slower than these: beyond ``k`` spreads above the median.

        The spread is the IQR, but at least :data:`NOISE_THRESHOLD` of the
        median, so a suspiciously tight measurement does not make every
        wobble look significant. A single call inside that band says nothing.
        """
        return seconds > self.median + k * max(self.iqr, NOISE_THRESHOLD * self.median)

    @property
    def calls(self) -> int:
        """Timed calls in all (blocks times calls per block)."""
        return len(self.times) * self.number_per_run

    def as_row(self) -> dict[str, Any]:
        """The measurement as one row of a :class:`Table`."""
        return {
            "label": self.label,
            "device": self.device,
            "num_threads": self.num_threads,
            "median": self.median,
            "iqr": self.iqr,
            "flops_per_s": self.flops_per_s,
            "bytes_per_s": self.bytes_per_s,
            "timing": self,
        }

    def __str__(self) -> str:
        parts = [_("{median} per call (IQR {iqr})").format(median=format_seconds(self.median),
                                                          iqr=_spread_seconds(self))]
        if self.flops_per_s is not None:
            parts.append(format_rate(self.flops_per_s, "FLOP/s"))
        if self.bytes_per_s is not None:
            parts.append(format_rate(self.bytes_per_s, "B/s"))
        where = _("{device}, {threads}, {calls} calls").format(
            device=self.device, threads=_thread_count(self.num_threads), calls=self.calls)
        head = f"{self.label}: " if self.label else ""
        return head + ", ".join(parts) + f" [{where}]"


#: What a table or a summary prints for a spread that is not known (fewer than :data:`MIN_BLOCKS` blocks):
#: "0 ns" there would read as a perfectly steady measurement.
UNKNOWN_SPREAD = "\u2014"


def _spread_seconds(timing: "Timing") -> str:
    """``timing``'s IQR with its unit, or :data:`UNKNOWN_SPREAD` when too few blocks were measured to know it."""
    return format_seconds(timing.iqr) if timing.spread_known else UNKNOWN_SPREAD


def _thread_count(n: int) -> str:
    """``"1 thread"``, ``"4 threads"``: one message per number, as a translation may need."""
    return (_("{n} thread") if n == 1 else _("{n} threads")).format(n=n)


def sync_timer(device: str | torch.device | None = None) -> Callable[[], float]:
    """A host clock that first waits for ``device`` to finish its queued work.

    ``device`` is chosen by :func:`helpers.device.pick_device` (explicit, then
    ``COURSE_DEVICE``, then the best this machine has). On the CPU the clock is
    the plain ``timeit.default_timer``: work is finished when a call returns.
    """
    sys.audit("course.version", "helpers.benchmark:sync_timer")  # the grader: no exercise passes by calling this
    dev = pick_device(device)
    if dev.type == "cpu":
        return timeit.default_timer

    def clock() -> float:
        synchronize(dev)
        return timeit.default_timer()

    return clock


def time_callable(
    fn: Callable[[], Any],
    device: str | torch.device | None = None,
    *,
    warmup: int = 3,
    min_run_time: float = 0.2,
    max_run_time: float | None = None,
    num_threads: int | None = None,
    flops: float | None = None,
    nbytes: float | None = None,
    label: str = "",
    warn: bool = True,
) -> Timing:
    """Seconds per call of ``fn()`` on ``device``, measured correctly.

    Create the inputs *before* calling this (on ``device``): only ``fn()`` is
    timed. ``warmup`` untimed calls come first; then :func:`measure_blocks`
    times blocks of calls with ``torch.utils.benchmark.Timer``, reading a clock
    that synchronises ``device``: a block size that makes the clock's cost a
    small share of a block, blocks for at least ``min_run_time`` seconds and
    at least :data:`MIN_BLOCKS` of them. With ``max_run_time`` it keeps
    measuring until IQR / median is below 0.1 or ``max_run_time`` is spent
    (as torch's ``adaptive_autorange``). Why not torch's own block choice: see
    :func:`measure_blocks`.

    ``num_threads`` defaults to ``torch.get_num_threads()`` (all the threads
    torch uses for real work), not ``Timer``'s default of 1. ``flops`` and
    ``nbytes`` (work in ONE call) give ``flops_per_s`` and ``bytes_per_s``.
    Warns with :class:`NoisyTimingWarning` when the result is :attr:`Timing.noisy`.
    """
    sys.audit("course.version", "helpers.benchmark:time_callable")  # the grader: no exercise passes by calling this
    dev = pick_device(device)
    threads = int(num_threads) if num_threads is not None else torch.get_num_threads()
    _warm_up(fn, dev, warmup, threads)
    timer = torch_benchmark.Timer(
        stmt="fn()", globals={"fn": fn}, timer=sync_timer(dev), num_threads=threads, label=label or "fn", env=str(dev)
    )
    m = measure_blocks(timer, sync_timer(dev), min_run_time=min_run_time, max_run_time=max_run_time)
    timing = Timing.from_measurement(m, dev, label, num_threads=threads, flops=flops, nbytes=nbytes, warmup=warmup)
    if warn:
        _warn_if_noisy(timing)
    return timing


def measure_blocks(timer: Any, clock: Callable[[], float], *, min_run_time: float,
                   max_run_time: float | None = None) -> Any:
    """Blocks of calls timed with ``clock``: at least :data:`MIN_BLOCKS` of them, so the spread is known.

    Why not torch's ``blocked_autorange``: it grows the block 10x at a time until the clock's cost is 1e-4 of
    it. A clock that synchronises a GPU costs 3-10 us, so a block must last 30-100 ms, overshoots
    ``min_run_time``, and the measurement is one block with an IQR of 0 ("too few repeats", no conclusion:
    review 3, W1). Here the clock's cost need only be :data:`CLOCK_SHARE` of a block (and a block lasts at
    least ``min_run_time / 1000``, torch's own floor), so blocks stay short and many. The same rule on every
    device, the CPU included, so that one rule decides how a measurement is made wherever it runs.

    Blocks are measured until ``min_run_time`` is spent and there are :data:`MIN_BLOCKS`; with
    ``max_run_time`` also until IQR / median is below :data:`NOISE_THRESHOLD` (torch's ``adaptive_autorange``
    rule), but never past ``max_run_time``. A block is timed by torch's ``Timer._timeit``, what its own
    autorange methods call: the public ``Timer.timeit`` first makes ``max(number // 100, 2)`` untimed calls
    per block, which would triple the cost of a block of one long call. Returns torch's ``Measurement``.
    """
    threads = timer._task_spec.num_threads
    overhead = statistics.median(_clock_cost(clock) for _ in range(5))
    target = max(overhead / CLOCK_SHARE, min_run_time / 1000)
    with _torch_threads(threads):
        number, first = 1, timer._timeit(1)
        while first < target and first < min_run_time:
            grow = target / max(first, 1e-9)
            number = min(number * 10, max(number + 1, math.ceil(number * grow)))
            first = timer._timeit(number)
        raw, spent = [first], first

        def done() -> bool:
            if max_run_time is not None and spent >= max_run_time:
                return True
            if spent < min_run_time or len(raw) < MIN_BLOCKS:
                return False
            return max_run_time is None or _measurement(timer, number, raw).meets_confidence(NOISE_THRESHOLD)

        while not done():
            raw.append(timer._timeit(number))
            spent += raw[-1]
    return _measurement(timer, number, raw)


def _clock_cost(clock: Callable[[], float]) -> float:
    """Seconds between two reads of ``clock`` with nothing between: what one read costs (torch's ``_timeit(0)``)."""
    start = clock()
    return clock() - start


def _measurement(timer: Any, number: int, raw_times: list[float]) -> Any:
    """torch's ``Measurement`` of ``raw_times`` (seconds per block of ``number`` calls) of ``timer``'s task."""
    return torch_benchmark.Measurement(number_per_run=number, raw_times=list(raw_times), task_spec=timer._task_spec)


@contextlib.contextmanager
def _torch_threads(threads: int) -> Iterator[None]:
    """torch's intra-op threads set to ``threads`` while the block runs, then put back."""
    saved = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(saved)


def _warm_up(fn: Callable[[], Any], dev: torch.device, warmup: int, threads: int) -> None:
    """``warmup`` untimed calls with the measurement's thread count, then wait for the device to finish them."""
    with _torch_threads(threads):
        for _ in range(warmup):
            fn()
        synchronize(dev)  # a no-op on the CPU


def _warn_if_noisy(timing: Timing) -> None:
    """Warn (at the caller of :func:`time_callable`) when ``timing`` is too noisy to draw a conclusion from."""
    if timing.noisy:
        warnings.warn(
            _("{label} on {device}: median {median}, but {spread}, so it is too noisy to draw a conclusion from (a "
              "steady measurement's spread stays below {threshold:.0%} of its median, over at least {blocks} "
              "blocks). A longer min_run_time measures more blocks; a rerun while no other program competes for the "
              "machine narrows the spread.").format(
                label=timing.label or _("measurement"), device=timing.device, median=format_seconds(timing.median),
                spread=timing.describe_spread(), threshold=NOISE_THRESHOLD, blocks=MIN_BLOCKS),
            NoisyTimingWarning,
            stacklevel=3,
        )


# --------------------------------------------------------------------------- conclusions: comparing measurements


def _band(timing: Timing) -> tuple[float, float]:
    """The median plus or minus half its spread: the IQR, but at least :data:`MIN_SPREAD` of the median."""
    half = max(timing.iqr, MIN_SPREAD * timing.median) / 2
    return timing.median - half, timing.median + half


def _times(ratio: float) -> str:
    """``1.834`` -> ``"1.83x"``: two decimals near 1, where they matter, fewer further out; "1.83배" in Korean."""
    if not math.isfinite(ratio):
        return _("unbounded")
    return (_("{ratio:.2f}x") if ratio < 10 else _("{ratio:.1f}x") if ratio < 100 else _("{ratio:.0f}x")
            ).format(ratio=ratio)


@dataclasses.dataclass(frozen=True)
class Conclusion:
    """What two measurements say about which work is faster, by :func:`compare`'s rule.

    ``str(conclusion)`` is the sentence a chapter prints: a conclusion
    (``"A is 1.83x faster than B (1.41x to 2.30x, from their spreads)"``) only
    when there is one, otherwise that the difference is within the noise on
    this machine, or that too few repeats were measured to know.
    """

    a: Timing
    b: Timing
    speedup: float  #: ``b.median / a.median``: how many times faster ``a`` ran than ``b`` (below 1: slower)
    low: float  #: the least speed-up the two bands allow: the low edge of ``b``'s band over the high edge of ``a``'s
    high: float  #: the most: the high edge of ``b``'s over the low edge of ``a``'s (inf when ``a``'s reaches 0)
    threads_compared: bool = False  #: the thread count is what differs on purpose: no like-with-like note

    @property
    def known(self) -> bool:
        """Whether both spreads are known (:data:`MIN_BLOCKS` repeats each) and both medians are positive."""
        return all(len(t.times) >= MIN_BLOCKS and math.isfinite(t.median) and t.median > 0 for t in (self.a, self.b))

    @property
    def faster(self) -> Timing | None:
        """The faster measurement beyond the noise, or None: the speed-up's interval must exclude 1."""
        if not self.known:
            return None
        return self.a if self.low > 1 else self.b if self.high < 1 else None

    @property
    def slower(self) -> Timing | None:
        faster = self.faster
        return None if faster is None else (self.b if faster is self.a else self.a)

    @property
    def clear(self) -> bool:
        """Whether the measurements say which is faster."""
        return self.faster is not None

    @property
    def ratio(self) -> float:
        """The larger median over the smaller (at least 1): how far apart they are, whoever is faster."""
        return max(self.speedup, 1 / self.speedup) if self.speedup > 0 else math.inf

    def exceeds(self, other: "Conclusion") -> bool:
        """Whether this speed-up is larger than ``other``'s beyond the noise: its interval lies wholly above."""
        return self.known and other.known and self.low > other.high

    def sentence(self, longer: bool = False) -> str:
        """The conclusion in words; ``longer=True`` names the slower first (``"data takes 40x as long as forward"``)."""
        return self._conclusion(longer) if self.clear else self._no_conclusion()

    def _conclusion(self, longer: bool) -> str:
        fast, slow = self.faster, self.slower
        ahead = self if fast is self.a else compare(fast, slow)  # the interval of the faster one's speed-up
        low, high = ahead.low, ahead.high
        interval = (_("at least {low}").format(low=_times(low)) if not math.isfinite(high) else
                    _("{low} to {high}").format(low=_times(low), high=_times(high)))
        head = (_("{slow} takes {ratio} as long as {fast}") if longer else _("{fast} is {ratio} faster than {slow}")
                ).format(slow=_name(slow, _("the other") if not longer else _("it")),
                         fast=_name(fast, _("the other") if longer else _("one")), ratio=_times(self.ratio))
        return _("{head} ({interval}, from their spreads)").format(head=head, interval=interval) + self._threads()

    def _no_conclusion(self) -> str:
        names = _("{a} and {b}").format(a=_name(self.a, _("the first")), b=_name(self.b, _("the second")))
        if not self.known:
            few = [t for t in (self.a, self.b) if len(t.times) < MIN_BLOCKS]
            why = (_("too few repeats to know the spread ({counts}; at least {needed} needed)").format(
                counts=", ".join(str(len(t.times)) for t in few), needed=MIN_BLOCKS) if few else
                _("a median that is not a positive time"))
            return _("{names} cannot be told apart: {why}, so no conclusion").format(names=names, why=why) + \
                self._threads()
        return _("{names} are within the noise on this machine ({ratio} apart, but their spreads overlap): no "
                 "conclusion").format(names=names, ratio=_times(self.ratio)) + self._threads()

    def _threads(self) -> str:
        """A note when the two sides did not use the same threads: the reader must know it is not like with like."""
        if self.threads_compared or self.a.num_threads == self.b.num_threads:
            return ""
        return _(" [not like with like: {a} torch threads in all against {b}]").format(a=self.a.num_threads,
                                                                                       b=self.b.num_threads)

    def __str__(self) -> str:
        return self.sentence()


def _name(timing: Timing | None, default: str) -> str:
    return timing.label if timing is not None and timing.label else default


def compare(a: Timing, b: Timing, *, threads_compared: bool = False) -> Conclusion:
    """Whether ``a`` ran faster than ``b``, slower, or within the noise: the course's one rule for comparisons.

    The rule: each measurement stands for a band, its median plus or minus
    half its spread, the spread being its IQR (the middle half of its repeats)
    but at least :data:`MIN_SPREAD` of its median. ``a`` is faster than ``b``
    only when ``a``'s band lies wholly below ``b``'s; equivalently, when the
    speed-up's interval (``b``'s band over ``a``'s: :attr:`Conclusion.low` to
    :attr:`Conclusion.high`) excludes 1. Why this rule:

    * the IQR is the spread torch's ``Measurement`` reports and
      :meth:`Timing.meets_confidence` judges: robust to the odd slow repeat,
      which a standard deviation is not;
    * the floor of :data:`MIN_SPREAD` (10 %) stands for what changes *between*
      two measurements on a shared machine (another program starts), which no
      spread *within* one can show; so a speed-up below about 1.1x is never
      declared;
    * a measurement of fewer than :data:`MIN_BLOCKS` repeats has no spread to
      judge and gives no conclusion.

    Compare like with like: the same device and threads, the same work per
    repeat. The sentence notes unequal ``num_threads``, unless
    ``threads_compared`` says the thread count is the one thing varied.
    """
    (a_low, a_high), (b_low, b_high) = _band(a), _band(b)
    speedup = b.median / a.median if a.median > 0 else math.nan
    low = b_low / a_high if a_high > 0 else math.nan
    high = b_high / a_low if a_low > 0 else math.inf
    return Conclusion(a, b, speedup, low, high, threads_compared)


def leaders(timings: Sequence[Timing], slowest: bool = False) -> list[Timing]:
    """The fastest of ``timings`` (or the slowest) and every other that :func:`compare` cannot tell from it.

    In order of median, the extreme first. One leader: it stands apart beyond
    the noise. Several: they are tied on this machine, and naming one of them
    "the best" would be naming the noise. A measurement without a median (a
    region that never ran: NaN) takes no part.
    """
    ordered = sorted(_measured(timings), key=lambda t: t.median, reverse=slowest)
    return [t for t in ordered if t is ordered[0] or not compare(ordered[0], t).clear]


def _measured(timings: Iterable[Timing]) -> list[Timing]:
    """The timings with a median to compare; at least one, or ValueError."""
    measured = [t for t in timings if math.isfinite(t.median)]
    if not measured:
        raise ValueError(_("leaders() needs at least one measurement with a median"))
    return measured


def describe_leader(timings: Sequence[Timing], what: str, slowest: bool = False, *,
                    threads_compared: bool = False) -> str:
    """What :func:`leaders` found, in words: ``"the bottleneck is load: load takes 63x as long as compute (...)"``.

    The leader is named, with its conclusion against the runner-up (the next by
    median), only when it stands apart from every other beyond the noise;
    otherwise all those tied with it are named as within the noise on this
    machine (``"no single bottleneck: ..."``). ``what`` names the role;
    ``threads_compared`` is :func:`compare`'s (the thread count is one of the
    things compared, so the sentence does not call it unlike).
    """
    top, measured = leaders(timings, slowest=slowest), _measured(timings)
    what = _(what)  # the role a chapter names ("fastest CPU baseline"): its English is a catalog entry too
    if len(top) > 1:
        return _("no single {what}: {names} are within the noise on this machine").format(
            what=what, names=_(" and ").join(t.label for t in top))
    if len(measured) == 1:
        return _("the {what} is {label}, the only one measured").format(what=what, label=top[0].label)
    runner_up = sorted(measured, key=lambda t: t.median, reverse=slowest)[1]
    pair = (runner_up, top[0]) if slowest else (top[0], runner_up)
    conclusion = compare(*pair, threads_compared=threads_compared)  # {verdict} below: the catalog's msgid, kept
    return _("the {what} is {label}: {verdict}").format(what=what, label=top[0].label,
                                                        verdict=conclusion.sentence(longer=slowest))


def report(timings: Iterable[Timing]) -> str:
    """Each measurement on a line with its spread (:meth:`Timing.summary`): the figures a conclusion came from."""
    return "\n".join(f"  {t.summary()}" for t in timings)


# --------------------------------------------------------------------------- sweeps and tables


class Table(list):
    """Rows of measurements, each a dict; a plain list, so anything that takes rows takes it.

    Every row of :func:`sweep` has the keys ``label``, ``device``, ``size``,
    ``num_threads``, ``median`` (s), ``iqr`` (s), ``flops_per_s``,
    ``bytes_per_s`` (None when unknown) and ``timing`` (the :class:`Timing`).
    :meth:`noisy`, :meth:`best` and :func:`describe_noisy` judge a row by its
    ``timing`` (:meth:`Timing.meets_confidence`), as :meth:`Timing.as_row` makes it.
    """

    def where(self, **equal: Any) -> "Table":
        """The rows whose fields equal the given values, e.g. ``table.where(device="cpu")``."""
        return Table(r for r in self if all(r.get(k) == v for k, v in equal.items()))

    def noisy(self, threshold: float = NOISE_THRESHOLD) -> "Table":
        """The rows too noisy to trust their median: their timing fails ``meets_confidence(threshold)``."""
        return Table(r for r in self if not r["timing"].meets_confidence(threshold))

    def best(self, key: str, threshold: float = NOISE_THRESHOLD) -> dict[str, Any] | None:
        """The row with the largest ``key`` among those that meet ``threshold``; None if no row does.

        The largest value over noisy rows is not a measurement but an accident:
        a block that ran while a competing program paused can report several
        times the real rate. Name the noisy rows (:meth:`noisy`) beside it.
        """
        rows = [r for r in self if r["timing"].meets_confidence(threshold) and r.get(key) is not None]
        return max(rows, key=lambda r: r[key]) if rows else None

    def column(self, key: str) -> list[Any]:
        return [r.get(key) for r in self]

    def group_by(self, key: str) -> dict[Any, "Table"]:
        """The rows split by their value of ``key``, in the order the values first appear.

        The shape :func:`helpers.plots.plot_sweep` draws, one line per value:
        ``plots.plot_sweep(ax, table.group_by("device"), "size", "median")``.
        """
        return {value: self.where(**{key: value}) for value in self.values(key)}

    def values(self, key: str) -> list[Any]:
        """The distinct values of ``key``, in the order they first appear."""
        seen: list[Any] = []
        for r in self:
            if r.get(key) not in seen:
                seen.append(r.get(key))
        return seen

    def format(self, columns: Sequence[str] = ("label", "device", "size", "median", "iqr", "flops_per_s", "bytes_per_s")) -> str:
        """A fixed-width text table, with units on times and rates."""
        columns = [c for c in columns if any(r.get(c) is not None for r in self)]

        def cell(key: str, value: Any, row: dict[str, Any]) -> str:
            if value is None:
                return "-"
            if key == "iqr" and isinstance(row.get("timing"), Timing):
                return _spread_seconds(row["timing"])  # "—" where too few blocks say nothing of the spread
            if key in ("median", "iqr"):
                return format_seconds(value)
            if key == "flops_per_s":
                return format_rate(value, "FLOP/s")
            if key == "bytes_per_s":
                return format_rate(value, "B/s")
            if isinstance(value, float):
                return f"{value:.3g}"
            return str(value)

        grid = [list(columns)] + [[cell(c, r.get(c), r) for c in columns] for r in self]
        widths = [max(len(row[i]) for row in grid) for i in range(len(columns))]
        lines = ["  ".join(v.rjust(w) for v, w in zip(row, widths)) for row in grid]
        lines.insert(1, "  ".join("-" * w for w in widths))
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.format()


def describe_noisy(table: Table, fields: Sequence[str] = ("label", "device", "size")) -> str:
    """``"cpu n=64 (IQR 70% of the median), ..."``: the noisy rows named, or ``""`` when there are none."""
    def name(r: dict[str, Any]) -> str:
        parts = [str(r[f]) if f != "size" else f"n={r[f]}" for f in fields if r.get(f) not in (None, "")]
        return f"{' '.join(parts)} ({r['timing'].describe_spread()})"

    return ", ".join(name(r) for r in table.noisy())


def limited_by(timing: Timing, *, bandwidth: float, flops_per_s: float, near: float = 0.5,
               far: float = 0.1) -> str:
    """What the measurement says limits ``timing``'s work: ``"memory"``, ``"compute"`` or ``"unclear"``.

    ``bandwidth`` is the bytes/s a plain copy reached on the same device, and
    ``flops_per_s`` what a large matrix product reached there: the two ceilings
    measured, not taken from a data sheet. Memory-bound means moving bytes at
    ``near`` that bandwidth or more while doing at most ``far`` of that FLOP/s;
    compute-bound means at least ``near`` of that FLOP/s. Anything else
    (per-call overhead at a small size, noise) is ``"unclear"``: say so rather
    than print a conclusion the numbers do not support.
    """
    if timing.flops_per_s is not None and timing.flops_per_s >= near * flops_per_s:
        return "compute"
    achieved = timing.bytes_per_s
    if achieved is not None and achieved >= near * bandwidth and (timing.flops_per_s or 0.0) <= far * flops_per_s:
        return "memory"
    return "unclear"


def copy_work(n: int, dtype: torch.dtype = torch.float32) -> dict[str, float]:
    """Work in one copy of an (n, n) tensor into another: no FLOP, n^2 elements read and n^2 written."""
    size = torch.tensor([], dtype=dtype).element_size()
    return {"nbytes": 2.0 * n * n * size}


def matmul_work(n: int, dtype: torch.dtype = torch.float32) -> dict[str, float]:
    """Work in one ``(n, n) @ (n, n)`` product: 2 n^3 FLOP, 3 n^2 elements moved at best."""
    size = torch.tensor([], dtype=dtype).element_size()
    return {"flops": 2.0 * n**3, "nbytes": 3.0 * n * n * size}


def add_work(n: int, dtype: torch.dtype = torch.float32) -> dict[str, float]:
    """Work in one element-wise ``a + b`` of (n, n) tensors: n^2 FLOP, 3 n^2 elements moved."""
    size = torch.tensor([], dtype=dtype).element_size()
    return {"flops": 1.0 * n * n, "nbytes": 3.0 * n * n * size}


def sweep(
    make: Callable[[int, torch.device], Callable[[], Any]],
    sizes: Iterable[int],
    devices: Iterable[str | torch.device] | None = None,
    *,
    work: Callable[[int], dict[str, float]] | None = None,
    label: str = "",
    warmup: int = 3,
    min_run_time: float = 0.1,
    num_threads: int | None = None,
    progress: bool = True,
    warn: bool = False,
) -> Table:
    """Time the same work at several sizes on several devices; one :class:`Table` row each.

    ``make(size, device)`` creates the inputs on ``device`` and returns the
    zero-argument callable to time (so creating inputs is never timed).
    ``work(size)`` returns ``{"flops": ..., "nbytes": ...}`` for one call
    (e.g. :func:`matmul_work`). ``devices`` defaults to every device this
    machine has. A progress bar shows while it runs. Noise warnings are off by
    default (a sweep's small sizes are often noisy); each row's ``iqr`` keeps
    the spread.
    """
    sys.audit("course.version", "helpers.benchmark:sweep")  # the grader: no exercise passes by calling this
    from tqdm.auto import tqdm

    devices = [torch.device(d) for d in (devices if devices is not None else available_devices())]
    sizes = list(sizes)
    table = Table()
    jobs = [(d, n) for d in devices for n in sizes]
    for dev, n in tqdm(jobs, desc=label or _("sweep"), disable=not progress, leave=False):
        fn = make(n, dev)
        w = work(n) if work is not None else {}
        timing = time_callable(
            fn, dev, warmup=warmup, min_run_time=min_run_time, num_threads=num_threads,
            flops=w.get("flops"), nbytes=w.get("nbytes"), label=label, warn=warn,
        )
        row = timing.as_row()
        row["size"] = n
        table.append(row)
        del fn
    return table


def compare_with_torch_timer(n: int = 1024, rounds: int = 5, num_threads: int | None = None,
                             min_run_time: float = 1.0) -> Table:
    """The course's timer against ``torch.utils.benchmark.Timer.blocked_autorange`` on one CPU matrix product.

    Same (n, n) product, same thread count, the two interleaved for ``rounds``
    rounds so a change in machine load hits both. One row per round with both
    medians and their relative difference; run by ``python -m helpers bench
    --vs-timer``. A report, not a test: timings on a shared machine wander.
    """
    threads = int(num_threads) if num_threads is not None else torch.get_num_threads()
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(n, n, generator=g), torch.randn(n, n, generator=g)
    table = Table()
    for r in range(rounds):
        ref = torch_benchmark.Timer("a @ b", globals={"a": a, "b": b}, num_threads=threads).blocked_autorange(
            min_run_time=min_run_time)
        ours = time_callable(lambda: a @ b, "cpu", num_threads=threads, min_run_time=min_run_time, warn=False)
        table.append({"round": r, "size": n, "num_threads": threads, "torch_timer": ref.median,
                      "time_callable": ours.median, "difference": (ours.median - ref.median) / ref.median})
    return table


def crossover(sizes: Sequence[int], speedups: Sequence[float | Conclusion | None]) -> int | None:
    """The smallest size from which the accelerator is faster at that size and every larger one.

    None when it is not faster at the largest size measured. ``sizes`` must be
    increasing. Each of ``speedups`` is either a plain speed-up,
    ``cpu_seconds[i] / accelerator_seconds[i]`` (faster: above 1; chapter
    01's exercise defines the crossover so), or the :class:`Conclusion`
    ``compare(accelerator, cpu)`` at that size (:func:`verdicts_by_size`),
    as the chapters pass it: then faster means faster beyond the noise
    (``conclusion.faster is conclusion.a``), so a size where the two are within
    the noise on this machine ends the run like a loss, and no crossover is
    claimed that one noisy reading made.
    """
    sys.audit("course.version", "helpers.benchmark:crossover")  # the grader: no exercise passes by calling this
    found = None
    for n, s in reversed(list(zip(sizes, speedups))):
        wins = s.faster is s.a if isinstance(s, Conclusion) else s is not None and s > 1
        if not wins:
            break
        found = n
    return found


def verdicts_by_size(table: Table, a: str | torch.device, b: str | torch.device) -> dict[Any, Conclusion]:
    """``compare(a's timing, b's timing)`` at every size a :func:`sweep` measured on both devices, by size.

    ``a`` and ``b`` are devices of ``table`` (``"cuda:0"``, ``"cpu"``): each
    conclusion's ``speedup`` is ``b``'s median over ``a``'s, with its interval
    (:attr:`Conclusion.low` to :attr:`Conclusion.high`), and its sentence names
    the devices (the timings are copies labelled by device; the table's own
    are left as they are). Pass the list of conclusions to :func:`crossover`.
    (Its name predates :class:`Conclusion`: chapter 01's text, in both editions, names it.)
    """
    def by_size(device: str | torch.device) -> dict[Any, Timing]:
        return {r["size"]: dataclasses.replace(r["timing"], label=str(device)) for r in table.where(device=str(device))}

    first, second = by_size(a), by_size(b)
    return {n: compare(first[n], second[n]) for n in first if n in second}


# --------------------------------------------------------------------------- stand-ins for asynchronous devices


class BackgroundQueue:
    """Real work run in order on a background thread; only :meth:`synchronize` waits for it.

    An honest stand-in for a GPU's stream on a machine without one: ``submit``
    returns as soon as the work is queued (as a CUDA kernel launch does), the
    work itself runs later on another thread, and a host clock read without
    ``synchronize()`` first measures only the queueing. An exception raised by
    queued work surfaces at the next ``synchronize()``, as an asynchronous
    CUDA error surfaces at a later call.
    """

    def __init__(self) -> None:
        self._queue: queue.Queue = queue.Queue()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="BackgroundQueue", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is None:
                    return
                fn, args, kwargs = item
                if self._error is None:
                    fn(*args, **kwargs)
            except BaseException as err:  # noqa: BLE001 - kept and re-raised by synchronize()
                self._error = err
            finally:
                self._queue.task_done()

    def submit(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        """Queue ``fn(*args, **kwargs)`` and return at once."""
        self._queue.put((fn, args, kwargs))

    def synchronize(self) -> None:
        """Wait until every submitted piece of work has finished; re-raise its error if one failed."""
        self._queue.join()
        if self._error is not None:
            err, self._error = self._error, None
            raise err

    def close(self) -> None:
        """Finish the queued work and stop the thread."""
        self._queue.put(None)
        self._thread.join()

    def __enter__(self) -> "BackgroundQueue":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
