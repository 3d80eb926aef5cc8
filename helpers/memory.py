"""See where memory goes, and run out of it safely on any machine.

Chapter 03 (memory) teaches this module; later chapters measure peak memory
through it (``measure_peak``, ``track_memory``) instead of probing allocators
themselves.

Three things live here:

* **Peak and current memory of a block of code**, on every kind of device.
  CUDA has allocator statistics (``torch.cuda.max_memory_allocated`` after a
  reset). The CPU has none, and ``tracemalloc`` does not see torch tensors
  (their storage comes from torch's own allocator, not Python's); the torch
  profiler with ``profile_memory=True`` does, so the CPU path reads its memory
  events. MPS has no peak statistic, so there the live tensors are tracked.
* **The memory anatomy of a training step**: parameters, gradients, optimizer
  state and activations, estimated from the model and measured, side by side.
* **A memory budget**: code run inside ``with MemoryBudget(limit):`` raises
  ``torch.OutOfMemoryError`` (the exception a real CUDA out-of-memory error
  raises) when the tensors it keeps alive would exceed ``limit``, on any
  device. A laptop can then rehearse running out of GPU memory without
  running out of its own.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import itertools
import json
import math
import os
import sys
import tempfile
import unicodedata
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn
# TorchDispatchMode has no public import path in torch 2.11-2.13: the docs ("Extending torch with a
# TorchDispatchMode", notes/extending) name it by this module, and no other class sees every operation's
# outputs on every device (TorchFunctionMode, public in torch.overrides, sees Python-level calls only).
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves  # private too: torch 2.11-2.13 ship no public pytree module

from helpers import device as dev
from helpers.i18n import _
from helpers.units import format_bytes  # noqa: F401  (the chapters call memory.format_bytes)

__all__ = [
    "Anatomy",
    "CapturedStderr",
    "MemoryBudget",
    "MemoryStats",
    "Timeline",
    "allocation_step",
    "anatomy_table",
    "estimate_anatomy",
    "format_bytes",
    "largest_blocks",
    "blas_workspace_sizes",
    "block_origin",
    "native_stderr",
    "free_memory",
    "measure_anatomy",
    "measure_peak",
    "memory_timeline",
    "saved_for_backward",
    "track_memory",
]


# --------------------------------------------------------------------------- small tools


def _device(device: str | torch.device | None) -> torch.device:
    d = dev.pick_device() if device is None else torch.device(device)
    if d.type == "cuda" and d.index is None:
        d = torch.device("cuda", torch.cuda.current_device())
    return d


def free_memory(device: str | torch.device | None = None, full_gc: bool = False) -> None:
    """Collect Python garbage, then hand cached accelerator memory back to the driver.

    ``gc.collect()`` frees tensors kept alive only by reference cycles (an
    exception's traceback and the frame that holds it make one). By default
    only the young generations are collected, where a just-failed attempt's
    objects are: a full collection takes a few hundred milliseconds once
    torch is loaded; ``full_gc=True`` asks for it.
    ``torch.cuda.empty_cache()`` releases *cached, unused* blocks: it never
    frees a tensor that is still referenced. Call it outside an ``except``
    block: inside one, the exception still holds the failed frames' tensors.
    """
    gc.collect() if full_gc else gc.collect(1)
    d = _device(device)
    if d.type == "cuda" and torch.cuda.is_available():
        torch.cuda.empty_cache()
    elif d.type == "mps" and hasattr(torch, "mps") and dev.accelerator() is not None:
        torch.mps.empty_cache()


# --------------------------------------------------------------------------- live tensor tracking


class _LiveTable:
    """Storages allocated under a tracker that are still alive, and the peak of their bytes.

    Each storage is watched through a weak reference: torch keeps a storage's
    Python object alive exactly as long as the storage itself, so the callback
    runs when the memory is really released (not when one view of it dies).
    """

    def __init__(self) -> None:
        self.sizes: dict[tuple[str, int], int] = {}
        self._refs: dict[tuple[str, int], weakref.ref] = {}
        self.live = 0
        self.peak = 0

    def add(self, storage: Any, key: tuple[str, int], nbytes: int) -> None:
        table = weakref.ref(self)

        def gone(_ref: Any, key: tuple[str, int] = key) -> None:
            t = table()
            if t is not None and t._refs.get(key) is _ref:
                t._refs.pop(key, None)
                t.live -= t.sizes.pop(key, 0)

        self._refs[key] = weakref.ref(storage, gone)
        self.sizes[key] = nbytes
        self.live += nbytes
        self.peak = max(self.peak, self.live)

    def __contains__(self, key: tuple[str, int]) -> bool:
        return key in self.sizes


def _storage_key(t: torch.Tensor) -> tuple[Any, tuple[str, int], int]:
    st = t.untyped_storage()
    return st, (str(t.device), st.data_ptr()), st.nbytes()


_FACTORIES = {"empty", "zeros", "ones", "full", "rand", "randn", "randint", "empty_strided", "normal"}
_NEW_FACTORIES = {"new_empty", "new_zeros", "new_ones", "new_full", "new_empty_strided"}


def _factory_bytes(func: Any, args: tuple, kwargs: dict, device_type: str) -> int:
    """Bytes a factory call (``torch.empty(n, d)``...) will allocate, known before it runs.

    Lets a budget refuse a huge allocation before it happens, as a real
    allocator does; other operations are checked right after they ran.
    """
    name = getattr(getattr(func, "overloadpacket", None), "__name__", "")
    if name in _NEW_FACTORIES and args and isinstance(args[0], torch.Tensor):
        size, dtype, device = (args[1] if len(args) > 1 else None), kwargs.get("dtype") or args[0].dtype, kwargs.get("device") or args[0].device
    elif name in _FACTORIES:
        size = next((a for a in args if isinstance(a, (list, tuple))), None)
        dtype, device = kwargs.get("dtype") or torch.get_default_dtype(), kwargs.get("device") or torch.device("cpu")
    else:
        return 0
    if not isinstance(size, (list, tuple)) or not all(isinstance(s, int) for s in size):
        return 0
    if torch.device(device).type != device_type:
        return 0
    return math.prod(size) * dtype.itemsize


class _Tracker(TorchDispatchMode):
    """Sees every operation's outputs, records the new storages, and enforces a limit if given."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # Private, and kept on purpose: TorchDispatchMode.__init_subclass__ (torch 2.11-2.13) wraps a
        # subclass's __torch_dispatch__ in torch._disable_dynamo unless this returns False, and that
        # wrapper imports torch._dynamo (seconds) on the first operation; this mode never runs under
        # torch.compile. torch offers no public switch for it; if a later torch drops the hook, the
        # override is simply never called and only the first use gets slower.
        return False

    def __init__(self, table: _LiveTable, device_type: str, limit: int | None = None,
                 budget: MemoryBudget | None = None, timeline: Timeline | None = None) -> None:
        super().__init__()
        self.table, self.device_type, self.limit = table, device_type, limit
        self.budget, self.timeline = budget, timeline

    def _new_storages(self, args: Any, out: Any) -> list[tuple[Any, tuple[str, int], int]]:
        inputs = {_storage_key(a)[1] for a in tree_leaves(args) if isinstance(a, torch.Tensor)}
        new, seen = [], set()
        for t in tree_leaves(out):
            if not isinstance(t, torch.Tensor) or t.device.type != self.device_type:
                continue
            st, key, nbytes = _storage_key(t)
            if nbytes and key not in inputs and key not in seen and key not in self.table:
                seen.add(key)
                new.append((st, key, nbytes))
        return new

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        if self.limit is not None:
            need = _factory_bytes(func, args, kwargs, self.device_type)
            if need and self.table.live + need > self.limit:
                raise self.budget._oom(need)
        out = func(*args, **kwargs)
        new = self._new_storages((args, kwargs), out)
        need = sum(n for _, _, n in new)
        if self.limit is not None and need and self.table.live + need > self.limit:
            out = new = None  # free what the operation allocated before raising, as an allocator would
            raise self.budget._oom(need)
        for st, key, nbytes in new:
            self.table.add(st, key, nbytes)
        if self.timeline is not None:
            self.timeline._record(str(func.overloadpacket.__name__))
        return out


# --------------------------------------------------------------------------- peak and current memory


@dataclasses.dataclass
class MemoryStats:
    """What ``track_memory`` measured; filled in when the ``with`` block ends.

    ``peak_bytes``: the most tensor memory allocated at any moment inside the
    block, above what was allocated when it began. ``current_bytes``: what the
    block left allocated (negative if it freed more than it kept). On CUDA,
    ``reserved_bytes`` / ``peak_reserved_bytes`` are what the caching
    allocator holds from the driver (what nvidia-smi shows, minus the CUDA
    context); elsewhere they are None. ``method`` says how it was measured.
    """

    device: torch.device
    peak_bytes: int = 0
    current_bytes: int = 0
    reserved_bytes: int | None = None
    peak_reserved_bytes: int | None = None
    method: str = ""

    def __str__(self) -> str:
        sizes = {"peak": format_bytes(self.peak_bytes), "current": format_bytes(self.current_bytes),
                 "device": self.device, "method": self.method}
        if self.reserved_bytes is None:
            return _("peak {peak}, left allocated {current} on {device} [{method}]").format(**sizes)
        return _("peak {peak}, left allocated {current}, reserved {reserved} (peak {peak_reserved}) on {device} "
                 "[{method}]").format(reserved=format_bytes(self.reserved_bytes),
                                      peak_reserved=format_bytes(self.peak_reserved_bytes), **sizes)


#: Lines the profiler's C++ side writes to file descriptor 2 that say nothing about the learner's code:
#: Kineto's "USDT ... profiler_start/stop" at every start and stop, and c10's CPU allocator warning,
#: logged when the measured block frees a tensor made before the profiler started (any ``del`` or
#: ``zero_grad(set_to_none=True)`` of older tensors does it).
PROFILER_NOISE = ("Memory block of unknown size was allocated before the profiling started", "USDT")


@dataclasses.dataclass
class CapturedStderr:
    """What C++ code wrote to file descriptor 2 inside a :func:`native_stderr` block."""

    text: str = ""

    @property
    def lines(self) -> list[str]:
        return [line for line in self.text.splitlines() if line.strip()]


@contextlib.contextmanager
def native_stderr() -> Iterator[CapturedStderr]:
    """Capture what native code writes to file descriptor 2 while the block runs.

    The profiler's C++ logging ("USDT ... profiler_start", "Memory block of
    unknown size ...") goes to fd 2 directly, under Python's ``sys.stderr``, so
    ``warnings`` cannot filter it; in a notebook it appears in red. Chapter 07
    shows and explains it; :func:`track_memory` filters it out. Where there is
    no real descriptor 2 (some embedded interpreters), nothing is captured and
    the block runs as usual.
    """
    import os
    import sys
    import tempfile

    captured = CapturedStderr()
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):
        yield captured
        return
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield captured
        finally:
            with contextlib.suppress(OSError, ValueError, AttributeError):
                sys.stderr.flush()  # in a script sys.stderr is fd 2: what Python buffered belongs to this window
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            captured.text = sink.read().decode(errors="replace")


@contextlib.contextmanager
def _filtered_native_stderr(noise: tuple[str, ...] = PROFILER_NOISE) -> Iterator[None]:
    """Hold back fd-2 output while the profiler runs, and pass on all but ``noise``.

    The whole profiled window is covered (start, measured block, stop),
    because the allocator warning comes from inside the block. Every other
    line written to fd 2 meanwhile is written back when the window closes:
    nothing the measured code prints is lost, only delayed.
    """
    import os

    held = CapturedStderr()
    try:
        with native_stderr() as held:
            yield
    finally:
        kept = [line for line in held.text.splitlines(keepends=True) if not any(n in line for n in noise)]
        if kept:
            os.write(2, "".join(kept).encode())


def _profiler_busy() -> bool:
    """Whether a torch profiler is already running (a second one cannot start inside it).

    torch has no public question for this; ``torch.autograd._profiler_enabled``
    is the Python-level one the profiler itself uses.
    """
    try:
        return bool(torch.autograd._profiler_enabled())
    except AttributeError:  # pragma: no cover - older torch
        return False


@contextlib.contextmanager
def track_memory(device: str | torch.device | None = None, method: str = "auto") -> Iterator[MemoryStats]:
    """Measure the tensor memory a block allocates: ``with track_memory(device) as mem: ...``.

    ``method="auto"`` picks the most accurate source per device: ``"cuda"``
    (the caching allocator's statistics, reset on entry, so a tracker inside
    another resets the outer one's peak), ``"profiler"`` on the CPU (the
    allocator's events, including temporaries inside operations; the free of
    a tensor made before the block is reported only if that tensor was made
    while an earlier profiler ran, so measure blocks that free nothing older
    than themselves, e.g. call ``zero_grad(set_to_none=True)`` before the
    block, not inside it), or ``"tensors"`` (every operation's
    output storages, watched until they are freed; misses temporaries inside
    an operation; used on MPS and when a profiler is already running).
    """
    d = _device(device)
    if method == "auto":
        method = "cuda" if d.type == "cuda" else ("profiler" if d.type == "cpu" and not _profiler_busy() else "tensors")
    stats = MemoryStats(device=d, method=method)
    if method == "cuda":
        dev.synchronize(d)
        start = torch.cuda.memory_allocated(d)
        torch.cuda.reset_peak_memory_stats(d)
        yield stats
        dev.synchronize(d)
        stats.peak_bytes = max(0, torch.cuda.max_memory_allocated(d) - start)
        stats.current_bytes = torch.cuda.memory_allocated(d) - start
        stats.reserved_bytes = torch.cuda.memory_reserved(d)
        stats.peak_reserved_bytes = torch.cuda.max_memory_reserved(d)
    elif method == "profiler":
        # acc_events=True: one cycle either way, and torch 2.11 warns "Profiler clears events at the end of each
        # cycle" (UserWarning, on stderr) at the first profile of a process without it
        prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True,
                                      acc_events=True)
        with _filtered_native_stderr():
            with prof:
                yield stats
        running = list(itertools.accumulate(_memory_deltas(prof, torch.autograd.DeviceType.CPU)))
        stats.peak_bytes = max([0, *running])
        stats.current_bytes = running[-1] if running else 0
    elif method == "tensors":
        dev.synchronize(d)
        table = _LiveTable()
        with _Tracker(table, d.type):
            yield stats
        dev.synchronize(d)
        stats.peak_bytes, stats.current_bytes = table.peak, table.live
    else:
        raise ValueError(_("method must be 'auto', 'cuda', 'profiler' or 'tensors', not {method!r}").format(
            method=method))


def _memory_deltas(prof: torch.profiler.profile, device_type: Any) -> list[int]:
    """Every allocation (+bytes) and free (-bytes) on ``device_type`` that ``prof`` recorded, in time order.

    Read from the profiler's public output, its Chrome trace (``export_chrome_trace``): one
    ``"[memory]"`` instant event per allocator call, with its ``Bytes`` and ``Device Type``.
    ``prof.events()`` and ``key_averages()`` are public too, but they add each allocation to
    the operator that made it, so a temporary allocated and freed inside one operation nets
    to zero there and its peak is lost; the trace keeps every call.
    """
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "memory_trace.json")
        prof.export_chrome_trace(path)
        with open(path, encoding="utf-8") as f:
            events = json.load(f).get("traceEvents", [])
    wanted = int(device_type)
    records = [e for e in events if e.get("name") == "[memory]" and int(e.get("args", {}).get("Device Type", -1)) == wanted]
    records.sort(key=lambda e: (float(e.get("ts", 0.0)), int(e["args"].get("Ev Idx", 0))))
    return [int(e["args"].get("Bytes", 0)) for e in records]


def measure_peak(fn: Callable[[], Any], device: str | torch.device | None = None) -> int:
    """Peak tensor bytes allocated while ``fn()`` runs, above what was allocated before.

    What ``fn`` returns is dropped before the measurement ends, so it counts
    only while it was alive inside ``fn``.
    """
    with track_memory(device) as mem:
        fn()
    return mem.peak_bytes


# --------------------------------------------------------------------------- timeline


class Timeline:
    """Live tensor bytes after every operation of a block, with labelled marks.

    ``tl.mark("backward")`` inside the block remembers where a phase starts,
    so a chart can show the forward pass growing and the backward pass freeing.
    """

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.ops: list[str] = []
        self.bytes: list[int] = []
        self.marks: dict[str, int] = {}
        self._table = _LiveTable()

    def mark(self, label: str) -> None:
        self.marks[label] = len(self.bytes)

    def _record(self, op: str) -> None:
        self.ops.append(op)
        self.bytes.append(self._table.live)

    @property
    def peak_bytes(self) -> int:
        return self._table.peak


@contextlib.contextmanager
def memory_timeline(device: str | torch.device | None = None) -> Iterator[Timeline]:
    """Record live tensor bytes after each operation: ``with memory_timeline(device) as tl: ...``.

    Counts the storages the block allocates and keeps alive (activations saved
    for backward, gradients, optimizer state), operation by operation.
    """
    d = _device(device)
    tl = Timeline(d)
    with _Tracker(tl._table, d.type, timeline=tl):
        yield tl


# --------------------------------------------------------------------------- memory budget


class MemoryBudget:
    """Run out of memory on purpose, safely, on any device.

    Inside ``with budget:``, every tensor allocated on ``device`` counts
    against ``limit_bytes`` for as long as it stays alive (also after the
    block ends, as on a real GPU). An allocation that would go over raises
    ``torch.OutOfMemoryError``, the same exception a CUDA out-of-memory error
    raises, so the recovery code is the code you need on a GPU.

    ``live_bytes`` is what tensors allocated under the budget still hold
    (``0`` means everything was freed), ``peak_bytes`` the most they ever held,
    ``oom_count`` how many allocations were refused.

    It counts tensor storages (what ``torch.cuda.memory_allocated`` counts),
    not the temporaries inside one operation, nor the caching allocator's
    reserve. With ``use_cuda_limit=True`` on CUDA it instead sets the real
    allocator limit (``torch.cuda.set_per_process_memory_fraction``) while the
    block runs: that limit counts everything the process reserves.
    """

    def __init__(self, limit_bytes: int, device: str | torch.device | None = None, use_cuda_limit: bool = False) -> None:
        if limit_bytes <= 0:
            raise ValueError(_("limit_bytes must be positive, got {limit_bytes}").format(limit_bytes=limit_bytes))
        self.limit_bytes = int(limit_bytes)
        self.device = _device(device)
        self.use_cuda_limit = use_cuda_limit
        if use_cuda_limit and self.device.type != "cuda":
            raise ValueError(_("use_cuda_limit=True needs a CUDA device; the budget is on {device}").format(
                device=self.device))
        self.oom_count = 0
        self._table = _LiveTable()
        self._modes: list[Any] = []
        self._cuda_start = torch.cuda.memory_allocated(self.device) if use_cuda_limit else 0

    @property
    def live_bytes(self) -> int:
        if self.use_cuda_limit:
            return torch.cuda.memory_allocated(self.device) - self._cuda_start
        return self._table.live

    @property
    def peak_bytes(self) -> int:
        if self.use_cuda_limit:
            return torch.cuda.max_memory_allocated(self.device) - self._cuda_start
        return self._table.peak

    def reset_peak(self) -> None:
        """Start the peak again from what is live now."""
        self._table.peak = self._table.live
        if self.use_cuda_limit:
            torch.cuda.reset_peak_memory_stats(self.device)

    def _oom(self, need: int) -> torch.OutOfMemoryError:
        self.oom_count += 1
        # The text starts as CUDA's own does ("CUDA out of memory. Tried to allocate ..."), so recovery
        # code that checks the message (``"out of memory" in str(err)``, the idiom from before
        # torch.OutOfMemoryError existed) behaves here as it would on a GPU; the Korean keeps that opening too.
        return torch.OutOfMemoryError(
            _("CUDA out of memory (simulated: a MemoryBudget on {device}). Tried to allocate {need}; {live} of the "
              "{limit} budget is already in use. A real GPU raises this same exception type.").format(
                device=self.device, need=format_bytes(need), live=format_bytes(self._table.live),
                limit=format_bytes(self.limit_bytes))
        )

    def __enter__(self) -> MemoryBudget:
        if self.use_cuda_limit:
            total = torch.cuda.get_device_properties(self.device).total_memory
            torch.cuda.set_per_process_memory_fraction(min(1.0, self.limit_bytes / total), self.device)
            self._modes.append(None)
        else:
            mode = _Tracker(self._table, self.device.type, limit=self.limit_bytes, budget=self)
            mode.__enter__()
            self._modes.append(mode)
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        mode = self._modes.pop()
        if mode is None:
            torch.cuda.set_per_process_memory_fraction(1.0, self.device)
            if exc_type is torch.OutOfMemoryError:
                self.oom_count += 1
        else:
            mode.__exit__(exc_type, exc, tb)

    def __repr__(self) -> str:  # what a chapter prints (``f"{budget}"``): a learner's reading, so translated
        return _("MemoryBudget({limit} on {device}: live {live}, peak {peak}, {refused} refused)").format(
            limit=format_bytes(self.limit_bytes), device=self.device, live=format_bytes(self.live_bytes),
            peak=format_bytes(self.peak_bytes), refused=self.oom_count)


@dataclasses.dataclass
class SnapshotBlock:
    """One block of a CUDA memory snapshot: its size, its state, and where in Python it was allocated."""

    size: int  #: bytes the allocator gave (rounded up from ``requested``)
    requested: int  #: bytes the tensor asked for
    state: str  #: "active_allocated" (a live tensor), "active_awaiting_free" or "inactive" (cached, free)
    segment_size: int  #: bytes of the cudaMalloc'd segment it lies in
    site: str  #: ``file:line in function`` of the first frame outside torch, or "" when none was recorded


def _allocation_site(frames: list[dict[str, Any]]) -> str:
    """The innermost frame of the allocating stack that is not torch's own code: the line that asked."""
    for f in frames:
        name = str(f.get("filename", "")).replace("\\", "/")
        native = name.startswith("??") or name.endswith((".cpp", ".cc", ".cu", ".h", ".hpp", ".so"))
        if name and not native and "/torch/" not in name:
            return f"{name}:{f.get('line', '?')} in {f.get('name', '?')}"
    return ""


def largest_blocks(snapshot: dict[str, Any], n: int = 5, states: tuple[str, ...] = ("active_allocated",)) -> list[SnapshotBlock]:
    """The ``n`` largest blocks of a CUDA memory snapshot in ``states``, largest first.

    ``snapshot`` is what ``torch.cuda.memory._snapshot()`` returns, or the
    pickle ``torch.cuda.memory._dump_snapshot(path)`` wrote, loaded: a dict
    whose ``"segments"`` (one per ``cudaMalloc``) hold ``"blocks"``, each with
    ``size``, ``requested_size``, ``state`` and, when history was recorded
    with Python stacks, ``frames`` (innermost first). Plain dicts, so this
    runs, and is tested, without a GPU.
    """
    found = []
    for segment in snapshot.get("segments", []):
        for block in segment.get("blocks", []):
            if block.get("state") in states:
                found.append(SnapshotBlock(size=int(block.get("size", 0)), requested=int(block.get("requested_size", 0)),
                                           state=str(block.get("state")), segment_size=int(segment.get("total_size", 0)),
                                           site=_allocation_site(block.get("frames") or [])))
    return sorted(found, key=lambda b: b.size, reverse=True)[:n]


def blas_workspace_sizes() -> set[int]:
    """The sizes in bytes of cuBLAS's and cuBLASLt's workspaces, as this torch reports them; empty when it cannot.

    cuBLAS gets a workspace per thread and stream from the caching allocator,
    at the first matrix product there: a live block with no Python frame in a
    memory snapshot. ``torch.backends.cuda.cublas_workspace_size()`` and
    ``cublaslt_workspace_size()`` (torch 2.13+, CUDA builds) say how large;
    older versions and CPU-only builds cannot, and this returns an empty set.
    """
    sizes = set()
    for name in ("cublas_workspace_size", "cublaslt_workspace_size"):
        query = getattr(torch.backends.cuda, name, None)
        try:
            size = int(query()) if query is not None else 0
        except (AttributeError, RuntimeError):  # a CPU-only build has no such binding
            size = 0
        if size > 0:
            sizes.add(size)
    return sizes


def block_origin(block: SnapshotBlock, workspace_sizes: set[int] | frozenset[int] = frozenset()) -> str:
    """Who allocated a snapshot block, in words: its line of Python, else why it has none.

    A block with no Python frame whose size is one of ``workspace_sizes``
    (:func:`blas_workspace_sizes`) is labelled as cuBLAS's workspace; any
    other frameless block was made before recording began, or on a thread
    with no Python frame of yours: autograd's worker thread for a GPU, where
    backward allocates the gradients (``stacks="all"`` records its C++ frames).
    """
    if block.site:
        return block.site
    if block.requested in workspace_sizes or block.size in workspace_sizes:
        return _("cuBLAS's workspace (C++, at the first matrix product of a thread and stream: no Python frame; "
                 "its size is torch.backends.cuda.cublas_workspace_size()'s)")
    return _("no Python frame: allocated before recording began, or by backward on autograd's device thread "
             "(record with stacks=\"all\" for its C++ frames)")


def allocation_step(bytes_per_item: int, fixed_bytes: int = 0, device: str | torch.device | None = None) -> Callable[[int], None]:
    """A stand-in for a training step whose memory grows exactly linearly with the batch size.

    ``step(n)`` allocates ``fixed_bytes`` first (weights, say), then
    ``n * bytes_per_item`` bytes at once (the activations), then lets both go.
    Under a budget of B bytes the largest batch that fits is
    ``(B - fixed_bytes) // bytes_per_item``: a search can be checked exactly.
    """
    d = _device(device)

    def step(n: int) -> None:
        weights = torch.empty(max(1, fixed_bytes), dtype=torch.uint8, device=d) if fixed_bytes else None
        activations = torch.empty(n * bytes_per_item, dtype=torch.uint8, device=d)
        del activations, weights

    step.__name__ = f"allocation_step_{bytes_per_item}B_per_item"
    return step


# --------------------------------------------------------------------------- anatomy of a training step


@dataclasses.dataclass
class Anatomy:
    """Bytes of each part of a training step's memory; None where not known."""

    parameters: int
    gradients: int
    optimizer_state: int
    activations: int | None = None
    peak: int | None = None

    @property
    def total(self) -> int:
        return self.parameters + self.gradients + self.optimizer_state + (self.activations or 0)


_STATE_COPIES = {"sgd": 0, "sgd_momentum": 1, "adam": 2, "adamw": 2}


def _unique_params(model: nn.Module) -> list[nn.Parameter]:
    return list(model.parameters())  # already deduplicated: a tied weight counts once


def estimate_anatomy(model: nn.Module, dtype: torch.dtype | None = None, optimizer: str = "adam",
                     example_input: torch.Tensor | None = None) -> Anatomy:
    """What a training step needs, computed from the model's shapes, not measured.

    Parameters: every parameter once (frozen ones too), ``numel * itemsize``
    in ``dtype`` (default: the parameter's own dtype); buffers are not
    parameters. Gradients: one per trainable parameter. Optimizer state:
    ``exp_avg`` and ``exp_avg_sq`` per trainable parameter for Adam/AdamW
    (its one-element ``step`` counters are left out), one momentum buffer for
    SGD with momentum, none for plain SGD. Activations, when
    ``example_input`` is given: the tensors autograd saves for backward
    during one forward pass (counted once per storage).
    """
    sys.audit("course.version", "helpers.memory:estimate_anatomy")  # the grader: no exercise passes by calling this
    params = _unique_params(model)
    size = lambda p: p.numel() * (dtype.itemsize if dtype is not None else p.element_size())  # noqa: E731
    trainable = sum(size(p) for p in params if p.requires_grad)
    copies = _STATE_COPIES[optimizer.lower()]
    activations = None
    if example_input is not None:
        activations = _saved_tensor_bytes(model, example_input)
    return Anatomy(parameters=sum(size(p) for p in params), gradients=trainable,
                   optimizer_state=copies * trainable, activations=activations)


def saved_for_backward(fn: Callable[[], Any], exclude: Any = ()) -> int:
    """Bytes of the tensors autograd saves for backward while ``fn()`` runs, each storage once.

    Read through ``torch.autograd.graph.saved_tensors_hooks``: its pack hook
    sees every tensor an operation saves. Tensors in ``exclude`` (parameters,
    the input batch: memory that exists anyway) are left out. Zero under
    ``no_grad``/``inference_mode``, where nothing is saved. What ``fn``
    returns is dropped, so the saved tensors are freed afterwards.
    """
    skip = {t.untyped_storage().data_ptr() for t in exclude}
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        st = t.untyped_storage()
        if st.data_ptr() not in skip:
            seen[st.data_ptr()] = st.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn()
    return sum(seen.values())


def _saved_tensor_bytes(model: nn.Module, x: torch.Tensor) -> int:
    return saved_for_backward(lambda: model(x), exclude=[*model.parameters(), x])


def measure_anatomy(model: nn.Module, optimizer: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor,
                    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
                    device: str | torch.device | None = None) -> Anatomy:
    """Run one training step and measure each part of its memory.

    Parameters, gradients and optimizer state are the bytes of the tensors
    that exist after the step (``p.grad``, ``optimizer.state``). Activations
    are what the forward pass left allocated (everything kept for backward,
    and the loss), measured by ``track_memory``; ``peak`` is the whole step's
    peak above what was allocated before it.
    """
    d = _device(device)
    optimizer.zero_grad(set_to_none=True)
    with track_memory(d) as whole:
        with track_memory(d, method="tensors") as fwd:
            loss = loss_fn(model(x), y)
        loss.backward()
        del loss
        optimizer.step()
    grads = sum(p.grad.untyped_storage().nbytes() for p in _unique_params(model) if p.grad is not None)
    state = sum(v.untyped_storage().nbytes() for s in optimizer.state.values() for v in s.values()
                if isinstance(v, torch.Tensor) and v.numel() > 1)
    params = sum(p.numel() * p.element_size() for p in _unique_params(model))
    return Anatomy(parameters=params, gradients=grads, optimizer_state=state,
                   activations=fwd.current_bytes, peak=whole.peak_bytes)


def _pad(text: str, width: int, right: bool = False) -> str:
    """``text`` padded with spaces to ``width`` columns, a wide character (Hangul) taking two, so that a Korean
    table's columns line up in a monospaced font as an English one's do (``f"{text:<18}"`` counts characters)."""
    columns = sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)
    space = " " * max(0, width - columns)
    return space + text if right else text + space


def anatomy_table(estimated: Anatomy, measured: Anatomy) -> str:
    """The two anatomies side by side, one line per part, in MiB."""
    rows = [(_("parameters"), estimated.parameters, measured.parameters),
            (_("gradients"), estimated.gradients, measured.gradients),
            (_("optimizer state"), estimated.optimizer_state, measured.optimizer_state),
            (_("activations"), estimated.activations, measured.activations),
            (_("peak of the step"), None, measured.peak)]
    lines = [_pad("", 18) + _pad(_("estimated"), 14, right=True) + _pad(_("measured"), 14, right=True)]
    lines += [_pad(name, 18) + _pad(format_bytes(e), 14, right=True) + _pad(format_bytes(m), 14, right=True)
              for name, e, m in rows]
    return "\n".join(lines)
