"""Keep the device fed: datasets with a tunable cost per item, loader throughput, device prefetching.

Chapter 04 (data loading) teaches it. Everything a DataLoader worker runs
lives here, in an importable module, because under the *spawn* start method
(macOS, Windows, and any code that asks for it) each worker is a fresh Python
process that re-imports what it runs by name: a Dataset, ``collate_fn`` or
``worker_init_fn`` defined in a notebook cannot be found there.

* :class:`SleepDataset` waits per item (like reading a file or a network
  blob: the CPU is idle), :class:`CpuDataset` computes per item in pure
  Python (like decoding or augmenting: the CPU is busy). Each item records
  which worker made it and when, so a chapter can draw the loading timeline.
* :class:`RangeStream` is an ``IterableDataset`` (a stream with no index): every worker gets a copy of
  it and, unless it shards itself with ``get_worker_info()``, yields the whole stream: each item once
  per worker. :class:`BlockSums` reads blocks of a Python list or of a NumPy array, to measure the
  copy-on-read growth of forked workers that read Python objects.
* :class:`ClonedRngDataset` keeps a NumPy ``Generator`` made in ``__init__``:
  every worker gets a copy of it, and draws the same "random" numbers.
  :func:`seed_worker` is the fix.
* :func:`loader_run` and :func:`sweep_workers` measure a loader (start-up
  apart from steady throughput, each repeated so that
  :func:`helpers.benchmark.compare` can judge a difference); :func:`time_steps`
  splits a training step into load, host-to-device copy and compute;
  :class:`DevicePrefetcher` queues the copy of the next batch on a side CUDA
  stream while the current one computes (chapter 04 measures, with CUDA events,
  whether such a copy really overlaps the compute).

Timings come from :mod:`helpers.benchmark`'s clock and device calls from
:mod:`helpers.device`, as everywhere in the course. ``helpers.benchmark`` and
``helpers.plots`` are imported where they are used, not at the top: every
spawned worker imports this module, and should not pay for matplotlib and
``torch.utils.benchmark`` (seconds) to make a batch.
"""

from __future__ import annotations

import dataclasses
import sys
import time
import timeit
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset, get_worker_info

from helpers.device import synchronize, to_device
from helpers.i18n import N_, _

__all__ = [
    "BlockSums",
    "RangeStream",
    "ClonedRngDataset",
    "CpuDataset",
    "DevicePrefetcher",
    "LoaderRun",
    "SleepDataset",
    "StepTimes",
    "SweepPoint",
    "copy_bandwidth",
    "copy_timing",
    "current_worker",
    "loader_run",
    "make_loader",
    "plot_step_times",
    "plot_timeline",
    "seed_worker",
    "sweep_workers",
    "time_steps",
    "worker_memory",
    "worker_processes",
]

#: When an item was made, read in whichever process made it: the clock ``helpers.benchmark.sync_timer("cpu")``
#: returns, system-wide on Linux, macOS and Windows, so stamps from workers and the main process compare.
_stamp = timeit.default_timer


def _host_clock() -> Callable[[], float]:
    from helpers.benchmark import sync_timer

    return sync_timer("cpu")


def current_worker() -> int:
    """The id of the DataLoader worker running this code, or -1 in the main process."""
    info = get_worker_info()
    return -1 if info is None else info.id


def _features(index: int, features: int) -> torch.Tensor:
    """The same input for the same index, whichever process makes it."""
    return torch.arange(features, dtype=torch.float32).add_(index).mul_(1.0 / features).sin_()


class _TracedDataset(Dataset):
    """Items ``{"x", "y", "worker", "t0", "t1"}``: the sample, and who made it from when to when."""

    def __init__(self, n: int, features: int) -> None:
        if n <= 0 or features <= 0:
            raise ValueError(_("n and features must be positive, got n={n}, features={features}").format(
                n=n, features=features))
        self.n, self.features = int(n), int(features)

    def __len__(self) -> int:
        return self.n

    def _cost(self, index: int) -> None:  # what one item costs to make; subclasses say what kind
        raise NotImplementedError

    def __getitem__(self, index: int) -> dict[str, Any]:
        if not 0 <= index < self.n:
            raise IndexError(_("index {index} out of range for a dataset of {n} items").format(index=index, n=self.n))
        t0 = _stamp()
        self._cost(index)
        x = _features(index, self.features)
        return {"x": x, "y": x.sum().reshape(1), "worker": current_worker(), "t0": t0, "t1": _stamp()}


class SleepDataset(_TracedDataset):
    """I/O-like items: each waits ``item_s`` seconds (a disk or network read), with the CPU idle.

    Waiting processes cost no CPU, so workers keep helping past the number of cores.
    """

    def __init__(self, n: int = 64, item_s: float = 0.005, features: int = 32) -> None:
        super().__init__(n, features)
        if item_s < 0:
            raise ValueError(_("item_s must be >= 0 seconds, got {item_s}").format(item_s=item_s))
        self.item_s = float(item_s)

    def _cost(self, index: int) -> None:
        time.sleep(self.item_s)


class CpuDataset(_TracedDataset):
    """CPU-bound items: ``work`` iterations of a pure-Python loop (a decode, an augmentation).

    Pure Python holds the interpreter lock, so only processes (workers) run
    it in parallel, and no more of them at once than there are cores.
    """

    def __init__(self, n: int = 64, work: int = 20_000, features: int = 32) -> None:
        super().__init__(n, features)
        if work < 0:
            raise ValueError(_("work must be >= 0 iterations, got {work}").format(work=work))
        self.work = int(work)

    def _cost(self, index: int) -> None:
        acc = index
        for k in range(self.work):
            acc = (acc * 1103515245 + k) & 0xFFFF


class RangeStream(IterableDataset):
    """Items ``{"item": i, "worker": id}`` for ``i`` in ``range(n)``, as a stream (no ``__getitem__``).

    A DataLoader gives each worker a copy of an ``IterableDataset`` and iterates every copy: without
    ``shard``, each of ``k`` workers yields all ``n`` items, ``k * n`` in all. With ``shard``, each copy
    asks ``get_worker_info()`` who it is and keeps every ``num_workers``-th item from its ``id`` on, so
    the workers split the stream (and in the main process, where it returns None, one copy yields all).
    """

    def __init__(self, n: int = 12, shard: bool = True) -> None:
        self.n, self.shard = int(n), bool(shard)

    def __iter__(self) -> Iterator[dict[str, int]]:
        info = get_worker_info()
        if self.shard and info is not None:
            mine = range(info.id, self.n, info.num_workers)  # worker k of m: items k, k+m, k+2m, ...
        else:
            mine = range(self.n)
        for i in mine:
            yield {"item": i, "worker": current_worker()}


class BlockSums(Dataset):
    """Item ``i`` is the sum of block ``i`` of ``values``: a Python list of floats or a NumPy array.

    Reading a block of a *list* touches every float object in it: Python writes each object's reference
    count as it is used. In a forked worker the pages holding those objects were shared with the main
    process; a write makes the kernel copy the page (copy-on-write), so a worker that reads the whole list
    ends up with its own copy of it, although it changed no value. A NumPy array is one object: reading a
    slice writes nothing in the data's pages, which stay shared.
    """

    def __init__(self, values: Sequence[float] | np.ndarray, blocks: int = 100) -> None:
        self.values, self.blocks = values, int(blocks)
        self.size = len(values) // self.blocks

    def __len__(self) -> int:
        return self.blocks

    def __getitem__(self, index: int) -> float:
        block = self.values[index * self.size:(index + 1) * self.size]
        return float(block.sum()) if isinstance(block, np.ndarray) else float(sum(block))


class ClonedRngDataset(Dataset):
    """Items ``{"worker", "seed", "torch_draw", "draw"}``: torch's seed and draw, and one from ``self.rng``.

    ``self.rng`` is a NumPy Generator made in ``__init__``; ``seed`` is
    ``get_worker_info().seed`` (-1 in the main process), and ``torch_draw``
    comes from torch's generator, which torch seeds per worker.

    The trap chapter 04 measures: each worker process gets a *copy* of
    ``self.rng`` in the same state, so every worker draws the same numbers,
    and non-persistent workers start again from that state each epoch.
    ``worker_init_fn=seed_worker`` gives each copy its own seed.
    """

    def __init__(self, n: int = 8, seed: int = 0) -> None:
        self.n = int(n)
        self.rng = np.random.default_rng(seed)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> dict[str, Any]:
        info = get_worker_info()
        return {"worker": current_worker(), "seed": -1 if info is None else info.seed,
                "torch_draw": float(torch.rand(())), "draw": float(self.rng.random())}


def seed_worker(worker_id: int) -> None:
    """``worker_init_fn``: give this worker's copy of the dataset its own NumPy Generator.

    ``get_worker_info().seed`` is torch's seed for this worker: different per
    worker and per epoch, and reproducible from the loader's ``generator``.
    Top-level (importable), so it also works under the spawn start method.
    """
    sys.audit("course.version", "helpers.dataloader:seed_worker")  # the grader: no exercise passes by calling this
    info = get_worker_info()
    if info is not None and hasattr(info.dataset, "rng"):
        info.dataset.rng = np.random.default_rng(info.seed)


def make_loader(dataset: Dataset, device: str | torch.device, batch_size: int = 32, num_workers: int = 0,
                seed: int = 0, prefetch_factor: int = 4, **kwargs: Any) -> DataLoader:
    """A shuffling DataLoader set up for ``device``, reproducible from ``seed``.

    ``pin_memory`` only when the batches go to CUDA (pinned pages are what
    makes a CUDA copy asynchronous; elsewhere pinning costs and buys nothing);
    with workers, ``persistent_workers`` (start them once, not every epoch)
    and ``prefetch_factor`` (batches each worker prepares ahead); without
    workers both must stay unset, or DataLoader raises ValueError.
    """
    sys.audit("course.version", "helpers.dataloader:make_loader")  # the grader: no exercise passes by calling this
    workers = int(num_workers)
    if workers < 0:
        raise ValueError(_("num_workers must be >= 0, got {num_workers}").format(num_workers=num_workers))
    extra: dict[str, Any] = {"persistent_workers": True, "prefetch_factor": prefetch_factor} if workers else {}
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=workers,
                      pin_memory=torch.device(device).type == "cuda",
                      generator=torch.Generator().manual_seed(seed), **extra, **kwargs)


# --------------------------------------------------------------------------- loader throughput


def _workers(n: int) -> str:
    """``"1 worker"``, ``"2 workers"``: a count as a label, in the learner's language."""
    return (_("{n} worker") if n == 1 else _("{n} workers")).format(n=n)


@dataclasses.dataclass
class LoaderRun:
    """One pass over a loader: how long until the first batch, and how fast after it."""

    num_workers: int
    samples: int
    startup_s: float  # iter() until the first batch arrived: worker start-up plus one batch
    total_s: float
    samples_after_first: int = 0

    @property
    def steady_rate(self) -> float:
        """Samples per second after the first batch (start-up left out)."""
        rest = self.total_s - self.startup_s
        return float("nan") if rest <= 0 else self.samples_after_first / rest

    @property
    def epoch_rate(self) -> float:
        """Samples per second over the whole pass, start-up included."""
        return self.samples / self.total_s

    def __str__(self) -> str:
        from helpers.benchmark import format_rate

        return _("{n} workers: start-up {startup_ms:6.0f} ms, then {steady:>14}; whole epoch {epoch}").format(
            n=self.num_workers, startup_ms=self.startup_s * 1e3, steady=format_rate(self.steady_rate, "samples/s"),
            epoch=format_rate(self.epoch_rate, "samples/s"))


def _batch_len(batch: Any) -> int:
    if isinstance(batch, dict):
        batch = next(iter(batch.values()))
    if isinstance(batch, (list, tuple)):
        batch = batch[0]
    return len(batch)


def loader_run(loader: Iterable[Any]) -> LoaderRun:
    """Iterate ``loader`` once and time it; worker processes end with the pass."""
    _clock = _host_clock()
    start = _clock()
    it = iter(loader)
    samples = first_samples = 0
    first = None
    try:
        for batch in it:
            samples += _batch_len(batch)
            if first is None:
                first, first_samples = _clock(), samples
    finally:
        del it  # a non-persistent iterator shuts its workers down here
    end = _clock()
    first = end if first is None else first
    return LoaderRun(getattr(loader, "num_workers", 0), samples, first - start, end - start,
                     samples_after_first=samples - first_samples)


@dataclasses.dataclass
class SweepPoint:
    """One worker count: start-up and first epoch (fresh workers), then later epochs (workers running).

    The figures are medians over repeats; ``first`` and ``steady`` keep the
    repeats themselves (seconds per epoch, a :class:`helpers.benchmark.Timing`
    each), so that two counts can be compared beyond the noise.
    """

    num_workers: int
    startup_s: float  # until the first batch of the first epoch
    first_epoch_rate: float  # samples/s over the first epoch, start-up included
    steady_rate: float  # samples/s over a later epoch, with the persistent workers already running
    first: Any = None  #: seconds per first epoch (start-up included), one per fresh loader
    steady: Any = None  #: seconds per later epoch, one per epoch measured

    def __str__(self) -> str:
        from helpers.benchmark import format_rate

        who = _workers(self.num_workers).ljust(len(_workers(0)))  # "1 worker " lines up with "2 workers"
        text = _("{workers}: start-up {startup_ms:4.0f} ms; first epoch {first:>14}; then {steady:>14}").format(
            workers=who, startup_ms=self.startup_s * 1e3, first=format_rate(self.first_epoch_rate, "samples/s"),
            steady=format_rate(self.steady_rate, "samples/s"))
        if self.steady is not None:
            text += _(" ({spread}, {epochs} epochs)").format(spread=self.steady.describe_spread(),
                                                            epochs=len(self.steady.times))
        return text


def sweep_workers(dataset: Dataset, counts: Sequence[int] = (0, 1, 2, 4, 8), batch_size: int = 8,
                  progress: bool = True, starts: int = 3, epochs: int = 2, **loader_kwargs: Any) -> list[SweepPoint]:
    """Per worker count, ``starts`` fresh loaders of persistent workers, each run for ``epochs`` epochs.

    The first epoch of each loader pays the workers' start-up; the later ones
    show the steady throughput. Every figure is repeated (``starts`` first
    epochs, ``starts * (epochs - 1)`` later ones) because one epoch on a
    shared machine is one draw of its load: a single reading once made 8
    workers look worse than 2 that were no faster. The workers end with
    their loader, before the next count starts. Draw sweeps of several
    datasets with :func:`helpers.plots.plot_sweep`:
    ``plot_sweep(ax, {label: points, ...}, "num_workers", "steady_rate")``.
    """
    from tqdm.auto import tqdm

    if starts < 1 or epochs < 2:
        raise ValueError(_("sweep_workers needs starts >= 1 and epochs >= 2, got starts={starts}, "
                           "epochs={epochs}").format(starts=starts, epochs=epochs))
    return [_sweep_point(dataset, n, batch_size, starts, epochs, loader_kwargs)
            for n in tqdm(list(counts), desc=type(dataset).__name__, disable=not progress, leave=False)]


def _sweep_point(dataset: Dataset, n: int, batch_size: int, starts: int, epochs: int,
                 loader_kwargs: dict[str, Any]) -> SweepPoint:
    """One count of :func:`sweep_workers`: its repeats, summed up as medians and kept as Timings."""
    import statistics

    from helpers.benchmark import Timing

    first: list[LoaderRun] = []
    later: list[LoaderRun] = []
    for _start in range(starts):
        loader = DataLoader(dataset, batch_size=batch_size, num_workers=n, persistent_workers=n > 0, **loader_kwargs)
        runs = [loader_run(loader) for _epoch in range(epochs)]
        del loader
        first.append(runs[0]), later.extend(runs[1:])
    label = _workers(n)
    first_t = Timing.from_times([r.total_s for r in first], label=label)
    steady_t = Timing.from_times([r.total_s for r in later], label=label)
    samples = first[0].samples
    return SweepPoint(n, statistics.median(r.startup_s for r in first), samples / first_t.median,
                      samples / steady_t.median, first=first_t, steady=steady_t)


#: Helper processes of :mod:`multiprocessing` itself (not loader workers): they live until Python exits.
MULTIPROCESSING_HELPERS = ("resource_tracker", "forkserver")


def worker_processes() -> list[Any]:
    """This process's children that are not :data:`MULTIPROCESSING_HELPERS`: the workers still alive."""
    import psutil

    alive = []
    for child in psutil.Process().children(recursive=True):
        try:
            if not any(name in " ".join(child.cmdline()) for name in MULTIPROCESSING_HELPERS):
                alive.append(child)
        except psutil.Error:  # ended meanwhile
            continue
    return alive


def worker_memory(exclude: Iterable[int] = ()) -> list[int]:
    """Unique memory (USS, bytes) of each worker process alive now: what each worker costs.

    ``exclude``: process ids to leave out (workers of other loaders that are still alive).
    """
    import psutil

    sizes = []
    for child in worker_processes():
        if child.pid in set(exclude):
            continue
        try:
            sizes.append(child.memory_full_info().uss)
        except (psutil.Error, AttributeError):  # gone meanwhile, or a platform without USS
            continue
    return sizes


# --------------------------------------------------------------------------- where a step's time goes

#: A step's parts as a legend or a conclusion names them, translated where shown (the keys stay: code reads them).
_PART_NAMES = {"load": N_("load"), "copy": N_("copy"), "compute": N_("compute")}


@dataclasses.dataclass
class StepTimes:
    """Seconds per training step spent waiting for the batch, copying it, and computing."""

    load: list[float] = dataclasses.field(default_factory=list)
    copy: list[float] = dataclasses.field(default_factory=list)
    compute: list[float] = dataclasses.field(default_factory=list)
    num_threads: int | None = None  #: torch's intra-op threads in the main process while measuring

    PARTS = ("load", "copy", "compute")

    def medians(self) -> dict[str, float]:
        return {k: float(np.median(getattr(self, k))) if getattr(self, k) else float("nan") for k in self.PARTS}

    def bottleneck(self) -> str:
        """The part with the largest median (whether it stands apart: :meth:`describe_bottleneck`)."""
        medians = self.medians()
        return max(medians, key=medians.get)

    def timings(self) -> dict[str, Any]:
        """Each part's steps as a :class:`helpers.benchmark.Timing` (median, IQR), for the course's conclusions."""
        from helpers.benchmark import Timing

        return {k: Timing.from_times(getattr(self, k) or [float("nan")], label=_(_PART_NAMES[k]),
                                     num_threads=self.num_threads) for k in self.PARTS}

    def describe_bottleneck(self) -> str:
        """The slowest part, named only when it is slower than the others beyond the noise; else the tie.

        A step's parts are measured together, so a load of 1.5 ms against a
        compute of 1.1 ms on a busy machine is a draw, not a bottleneck.
        """
        from helpers.benchmark import describe_leader, leaders

        parts = list(self.timings().values())
        text = describe_leader(parts, _("bottleneck"), slowest=True)
        top = leaders(parts, slowest=True)
        if len(top) > 1:
            text += _(" (the spread of each: {spreads})").format(
                spreads=", ".join(f"{t.label} {t.describe_spread()}" for t in top))
        return text


def time_steps(loader: Iterable[Any], step: Callable[[Any], Any], device: str | torch.device,
               steps: int | None = None) -> StepTimes:
    """Run ``step(batch_on_device)`` over ``loader`` and time load, copy and compute of each step.

    The clock synchronises ``device`` before each read, so an asynchronous
    copy or kernel is counted where it runs, not where it was queued. The
    first step is left out (start-up).
    """
    from helpers.benchmark import sync_timer

    clock, times = sync_timer(device), StepTimes(num_threads=torch.get_num_threads())
    it = iter(loader)
    try:
        for i in range(steps if steps is not None else len(loader)):  # type: ignore[arg-type]
            t0 = clock()
            batch = next(it, None)
            if batch is None:
                break
            t1 = clock()
            batch = to_device(batch, device)
            t2 = clock()
            step(batch)
            t3 = clock()
            if i:
                times.load.append(t1 - t0), times.copy.append(t2 - t1), times.compute.append(t3 - t2)
    finally:
        del it
    return times


def plot_step_times(breakdowns: dict[str, StepTimes], device: Any = "cpu"):
    """A stacked bar per setting: median milliseconds of load, copy and compute in one step."""
    from helpers.plots import new_figure, stamp

    fig, ax = new_figure(width=5.5)
    labels = list(breakdowns)
    bottom = np.zeros(len(labels))
    for part, colour in (("load", "tab:orange"), ("copy", "tab:purple"), ("compute", "tab:blue")):
        ms = np.array([breakdowns[k].medians()[part] * 1e3 for k in labels])
        ax.bar(labels, ms, bottom=bottom, label=_(_PART_NAMES[part]), color=colour)
        bottom += ms
    ax.set(ylabel=_("ms per step (median)"), title=_("where a training step's time goes"))
    ax.legend(fontsize=8)
    stamp(fig, device)
    return fig


def plot_timeline(panels: dict[str, list[dict[str, Any]]], device: Any = "cpu", start: float | None = None):
    """When each worker made each batch: one row per worker, one panel per setting.

    ``panels`` maps a title to batches as a loader returned them (with
    ``worker``, ``t0``, ``t1``), each optionally with ``"taken"``: when the
    main process took it.
    """
    from helpers.plots import new_figure, stamp

    fig, axes = new_figure(ncols=len(panels), width=4.6)
    axes = axes if isinstance(axes, list) else [axes]
    for ax, (title, batches) in zip(axes, panels.items()):
        origin = start if start is not None else min(float(b["t0"].min()) for b in batches)
        for b in batches:
            w = int(b["worker"][0])
            t0, t1 = float(b["t0"].min()) - origin, float(b["t1"].max()) - origin
            ax.barh(w, t1 - t0, left=t0, height=0.6, color=f"C{w % 10}", alpha=0.8)
            if "taken" in b:
                ax.plot(b["taken"] - origin, -1, "k|", ms=12)
        ax.set(title=title, xlabel=_("seconds"), yticks=[-1, *sorted({int(b["worker"][0]) for b in batches})])
        ax.set_yticklabels([_("main takes")] + [_("worker {w}").format(w=w) for w in ax.get_yticks()[1:].astype(int)])
    stamp(fig, device)
    return fig


# --------------------------------------------------------------------------- host -> device copies


def copy_bandwidth(nbytes: int, device: str | torch.device, pinned: bool, min_run_time: float = 0.2) -> float:
    """Bytes per second of a host-to-``device`` copy from pageable or pinned memory (CUDA only).

    Pinned (page-locked) host memory can be read by the GPU's copy engine
    directly; pageable memory is first staged through a pinned buffer by the
    driver, which costs an extra copy. The median of :func:`copy_timing`.
    """
    return float(copy_timing(nbytes, device, pinned, min_run_time).bytes_per_s)


def copy_timing(nbytes: int, device: str | torch.device, pinned: bool, min_run_time: float = 0.2) -> Any:
    """The host-to-``device`` copy of :func:`copy_bandwidth` as a :class:`helpers.benchmark.Timing`.

    Kept whole (median, IQR, blocks), so that "pinned is faster" can be
    judged by :func:`helpers.benchmark.compare` rather than read off two medians.
    """
    from helpers.benchmark import time_callable

    device = torch.device(device)
    if device.type != "cuda" or not torch.cuda.is_available():
        raise RuntimeError(_("copy_bandwidth measures host-to-CUDA copies; {device} is not an available CUDA "
                             "device").format(device=device))
    host = torch.empty(int(nbytes) // 4, dtype=torch.float32)
    host = host.pin_memory() if pinned else host
    return time_callable(lambda: host.to(device, non_blocking=pinned), device, nbytes=host.nbytes,
                         min_run_time=min_run_time, warn=False, label=_("pinned") if pinned else _("pageable"))


class DevicePrefetcher:
    """Iterate a loader with each batch already on ``device``: batch k+1's copy is queued while k computes.

    On CUDA the copy of the next batch is queued on a side stream (from
    pinned memory, ``non_blocking=True``), so the copy engine *can* work while
    the default stream computes (whether it did is a measurement: chapter 04,
    section 5; from pageable memory the copy blocks the host and overlaps
    little); before a batch is handed out, the default stream
    waits for its copy (``wait_stream``) and the tensors are marked as used
    there (``record_stream``), so the allocator does not reuse their memory
    too early. Elsewhere there is no second stream to overlap with: it moves
    each batch when it is asked for it, which is all a CPU can do.
    """

    def __init__(self, loader: Iterable[Any], device: str | torch.device) -> None:
        self.loader, self.device = loader, torch.device(device)
        #: whether copies go to a side stream (CUDA), where they can overlap the compute; not a measurement
        self.overlaps = self.device.type == "cuda" and torch.cuda.is_available()

    def __len__(self) -> int:
        return len(self.loader)  # type: ignore[arg-type]

    def __iter__(self) -> Iterator[Any]:
        if not self.overlaps:
            for batch in self.loader:
                yield to_device(batch, self.device)
            return
        stream = torch.cuda.Stream(self.device)
        it = iter(self.loader)
        upcoming = self._queue_copy(next(it, None), stream)
        while upcoming is not None:
            torch.cuda.current_stream(self.device).wait_stream(stream)
            batch = upcoming
            _record(batch, torch.cuda.current_stream(self.device))
            upcoming = self._queue_copy(next(it, None), stream)
            yield batch
        synchronize(self.device)

    def _queue_copy(self, batch: Any, stream: Any) -> Any:
        if batch is None:
            return None
        with torch.cuda.stream(stream):
            return to_device(batch, self.device, non_blocking=True)


def _record(batch: Any, stream: Any) -> None:
    """Tell the CUDA allocator that every tensor in ``batch`` is used on ``stream``."""
    if isinstance(batch, torch.Tensor):
        batch.record_stream(stream)
    elif isinstance(batch, dict):
        for value in batch.values():
            _record(value, stream)
    elif isinstance(batch, (list, tuple)):
        for value in batch:
            _record(value, stream)
