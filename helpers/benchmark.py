"""Time a callable correctly on any device; sweeps and comparison tables.

Chapter 01 (why GPUs) teaches it; every later chapter measures through it.

Built on :mod:`torch.utils.benchmark` rather than beside it: :func:`time_callable`
hands the work to ``torch.utils.benchmark.Timer`` (adaptive block size, many
blocks, median and interquartile range) and adds what a CPU-vs-GPU comparison
needs on top:

* an explicit warm-up before anything is timed (first calls pay for lazy
  initialisation, allocation and caches);
* a clock that synchronises *the device being measured* before every read
  (GPU kernels run asynchronously: a bare host clock times only the launch);
* threads that default to what torch uses for real work,
  ``torch.get_num_threads()``, instead of ``Timer``'s default of 1, which makes
  a CPU baseline look several times slower than it is;
* throughput (FLOP/s, bytes/s) when the caller says how much work one call does;
* a :class:`NoisyTimingWarning` when the spread (IQR / median) is large.

It also holds the stand-ins chapter 01 uses to show and to grade the
missing-synchronisation mistake on a machine without a GPU:
:class:`BackgroundQueue` (real work queued on a background thread, finished
only by ``synchronize()``) and :class:`SimulatedDevice` (a virtual clock and
spies on every public way to synchronise, for the graded timer exercise).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import queue
import statistics
import threading
import time
import timeit
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import torch
import torch.utils.benchmark as torch_benchmark

from helpers import device as _device
from helpers.device import synchronize

__all__ = [
    "BackgroundQueue",
    "FakeComparison",
    "NoisyTimingWarning",
    "SimulatedDevice",
    "Table",
    "Timing",
    "cpu_only_machine",
    "crossover",
    "format_rate",
    "format_seconds",
    "matmul_work",
    "add_work",
    "compare_with_torch_timer",
    "as_seconds",
    "simulate_timer",
    "plot_sweep",
    "sweep",
    "synchronize",
    "sync_timer",
    "time_callable",
]

#: Above this IQR / median a measurement is flagged as noisy (torch's own threshold).
NOISE_THRESHOLD = 0.1


class NoisyTimingWarning(UserWarning):
    """The spread of a measurement is large: another program competed, or the work varies per call."""


# --------------------------------------------------------------------------- formatting


def format_seconds(seconds: float | None) -> str:
    """``0.0123`` -> ``"12.3 ms"``: the unit a reader takes in at a glance."""
    if seconds is None or not math.isfinite(seconds):
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if abs(seconds) >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def format_rate(per_second: float | None, unit: str = "FLOP/s") -> str:
    """``9.5e10`` -> ``"95 GFLOP/s"`` (or ``"GB/s"`` with ``unit="B/s"``)."""
    if per_second is None or not math.isfinite(per_second):
        return "-"
    for prefix, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(per_second) >= scale:
            return f"{per_second / scale:.3g} {prefix}{unit}"
    return f"{per_second:.3g} {unit}"


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
        """IQR / median: above 0.1 the measurement is noisy."""
        return self.iqr / self.median if self.median > 0 else math.inf

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
        parts = [f"{format_seconds(self.median)} per call (IQR {format_seconds(self.iqr)})"]
        if self.flops_per_s is not None:
            parts.append(format_rate(self.flops_per_s, "FLOP/s"))
        if self.bytes_per_s is not None:
            parts.append(format_rate(self.bytes_per_s, "B/s"))
        where = f"{self.device}, {self.num_threads} thread{'s' if self.num_threads != 1 else ''}, {self.calls} calls"
        head = f"{self.label}: " if self.label else ""
        return head + ", ".join(parts) + f" [{where}]"


def _as_device(device: str | torch.device | None) -> torch.device:
    if device is None:
        return _device.accelerator() or torch.device("cpu")
    return torch.device(device)


def sync_timer(device: str | torch.device | None = None) -> Callable[[], float]:
    """A host clock that first waits for ``device`` to finish its queued work.

    On the CPU it is the plain ``timeit.default_timer`` (work is finished when
    a call returns). Looks ``synchronize`` up at each read, so a spy put on
    this module's ``synchronize`` sees every call.
    """
    dev = _as_device(device)
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
    timed. ``warmup`` untimed calls come first; then
    ``torch.utils.benchmark.Timer.blocked_autorange`` picks a block size that
    makes the clock's own cost negligible and measures blocks for at least
    ``min_run_time`` seconds, reading a clock that synchronises ``device``.
    With ``max_run_time`` it uses ``adaptive_autorange`` instead: it keeps
    measuring until IQR / median is below 0.1 or ``max_run_time`` is spent.

    ``num_threads`` defaults to ``torch.get_num_threads()`` (all the threads
    torch uses for real work), not ``Timer``'s default of 1. ``flops`` and
    ``nbytes`` (work in ONE call) give ``flops_per_s`` and ``bytes_per_s``.
    Warns with :class:`NoisyTimingWarning` when IQR / median exceeds 0.1.
    """
    dev = _as_device(device)
    threads = int(num_threads) if num_threads is not None else torch.get_num_threads()
    clock = sync_timer(dev)
    saved_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        for _ in range(warmup):
            fn()
        if dev.type != "cpu":
            synchronize(dev)
    finally:
        torch.set_num_threads(saved_threads)
    timer = torch_benchmark.Timer(
        stmt="fn()", globals={"fn": fn}, timer=clock, num_threads=threads, label=label or "fn", env=str(dev)
    )
    if max_run_time is not None:
        m = timer.adaptive_autorange(threshold=NOISE_THRESHOLD, min_run_time=min_run_time, max_run_time=max_run_time)
    else:
        m = timer.blocked_autorange(min_run_time=min_run_time)
    timing = Timing(
        median=float(m.median),
        iqr=float(m.iqr),
        times=[float(t) for t in m.times],
        num_threads=threads,
        device=str(dev),
        label=label,
        flops=flops,
        nbytes=nbytes,
        number_per_run=int(m.number_per_run),
        warmup=warmup,
    )
    if warn and len(timing.times) >= 4 and timing.relative_iqr > NOISE_THRESHOLD:
        warnings.warn(
            f"{label or 'measurement'} on {dev}: the spread is large (IQR is {timing.relative_iqr:.0%} of the "
            f"median {format_seconds(timing.median)}); another program may be competing for the machine. "
            f"Rerun, or give it a longer min_run_time.",
            NoisyTimingWarning,
            stacklevel=2,
        )
    return timing


# --------------------------------------------------------------------------- sweeps and tables


class Table(list):
    """Rows of measurements, each a dict; a plain list, so anything that takes rows takes it.

    Every row of :func:`sweep` has the keys ``label``, ``device``, ``size``,
    ``num_threads``, ``median`` (s), ``iqr`` (s), ``flops_per_s``,
    ``bytes_per_s`` (None when unknown) and ``timing`` (the :class:`Timing`).
    """

    def where(self, **equal: Any) -> "Table":
        """The rows whose fields equal the given values, e.g. ``table.where(device="cpu")``."""
        return Table(r for r in self if all(r.get(k) == v for k, v in equal.items()))

    def column(self, key: str) -> list[Any]:
        return [r.get(key) for r in self]

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

        def cell(key: str, value: Any) -> str:
            if value is None:
                return "-"
            if key in ("median", "iqr"):
                return format_seconds(value)
            if key == "flops_per_s":
                return format_rate(value, "FLOP/s")
            if key == "bytes_per_s":
                return format_rate(value, "B/s")
            if isinstance(value, float):
                return f"{value:.3g}"
            return str(value)

        grid = [list(columns)] + [[cell(c, r.get(c)) for c in columns] for r in self]
        widths = [max(len(row[i]) for row in grid) for i in range(len(columns))]
        lines = ["  ".join(v.rjust(w) for v, w in zip(row, widths)) for row in grid]
        lines.insert(1, "  ".join("-" * w for w in widths))
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.format()


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
    from tqdm.auto import tqdm

    devices = [torch.device(d) for d in (devices if devices is not None else _device.available_devices())]
    sizes = list(sizes)
    table = Table()
    jobs = [(d, n) for d in devices for n in sizes]
    for dev, n in tqdm(jobs, desc=label or "sweep", disable=not progress, leave=False):
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


def crossover(sizes: Sequence[int], speedups: Sequence[float | None]) -> int | None:
    """The smallest size from which the accelerator is faster (speed-up > 1) at that size and every larger one.

    None when it is not faster at the largest size measured. ``sizes`` must be
    increasing; ``speedups[i] = cpu_seconds[i] / accelerator_seconds[i]``.
    """
    found = None
    for n, s in reversed(list(zip(sizes, speedups))):
        if s is None or not s > 1:
            break
        found = n
    return found


def plot_sweep(table: Table, metric: str = "flops_per_s", ax=None, *, group: str = "device", title: str = ""):
    """Log-log plot of ``metric`` against ``size``, one line per ``group`` value; returns the axes.

    ``metric`` is ``"flops_per_s"`` (plotted in GFLOP/s), ``"bytes_per_s"`` (GB/s) or
    ``"median"`` (seconds per call).
    """
    from helpers import plots

    if ax is None:
        _, ax = plots.new_figure()
    scale, ylabel = {
        "flops_per_s": (1e-9, "GFLOP/s (higher is better)"),
        "bytes_per_s": (1e-9, "GB/s (higher is better)"),
        "median": (1.0, "seconds per call (lower is better)"),
    }[metric]
    for key in table.values(group):
        rows = table.where(**{group: key})
        xs = rows.column("size")
        ys = [None if v is None else v * scale for v in rows.column(metric)]
        ax.plot(xs, ys, marker="o", label=str(key))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("size n")
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.legend(fontsize=8)
    return ax


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


# Every public clock and every public way to synchronise that a learner's timer may use.
_CLOCKS: dict[str, tuple[Any, str, float]] = {
    # name: (owner, attribute, scale from seconds)
    "perf_counter": (time, "perf_counter", 1.0),
    "perf_counter_ns": (time, "perf_counter_ns", 1e9),
    "monotonic": (time, "monotonic", 1.0),
    "monotonic_ns": (time, "monotonic_ns", 1e9),
    "time": (time, "time", 1.0),
    "time_ns": (time, "time_ns", 1e9),
    "default_timer": (timeit, "default_timer", 1.0),
}


def _sync_routes() -> list[tuple[Any, str]]:
    import sys

    routes = [(torch.cuda, "synchronize"), (torch.mps, "synchronize"), (_device, "synchronize")]
    if hasattr(torch, "accelerator"):
        routes.append((torch.accelerator, "synchronize"))
    routes.append((sys.modules[__name__], "synchronize"))
    return routes


@contextlib.contextmanager
def _patched(changes: list[tuple[Any, str, Any]], namespaces: Iterable[dict] = ()) -> Iterator[None]:
    """Set attributes (and names in ``namespaces`` bound to the same originals); undo on exit."""
    saved: list[tuple[Any, str, Any]] = []
    replacement_of: dict[int, Any] = {}
    try:
        for owner, attr, new in changes:
            old = getattr(owner, attr)
            replacement_of.setdefault(id(old), new)
            saved.append((owner, attr, old))
            setattr(owner, attr, new)
        for ns in namespaces:
            for name, value in list(ns.items()):
                if id(value) in replacement_of and any(value is old for _, _, old in saved):
                    saved.append((ns, name, value))
                    ns[name] = replacement_of[id(value)]
        yield
    finally:
        for owner, attr, old in reversed(saved):
            if isinstance(owner, dict):
                owner[attr] = old
            else:
                setattr(owner, attr, old)


class SimulatedDevice:
    """A stand-in device with a virtual clock, to check a timer's logic on a CPU-only grader.

    ``kind="cuda"`` behaves like a GPU: calling a kernel made by :meth:`kernel`
    costs the host only ``launch_s`` of (virtual) time, and the kernel runs on
    the device's queue; the host waits for it only when it synchronises.
    ``kind="cpu"`` is synchronous: a call returns when its work is done.

    While :meth:`active` (a context manager), in the thread that entered it:

    * the host clocks ``time.perf_counter``, ``perf_counter_ns``, ``monotonic``,
      ``monotonic_ns``, ``time``, ``time_ns`` and ``timeit.default_timer`` read
      the virtual clock, so results do not depend on how fast the grader is;
    * every public way to synchronise, ``torch.cuda.synchronize``,
      ``torch.accelerator.synchronize``, ``torch.mps.synchronize``,
      ``helpers.device.synchronize`` and ``helpers.benchmark.synchronize``,
      waits for the virtual queue (any arguments are accepted);
    * for ``kind="cuda"``, ``torch.cuda.is_available()`` and
      ``torch.accelerator.is_available()`` return True (and
      ``torch.accelerator.current_accelerator()`` the simulated device), so a
      timer that synchronises only when there is a GPU behaves as it would on one.

    Names bound to those functions in ``namespaces`` (a learner's
    ``from time import perf_counter``) are replaced too. ``log`` records, in
    order, ``("call", i)``, ``("sync", busy)`` and ``("clock", busy)`` events,
    where ``busy`` says whether queued work was still unfinished at that moment.
    """

    def __init__(self, kind: str = "cuda", *, launch_s: float = 5e-6, start: float = 1000.0) -> None:
        self.device = torch.device(kind)
        self.asynchronous = self.device.type != "cpu"
        self.launch_s = launch_s
        self.now = start  # host time, virtual seconds
        self.free_at = start  # when the device finishes its queued work
        self.calls = 0
        self.log: list[tuple] = []
        self._owner: int | None = None

    # -- the device
    @property
    def busy(self) -> bool:
        return self.free_at > self.now + 1e-15

    def kernel(self, durations: float | Sequence[float] | Callable[[int], float]) -> Callable[[], None]:
        """A zero-argument function whose i-th call does ``durations[i]`` seconds of work on this device.

        ``durations`` may be one number (every call), a sequence (the last
        value repeats) or a function of the call index (0-based).
        """

        def duration(i: int) -> float:
            if callable(durations):
                return float(durations(i))
            if isinstance(durations, (int, float)):
                return float(durations)
            return float(durations[min(i, len(durations) - 1)])

        def fn() -> None:
            i = self.calls
            self.calls += 1
            self.log.append(("call", i))
            d = duration(i)
            if self.asynchronous:
                self.now += self.launch_s
                self.free_at = max(self.free_at, self.now) + d
            else:
                self.now += d
                self.free_at = self.now

        fn.__name__ = f"{self.device.type}_kernel"
        return fn

    def synchronize(self, *args: Any, **kwargs: Any) -> None:
        """Wait (in virtual time) until all queued work is finished."""
        self.log.append(("sync", self.busy))
        self.now = max(self.now, self.free_at)

    def read_clock(self) -> float:
        """The virtual host time in seconds (recorded as a ``("clock", busy)`` event)."""
        self.log.append(("clock", self.busy))
        return self.now

    # -- what the log says
    def events(self, kind: str) -> list[tuple]:
        return [e for e in self.log if e[0] == kind]

    def calls_before_first_clock(self) -> int:
        n = 0
        for e in self.log:
            if e[0] == "clock":
                return n
            n += e[0] == "call"
        return n

    # -- patching
    def _clock(self, name: str, original: Callable[[], Any], scale: float) -> Callable[[], Any]:
        offset = 1.7e9 if name.startswith("time") else 0.0

        def read() -> Any:
            if threading.get_ident() != self._owner:
                return original()
            value = (offset + self.read_clock()) * scale
            return int(round(value)) if name.endswith("_ns") else value

        return read

    def _returns(self, value: Any) -> Callable[..., Any]:
        return lambda *args, **kwargs: value

    @contextlib.contextmanager
    def active(self, namespaces: Iterable[dict] = ()) -> Iterator["SimulatedDevice"]:
        """Route clocks and synchronisation to this device (see the class docstring)."""
        changes: list[tuple[Any, str, Any]] = []
        for name, (owner, attr, scale) in _CLOCKS.items():
            changes.append((owner, attr, self._clock(name, getattr(owner, attr), scale)))
        for owner, attr in _sync_routes():
            changes.append((owner, attr, self.synchronize))
        if self.asynchronous:
            changes += [
                (torch.cuda, "is_available", self._returns(True)),
                (torch.cuda, "device_count", self._returns(1)),
                (torch.cuda, "current_device", self._returns(0)),
                (torch.cuda, "is_initialized", self._returns(True)),
            ]
            if hasattr(torch, "accelerator"):
                changes += [
                    (torch.accelerator, "is_available", self._returns(True)),
                    (torch.accelerator, "current_accelerator", self._returns(self.device)),
                ]
        self._owner = threading.get_ident()
        try:
            with _patched(changes, list(namespaces)):
                yield self
        finally:
            self._owner = None


@contextlib.contextmanager
def cpu_only_machine() -> Iterator[None]:
    """Make torch behave as a CPU-only build does, even on a machine with a GPU.

    ``torch.cuda.synchronize()`` raises (as on a CPU-only build), the
    ``is_available()`` checks return False. Lets a check ask "does this timer
    also work on a laptop without a GPU?" and get the same answer everywhere.
    """

    def no_cuda(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("Torch not compiled with CUDA enabled")

    def no_accelerator(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("Cannot access accelerator device when none is available.")

    def no_mps(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("Cannot execute deviceSynchronize() without MPS backend.")

    false = lambda *args, **kwargs: False  # noqa: E731
    changes: list[tuple[Any, str, Any]] = [
        (torch.cuda, "synchronize", no_cuda),
        (torch.cuda, "is_available", false),
        (torch.cuda, "device_count", lambda: 0),
        (torch.mps, "synchronize", no_mps),
    ]
    if hasattr(torch.backends, "mps"):
        changes.append((torch.backends.mps, "is_available", false))
    if hasattr(torch, "accelerator"):
        changes += [
            (torch.accelerator, "synchronize", no_accelerator),
            (torch.accelerator, "is_available", false),
            (torch.accelerator, "current_accelerator", lambda *a, **k: None),
        ]
    with _patched(changes):
        yield


def simulate_timer(
    timer: Callable[..., Any],
    kind: str | torch.device,
    durations: float | Sequence[float] | Callable[[int], float],
    device: str | torch.device | None = None,
    **kwargs: Any,
) -> tuple["SimulatedDevice", Any]:
    """Run ``timer(fn, device, **kwargs)`` on a fresh :class:`SimulatedDevice` of ``kind``; return (device, result).

    ``fn`` is the simulated device's kernel of ``durations``; ``device``
    defaults to the simulated ``torch.device``. The timer's module namespace
    is patched too (a learner's ``from time import perf_counter``). An
    unsolved stub says so, through :func:`helpers.checks.solved`. When a
    device *name* (a str) makes the timer raise, it is run again, on a fresh
    device, with ``torch.device(name)``: accepting a name is graded once, by
    the check on the real CPU, so that one slip does not cost every check.
    """
    from helpers.checks import CheckFailed, solved

    namespaces = [timer.__globals__] if hasattr(timer, "__globals__") else []

    def attempt(device_arg: Any) -> tuple[SimulatedDevice, Any]:
        sim = SimulatedDevice(str(kind))
        with sim.active(namespaces):
            return sim, solved(timer, sim.kernel(durations), sim.device if device_arg is None else device_arg,
                               **kwargs)

    try:
        return attempt(device)
    except CheckFailed:
        raise
    except Exception:  # noqa: BLE001 - retried once with a torch.device, else re-raised
        if not isinstance(device, str):
            raise
    return attempt(torch.device(device))


def as_seconds(value: Any) -> float | None:
    """``value`` as a float when it is one number (int, float, a NumPy scalar, a one-element tensor), else None.

    A timer may return ``statistics.median`` (float), ``numpy.median``
    (numpy.float64) or ``torch.tensor(times).median()`` (a 0-d tensor): all
    are seconds.
    """
    if isinstance(value, (bool, str, bytes)) or value is None:
        return None
    if isinstance(value, torch.Tensor) and (value.numel() != 1 or value.is_complex() or value.dtype == torch.bool):
        return None
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        return None
    return seconds if math.isfinite(seconds) else None


# --------------------------------------------------------------------------- grading a CPU-vs-accelerator comparison


def _type(device: Any) -> str:
    try:
        return torch.device(device).type
    except (TypeError, RuntimeError):
        return repr(device)


def _floats(values: Any) -> list[float] | None:
    try:
        return [float(v) for v in values]
    except (TypeError, ValueError):
        return None


class FakeComparison:
    """Injected timings for grading ``compare_devices`` on any machine, fast and without a GPU.

    ``seconds = {"cpu": [...], "cuda": [...]}`` gives the seconds per call
    that :meth:`timer` reports for the work :meth:`make_work` made, one per
    size, in the order of the sizes. The work functions carry their
    ``(size, device type)``; the timer calls a function it does not recognise
    (one that makes its inputs while it is timed) to find out what it made.
    ``log`` records ``("make", size, type, inside_timed_region)`` and
    ``("time", size, work type, timer type)``. The ``*_verdict`` methods return
    None when all is right, else the message a learner reads.
    """

    def __init__(self, seconds: dict[str, Sequence[float]], *, run_timed: bool = False) -> None:
        self.seconds = {k: list(v) for k, v in seconds.items()}
        self.run_timed = run_timed
        self.log: list[tuple] = []
        self._sizes: list[int] = []
        self._timing = False
        self._made_inside: list[tuple[int, str]] = []

    def make_work(self, size: int, device: Any) -> Callable[[], None]:
        kind = _type(device)
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
            raise TypeError("the timer was given a function that is not the work make_work(size, device) returned")
        size, kind = tag
        self.log.append(("time", size, kind, _type(device)))
        ordered = sorted(self._sizes)
        return self.seconds[kind][ordered.index(size)]

    @contextlib.contextmanager
    def active(self, namespaces: Iterable[dict] = ()) -> Iterator["FakeComparison"]:
        """Make every public way to synchronise a no-op while it is active (names in ``namespaces`` too).

        The injected work runs on no device; a comparison that (wrongly) times
        it with its own timer then gets a verdict, not a crash from
        ``torch.cuda.synchronize()`` on a machine without CUDA.
        """
        noop = lambda *args, **kwargs: None  # noqa: E731
        with _patched([(owner, attr, noop) for owner, attr in _sync_routes()], list(namespaces)):
            yield self

    # -- verdicts
    def _expected(self, sizes: Sequence[int]) -> tuple[list[float], list[float], list[float]]:
        cpu, acc = self.seconds["cpu"], self.seconds["cuda"]
        return cpu, acc, [c / a for c, a in zip(cpu, acc)]

    @staticmethod
    def _missing(result: Any, keys: Sequence[str]) -> str | None:
        if not isinstance(result, dict):
            return f"compare_devices returned a {type(result).__name__}; expected a dict with the keys {list(keys)}."
        missing = [k for k in keys if k not in result]
        if missing:
            return f"compare_devices returned a dict without the keys {missing}; expected all of {list(keys)}."
        return None

    def speedup_verdict(self, result: Any, sizes: Sequence[int]) -> str | None:
        keys = ["accelerator", "sizes", "cpu_s", "accelerator_s", "speedup", "crossover"]
        if (msg := self._missing(result, keys)) is not None:
            return msg
        cpu, acc, speedup = self._expected(sizes)
        timed = {(n, k) for _, n, k, _ in (e for e in self.log if e[0] == "time")}
        untimed = [(n, k) for k in self.seconds for n in sizes if (n, k) not in timed]
        if untimed:
            return (f"the work for {untimed} (size, device) was not timed with the `timer` compare_devices was given: "
                    f"call timer(fn, device), not time_on_device directly. The checks pass their own timer so that "
                    f"they do not depend on how fast this machine is.")
        if _floats(result["sizes"]) != [float(n) for n in sizes]:
            return f"\"sizes\": got {result['sizes']!r}; expected the sizes given, {list(sizes)}."
        if result["accelerator"] is None:
            return "\"accelerator\" is None although an accelerator was given; return the accelerator."
        for key, want in (("cpu_s", cpu), ("accelerator_s", acc)):
            got = _floats(result[key])
            if got is None or len(got) != len(want) or any(abs(g - w) > 1e-9 * w for g, w in zip(got, want)):
                return (f"\"{key}\": got {result[key]!r}; expected the timer's seconds per call for each size, "
                        f"{want}. Time make_work(size, device) on each device with `timer`, in the order of the sizes.")
        got = _floats(result["speedup"])
        if got is not None and len(got) == len(speedup) and all(abs(g - s) <= 1e-6 * s for g, s in zip(got, speedup)):
            return None
        if got is not None and len(got) == len(speedup) and all(abs(g * s - 1) <= 1e-6 for g, s in zip(got, speedup)):
            return (f"\"speedup\": got {got}, the inverted ratio accelerator / CPU; expected CPU time divided by "
                    f"accelerator time, {speedup} (above 1 means the accelerator is faster).")
        return f"\"speedup\": got {result['speedup']!r}; expected cpu_s / accelerator_s per size, {speedup}."

    def crossover_verdict(self, result: Any, sizes: Sequence[int]) -> str | None:
        """Judged against the speed-ups the learner returned when they are a list of numbers, one per size.

        So a wrong speed-up (inverted, say) costs the speed-up check only, and a
        crossover computed right from it passes; otherwise against the injected timings.
        """
        if (msg := self._missing(result, ["crossover", "speedup"])) is not None:
            return msg
        _, _, speedup = self._expected(sizes)
        own = _floats(result["speedup"]) if result["speedup"] is not None else None
        if own is not None and len(own) == len(sizes) and all(math.isfinite(v) for v in own):
            speedup = own
        want = crossover(sizes, speedup)
        if result["crossover"] == want:
            return None
        text = (f"\"crossover\": got {result['crossover']!r}; expected {want!r}, for speed-ups "
                f"{[round(s, 3) for s in speedup]} at sizes {list(sizes)}: the crossover is the smallest size from which "
                f"the accelerator is faster (speed-up > 1) at that size and every larger one; None if it is not "
                f"faster at the largest size.")
        first = next((n for n, s in zip(sizes, speedup) if s > 1), None)
        if result["crossover"] == first and first != want:
            text += f" {first} is the first size where it wins, but it loses again at a larger size."
        if any(s == 1 for s in speedup) and result["crossover"] == crossover(sizes, [s + (s == 1) for s in speedup]):
            text += " A speed-up of exactly 1 is a tie: the accelerator is not faster there."
        if want == sizes[0] and result["crossover"] is None:
            text += " The accelerator is faster at every size here, so the crossover is the smallest size."
        return text

    def setup_verdict(self, sizes: Sequence[int], devices: Sequence[str]) -> str | None:
        inside = [(n, k) for kind, n, k, timed in (e for e in self.log if e[0] == "make") if timed]
        if inside:
            return (f"inputs were created inside the timed region: make_work(size, device) ran while the timer was "
                    f"timing (for {inside}). Call make_work before timing and pass the timer only the function it "
                    f"returns, so creating the inputs is not measured.")
        made = {(n, k) for kind, n, k, _ in (e for e in self.log if e[0] == "make")}
        want = {(n, k) for n in sizes for k in devices}
        if not want <= made:
            return (f"make_work was not called for every size on every device outside the timed region: missing "
                    f"{sorted(want - made)}. Make the inputs on each device with make_work(size, device).")
        wrong = [(n, k, t) for _, n, k, t in (e for e in self.log if e[0] == "time") if k != t]
        if wrong:
            n, k, t = wrong[0]
            return (f"the work made on {k} (size {n}) was timed with device={t}; pass the timer the device the "
                    f"inputs were made on, so it synchronises that device (inputs made outside the timed region).")
        return None

    def no_accelerator_verdict(self, call: Callable[[], Any], sizes: Sequence[int]) -> str | None:
        try:
            result = call()
        except AssertionError:
            raise
        except Exception as err:  # noqa: BLE001 - the learner's error is the outcome to report
            return (f"with accelerator=None (no accelerator), compare_devices raised {type(err).__name__}: {str(err).strip().splitlines()[0] if str(err).strip() else ''}. "
                    f"Time the CPU, then return None for \"accelerator\", \"accelerator_s\", \"speedup\" and "
                    f"\"crossover\".")
        keys = ["accelerator", "sizes", "cpu_s", "accelerator_s", "speedup", "crossover"]
        if (msg := self._missing(result, keys)) is not None:
            return "with no accelerator: " + msg
        not_none = [k for k in ("accelerator", "accelerator_s", "speedup", "crossover") if result[k] is not None]
        if not_none:
            return (f"with no accelerator (accelerator=None), {not_none} should be None: there is nothing to "
                    f"compare the CPU with; got {[result[k] for k in not_none]}.")
        other = sorted({k for e in self.log for k in e[2:3] if k != "cpu"})
        if other:
            return f"with no accelerator, compare_devices still made or timed work on {other}; use only the CPU."
        got = _floats(result["cpu_s"]) if result["cpu_s"] is not None else None
        if not any(e[0] == "time" for e in self.log):  # the given timer was ignored: the speed-up check says so
            if got is not None and len(got) == len(sizes) and all(v > 0 for v in got):
                return None
        if got != [float(v) for v in self.seconds["cpu"]]:
            return (f"with no accelerator, \"cpu_s\" should still hold the CPU's seconds per call, "
                    f"{self.seconds['cpu']}; got {result['cpu_s']!r}.")
        return None
