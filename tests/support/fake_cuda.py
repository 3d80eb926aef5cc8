"""A fake CUDA machine for a CUDA build of torch on a machine without a GPU: CUDA *tensors* included.

Why: no GPU has ever run this course (issue 23), yet most of what breaks on one is device placement (an
input moved to ``cuda`` while the target stays on the CPU, a mesh built on ``cuda:1`` of a one-GPU machine).
``helpers.checks.fakes.machine.FakeMachine`` answers the questions a program *asks* about the machine but cannot
make a tensor on a GPU. torch's ``FakeTensorMode`` can: in a CUDA build it makes tensors that say
``device='cuda:0'`` without touching a GPU, runs every operator's shape and device rules, and raises on a
mix of devices as real CUDA would ("found two different devices cuda:0, cpu"). :func:`fake_cuda_machine`
puts the two together, so the course's CUDA branches run on the CPU as far as the CPU allows.

What it fakes, and why each piece is needed (checked on torch 2.11.0+cu130 without a GPU):

* the machine's answers: ``torch.cuda.is_available/device_count/get_device_properties/...``,
  ``torch.accelerator.*`` and ``torch._C._get_accelerator`` (what FSDP2 reads to build its default mesh)
  for N GPUs of a chosen :class:`GPU` (an H100-like 9.0 and a T4-like 7.5 below);
  ``set_device``/``torch.cuda.device(i)`` refuse an index the machine lacks with CUDA's own words,
  "invalid device ordinal", and so does any tensor made on such an index (:class:`_OrdinalCheckingMode`);
* things that need a real device and would fail with "Found no NVIDIA driver": ``synchronize``,
  ``Event`` (timed by the host clock), ``Stream``, ``current_stream``, the allocator's statistics (counted
  from the fake CUDA tensors alive: :class:`FakeAllocator`);
* ``nn.Module.to("cuda")`` of a module built inside the mode: torch swaps a fake parameter for the moved one
  (``torch.utils.swap_tensors``), which refuses a tensor something holds a weak reference to, and the fake
  mode's bookkeeping holds one ("_apply(): Couldn't swap Linear.weight"); :func:`_apply_without_swap`
  assigns new parameters instead, as torch does for a module built outside the mode;
* FakeTensorMode itself asks ``torch.cuda.is_available()`` and, told yes, makes one real CUDA tensor and
  asks the runtime for streams (``avoid_device_init``, ``init_gpu_context``): it is told never to;
* ``backward``: the autograd engine asks the CUDA driver for a context on each CUDA device it runs
  on ("hasPrimaryContext expects a valid device index"), so it cannot run a fake CUDA graph; the stand-in
  gives every leaf a zero gradient on the leaf's own device (the backward pass's own device rules are the
  forward's, so nothing about placement is lost, but hooks such as DDP's and FSDP's do not run);
* values: a fake tensor has none, so ``.item()``, ``float()``, ``int()`` return a one of the right kind and
  ``bool()`` False (placeholders: a loop that prints its loss goes on, Adam's ``lr / (1 - beta1**step)``
  divides by no zero), and ``torch.equal``/``allclose`` say True (after checking the devices, as torch does);
  ``.tolist()``/``.numpy()`` still stop;
* ``Tensor.to("cuda")`` and ``.cuda()`` without an index: the C++ binding asks the CUDA runtime for the
  current device once ``is_available()`` says yes, so the stand-in names ``cuda:<current>`` first;
* ``p.data = p.to("cuda")`` (how FSDP2 moves parameters): the fake tensor's device moves too;
* ``pin_memory``: the fake mode has no pinned memory ("NYI: aten._pin_memory"); pinning returns a copy that
  ``is_pinned()`` then reports as pinned.

What it records: the GPU each stream, event and synchronisation acts on (:class:`DeviceCall`): every
``torch.cuda.Stream(...)`` made, ``Event.record(stream)``, ``torch.cuda.synchronize(dev)``,
``torch.cuda.current_stream(dev)``, ``torch.cuda.stream(s)``, resolved as CUDA resolves them (the device
named, else the *current* GPU ``set_device`` chose). Tensors on ``cuda:1`` beside a stream on GPU 0 raise
nothing on a real GPU either (the copy just runs on another queue, the events time an idle GPU), so
:func:`off_device` reads the record instead (review 2, finding 6).

What stops on purpose (:func:`stop_reason` calls it a stop, not a failure): a stub that refuses
(:class:`NeedsRealGPU`), a value only a real run has (``tolist``, ``numpy``, ``torch.save``), anything that
still reaches the CUDA driver (the CUDA profiler, NVML), child processes (DataLoader workers, ``subprocess``),
a cell past its time.

Distributed code runs rank by rank in this process, each rank alone in a process group of one
(:func:`alone_in_a_group`, :func:`launch_each_rank_alone`): its device placement is what it would be in a
real run (its ``LOCAL_RANK``'s GPU, its mesh), its communication is not. A chapter runs cell by cell
(:func:`run_cells`); only a device mix-up (:func:`is_mismatch`) is a failure.
"""

from __future__ import annotations

import contextlib
import functools
import io
import linecache
import multiprocessing.process
import os
import signal
import subprocess
import sys
import threading
import time
import types
import warnings
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch
from torch import nn

from support.cell_runner import restore_torch_settings as _restore_torch_settings  # torch's settings: one place
from support.cell_runner import torch_settings as _torch_settings
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._pytree import tree_leaves

__all__ = ["GPU", "H100", "T4", "CellLimit", "CellRun", "CellTimedOut", "ChildProcessRefused", "DeviceCall",
           "FakeAllocator", "NeedsRealGPU", "alone_in_a_group", "cuda_build", "fake_cuda_machine", "is_mismatch",
           "launch_each_rank_alone", "off_device", "run_cells", "stand_ins", "stop_reason"]

MIB, GIB = 2**20, 2**30


@dataclass(frozen=True)
class GPU:
    """What ``torch.cuda.get_device_properties`` reports for one kind of GPU."""

    name: str
    major: int
    minor: int
    total_memory: int
    L2_cache_size: int
    multi_processor_count: int
    max_threads_per_multi_processor: int


#: Hopper, the cloud's big GPU: compute capability 9.0, 50 MiB of L2, 80 GiB.
H100 = GPU("NVIDIA H100 80GB HBM3", 9, 0, 80 * GIB, 50 * MIB, 132, 2048)
#: Turing, Colab's free GPU: compute capability 7.5 (fp16 tensor cores, no native bf16), 4 MiB of L2, 15 GiB.
T4 = GPU("Tesla T4", 7, 5, 15 * GIB, 4 * MIB, 40, 1024)


class NeedsRealGPU(RuntimeError):
    """A stub was asked for something only a real GPU can answer: the run stops here, which is no failure."""


def cuda_build() -> bool:
    """True when this torch was built for CUDA, the only build whose fake CUDA tensors can be used.

    A CPU-only build's FakeTensorMode makes a tensor that says ``cuda:0`` too, but the first operator that
    records autograd on it asks for CUDA's device guard, which only a CUDA build registers, from C++ code that
    cannot raise: the process aborts ("getDeviceGuardImpl", checked with torch 2.13.0+cpu).
    """
    return torch.version.cuda is not None and torch.backends.cuda.is_built()


# --------------------------------------------------------------------------- what counts as what

#: Words of a device mix-up, as real CUDA, torch's kernels and FakeTensorMode say it. Any of them fails a check.
MISMATCH_WORDS = (
    "found two different devices",  # FakeTensorMode
    "Expected all tensors to be on the same device",  # torch's kernels, CUDA
    "invalid device ordinal",  # CUDA, and the fake machine, for a GPU index it lacks
    "is not on the expected device",  # meta kernels
    "but expected it to be on GPU",  # older kernels' "Tensor for argument #2 'mat1' is on CPU, ..."
    "Expected object of device type",
    "are not at the same device",  # RNNs: "Input and parameter tensors are not at the same device"
)

#: Words of an error that only says the CPU cannot go further: a stop, not a failure.
STOP_WORDS = (
    "Found no NVIDIA driver",
    "No CUDA GPUs are available",
    "CUDA driver",
    "hasPrimaryContext",
    "Cannot access accelerator device",
    "NYI: aten.",
    "aten._local_scalar_dense",
    "data-dependent",
    "Cannot copy out of meta tensor",
    "cannot be converted to",
    "FakeTensor",  # any other fake-tensor limit (an operator without a fake kernel, a data pointer)
    "not compiled with",
    "child process",
    "not supported for tensor subclasses",
    "Can't pickle",  # torch.save of a fake tensor: it has no bytes to write
)


def _messages(err: BaseException, during: bool = True) -> str:
    """The text of ``err`` and of every exception it was raised from (``raise ... from``), and, with ``during``,
    of those it was raised while handling."""
    parts, seen = [], set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        parts.append(f"{type(err).__name__}: {err}")
        err = err.__cause__ or (err.__context__ if during else None)
    return "\n".join(parts)


def is_mismatch(err: BaseException) -> bool:
    """Whether ``err`` (or what it was raised from) is a device mix-up: the one kind of error the check fails on."""
    text = _messages(err, during=False)  # not what a cell raised while handling a mix-up it made on purpose
    return any(word in text for word in MISMATCH_WORDS)


def stop_reason(err: BaseException) -> str:
    """One line saying why a run stopped at ``err`` ("as far as the CPU allows"), for the record of a run."""
    from torch._subclasses.fake_tensor import DataDependentOutputException, UnsupportedOperatorException

    first = f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"[:160]
    if isinstance(err, NeedsRealGPU):
        return f"stub refused: {first}"
    if isinstance(err, (DataDependentOutputException, UnsupportedOperatorException)):
        return f"fake tensors have no values: {first}"
    if any(word in _messages(err) for word in STOP_WORDS):
        return f"needs a real GPU: {first}"
    return f"other: {first}"


# --------------------------------------------------------------------------- which GPU each stream call acts on

#: The one call whose missing device fails by itself: a stream made for the chosen GPU must say so.
STREAM = "torch.cuda.Stream()"

_HERE = Path(__file__).resolve()
_ROOT = _HERE.parents[2]
_TORCH = Path(torch.__file__).resolve().parent
#: Frames of the fake machine itself and of what wraps a call (a context manager, a patch): never the caller.
_PLUMBING = {str(_HERE), contextlib.__file__, functools.__file__}


@dataclass(frozen=True)
class DeviceCall:
    """One stream, event or synchronisation on the fake machine, and the GPU it acts on.

    ``call`` says what it was ("torch.cuda.Stream()", "Event.record()", "torch.cuda.synchronize(device)");
    ``explicit`` whether it named its device (a device argument, or a stream whose device it takes); ``site``
    the innermost line outside torch that led to it ("helpers/dataloader.py:609", "<cell 12>:3") and ``code``
    that line's text, ``by_torch`` whether torch itself made the call below that line; ``cell`` the notebook
    cell's line ("<cell 12>", 3), if a cell led to it; ``rank`` the ``LOCAL_RANK`` of a rank run alone
    (:func:`alone_in_a_group`), whose own GPU it should act on.
    """

    call: str
    index: int
    explicit: bool
    site: str
    code: str = ""
    by_torch: bool = False
    cell: tuple[str, int] | None = None
    rank: int | None = None

    def where(self) -> str:
        """"cell 12, line 3: `code`", or "cell 12, line 3, in helpers/x.py:40: `code`" (a cell's call to a helper)."""
        if self.cell is None:
            where = self.site
        else:
            where = f"{self.cell[0][1:-1]}, line {self.cell[1]}"
            if self.site != f"{self.cell[0]}:{self.cell[1]}":
                where += f", in {self.site}"
        return where + (f": `{self.code}`" if self.code else "") + (" (a call torch makes there)" if self.by_torch else "")


def _site(frame: Any) -> tuple[str, str]:
    name, line = frame.f_code.co_filename, frame.f_lineno
    try:
        shown = str(Path(name).resolve().relative_to(_ROOT)) if not name.startswith("<") else name
    except ValueError:
        shown = name
    return f"{shown}:{line}", linecache.getline(name, line).strip()


def _off_the_clock(fn):
    """``fn``'s own real time is taken back from a simulated machine's clock: the fake machine's bookkeeping
    (walking the stack to record a call, say) is no cost a real GPU machine pays. Only for code that queues no
    operator: an operator inside would be taken back with it."""

    @functools.wraps(fn)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        timeline = _timeline()
        if timeline is None or not timeline.free():
            return fn(*args, **kwargs)
        timeline.enter()
        try:
            return fn(*args, **kwargs)
        finally:
            timeline.leave()

    return wrapped


@_off_the_clock
def _record_call(call: str, index: int, explicit: bool) -> None:
    """Record ``call`` on the machine now running (if any), with the lines of code that made it."""
    if not _MACHINE:
        return
    machine = _MACHINE[0]
    frame, caller, site, cell = sys._getframe(1), None, None, None
    while frame is not None:
        name = frame.f_code.co_filename
        if name not in _PLUMBING and "unittest/mock" not in name:
            caller = caller or frame
            if site is None and not name.startswith(str(_TORCH)):
                site = frame
            if name.startswith("<cell "):
                cell = (name, frame.f_lineno)
                break
        frame = frame.f_back
    by_torch = caller is not None and caller.f_code.co_filename.startswith(str(_TORCH))
    where, code = _site(site) if site else ("?", "")
    machine.device_calls.append(DeviceCall(call, index, explicit, where, code, by_torch, cell, machine.rank))


def off_device(calls: list[DeviceCall], chosen: Any) -> list[tuple[DeviceCall, str]]:
    """Each of ``calls`` that breaks the rule, with why: it acts on another GPU than ``chosen`` (a rank's: its
    ``LOCAL_RANK``'s), or it is a ``torch.cuda.Stream()`` of the course's own code that names no device.

    Why the second: with :func:`helpers.device.pick_device`'s ``set_device`` a device-less stream is right, but a
    learner who copies the cell into a script without it gets GPU 0's stream: the course always names the device.
    """
    chosen = torch.device(chosen)
    bad, seen = [], set()
    for c in calls:
        expected = c.rank if c.rank is not None else chosen.index
        whys = []
        if expected is not None and c.index != expected:
            whys.append(f"{c.call} acts on cuda:{c.index}, not on the chosen cuda:{expected}")
        if c.call == STREAM and not c.explicit and not c.by_torch:
            whys.append(f"{c.call} names no device (without pick_device's set_device it is GPU 0's): write "
                        "torch.cuda.Stream(device)")
        for why in whys:
            if (c.site, c.cell, why) not in seen:
                seen.add((c.site, c.cell, why))
                bad.append((c, why))
    return bad


def _index_of(device: Any) -> tuple[int, bool]:
    """The GPU ``device`` names on the running machine (the current one for None or "cuda"), and whether it named one."""
    machine = _MACHINE[0] if _MACHINE else None
    if device is None:
        return (machine.current if machine else 0), False
    if isinstance(device, int):
        return device, True
    index = torch.device(device).index
    return (index if index is not None else machine.current if machine else 0), True


# --------------------------------------------------------------------------- the machine


class _Clock:
    """The host clock a fake Event reads: a fake GPU finishes its work when the call returns."""

    now = staticmethod(time.perf_counter)


class FakeEvent:
    """``torch.cuda.Event`` without a GPU: ``record`` reads the host clock; ``elapsed_time`` in milliseconds."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False,
                 **kwargs: Any) -> None:
        self.enable_timing, self.at = enable_timing, None

    @_off_the_clock
    def record(self, stream: Any = None) -> None:
        if stream is None:
            index, explicit = _index_of(None)
            _record_call("Event.record()", index, explicit)
        else:
            index = stream.device.index
            _record_call("Event.record(stream)", stream.device.index, True)
        timeline = _timeline()
        self.at = _Clock.now() if timeline is None else timeline.record(index)

    def wait(self, stream: Any = None) -> None:
        pass

    def query(self) -> bool:
        timeline = _timeline()
        return timeline is None or self.at is None or timeline.done(0, self.at)

    @_off_the_clock
    def synchronize(self) -> None:
        timeline = _timeline()
        if timeline is not None and self.at is not None:
            timeline.wait_until(self.at)

    def elapsed_time(self, end: "FakeEvent") -> float:
        if not (self.enable_timing and end.enable_timing):
            raise RuntimeError("Both events must be created with argument 'enable_timing=True'.")
        if self.at is None or end.at is None:
            raise RuntimeError("Both events must be recorded before calculating elapsed time.")
        timeline = _timeline()
        if timeline is not None and not (timeline.done(0, self.at) and timeline.done(0, end.at)):
            # CUDA's cudaEventElapsedTime answers cudaErrorNotReady while the work before an event has not run
            raise RuntimeError("CUDA error: device not ready (an event was read before the GPU reached it: call "
                               "end.synchronize() or torch.cuda.synchronize() first)")
        return (end.at - self.at) * 1000.0


class FakeStream:
    """``torch.cuda.Stream`` without a GPU: work is already finished, so every wait returns at once."""

    def __init__(self, device: Any = None, priority: int = 0, **kwargs: Any) -> None:
        index = torch.device(device).index if isinstance(device, (str, torch.device)) else device
        self.device = torch.device("cuda", index if index is not None else torch.cuda.current_device())
        self.priority = priority
        _record_call(STREAM if device is None else "torch.cuda.Stream(device)", self.device.index, device is not None)

    @classmethod
    def of(cls, index: int) -> "FakeStream":
        """The stream ``current_stream``/``default_stream`` hand out: not a stream the program made."""
        stream = cls.__new__(cls)
        stream.device, stream.priority = torch.device("cuda", index), 0
        return stream

    def wait_stream(self, stream: Any) -> None:
        pass

    def wait_event(self, event: Any) -> None:
        pass

    def record_event(self, event: Any = None) -> FakeEvent:
        event = event or FakeEvent()
        event.record(self)
        return event

    def query(self) -> bool:
        timeline = _timeline()
        return timeline is None or timeline.done(self.device.index, timeline.queue_end[self.device.index])

    @_off_the_clock
    def synchronize(self) -> None:
        timeline = _timeline()
        if timeline is not None:
            timeline.wait_for(self.device.index)

    def __enter__(self) -> "FakeStream":
        _record_call("with stream:", self.device.index, True)
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


def _nothing(*args: Any, **kwargs: Any) -> None:
    return None


class FakeAllocator:
    """The caching allocator's statistics for fake tensors: bytes of live CUDA storages, per GPU, and their peak.

    Chapters compare peaks (``torch.cuda.max_memory_allocated``) and divide by them; zeros would stop them
    with a ZeroDivisionError. A storage counts from the first tensor that shows it until the last one
    referring to it is gone (views share one), as the real allocator counts blocks. "Reserved" is what the
    cache would hold: the peak since the last ``empty_cache``.
    """

    def __init__(self, count: int, capacity: int) -> None:
        self.live, self.peak, self.reserved = [0] * count, [0] * count, [0] * count
        self.capacity = capacity
        self.refs: dict[int, list] = {}  # storage -> [tensors alive that use it, bytes, GPU]

    def track(self, t: torch.Tensor) -> None:
        storage = t.untyped_storage()
        key, index = storage._cdata, t.device.index
        entry = self.refs.get(key)
        if entry is None:
            if self.live[index] + storage.nbytes() > self.capacity:
                raise torch.OutOfMemoryError(self._oom(index, storage.nbytes()))
            entry = self.refs[key] = [0, storage.nbytes(), index]
            self.live[index] += entry[1]
            self.peak[index] = max(self.peak[index], self.live[index])
            self.reserved[index] = max(self.reserved[index], self.live[index])
        entry[0] += 1
        weakref.finalize(t, self._release, key)

    def _oom(self, index: int, nbytes: int) -> str:
        """torch's message for a CUDA allocation that does not fit (the words chapter 07 reads, sentence by sentence)."""
        gib, mib = 2**30, 2**20
        live, free = self.live[index], self.capacity - self.reserved[index]
        return (f"CUDA out of memory. Tried to allocate {nbytes / mib:.2f} MiB. GPU {index} has a total capacity of "
                f"{self.capacity / gib:.2f} GiB of which {free / mib:.2f} MiB is free. Including non-PyTorch memory, "
                f"this process has {self.reserved[index] / gib:.2f} GiB memory in use. Of the allocated memory "
                f"{live / gib:.2f} GiB is allocated by PyTorch, and {(self.reserved[index] - live) / mib:.2f} MiB is "
                "reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting "
                "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for "
                "Memory Management  (https://docs.pytorch.org/docs/stable/notes/cuda.html#optimizing-memory-usage-"
                "with-pytorch-cuda-alloc-conf)")

    def _release(self, key: int) -> None:
        entry = self.refs.get(key)
        if entry is not None:
            entry[0] -= 1
            if entry[0] == 0:
                del self.refs[key]
                self.live[entry[2]] -= entry[1]


@dataclass
class FakeCudaMachine:
    """``count`` GPUs of kind ``gpu``; ``current`` is the index ``torch.cuda.set_device`` chose last."""

    gpu: GPU = H100
    count: int = 1
    current: int = 0
    allocator: FakeAllocator | None = None
    #: every stream, event and synchronisation so far, with the GPU it acts on (:func:`off_device` reads them)
    device_calls: list[DeviceCall] = field(default_factory=list)
    #: the LOCAL_RANK of the rank now running alone (:func:`alone_in_a_group`), None outside one
    rank: int | None = None
    #: GPU-like time (:class:`support.gpu_model.Timeline`), when the machine was asked for a timing profile
    timeline: Any = None

    def __post_init__(self) -> None:
        self.allocator = FakeAllocator(self.count, self.gpu.total_memory)

    # ---------------------------------------------------------------- device indices
    def index(self, device: Any = None) -> int:
        """The GPU index ``device`` names (None, "cuda", "cuda:1", 1, a torch.device), checked like CUDA checks it."""
        if device is None:
            index = self.current
        elif isinstance(device, int):
            index = device
        else:
            d = torch.device(device)
            if d.type != "cuda":
                raise ValueError(f"Expected a cuda device, but got: {d}")
            index = self.current if d.index is None else d.index
        if not 0 <= index < self.count:
            raise RuntimeError(f"CUDA error: invalid device ordinal (GPU {index} asked for; this fake machine has "
                               f"{self.count}: cuda:0 to cuda:{self.count - 1})")
        return index

    def set_device(self, device: Any) -> None:
        if isinstance(device, int) and device < 0:  # torch.cuda.set_device(-1) does nothing
            return
        self.current = self.index(device)

    def exchange(self, device: int) -> int:
        """``torch.cuda._exchange_device``: what ``with torch.cuda.device(i):`` calls on entry and exit."""
        before = self.current
        if device >= 0:
            self.current = self.index(device)
        return before

    def properties(self, device: Any = None) -> SimpleNamespace:
        self.index(device)
        g = self.gpu
        return SimpleNamespace(name=g.name, major=g.major, minor=g.minor, total_memory=g.total_memory,
                               L2_cache_size=g.L2_cache_size, multi_processor_count=g.multi_processor_count,
                               max_threads_per_multi_processor=g.max_threads_per_multi_processor,
                               warp_size=32, is_integrated=0, is_multi_gpu_board=0, uuid=f"GPU-fake-{g.major}{g.minor}")

    def capability(self, device: Any = None) -> tuple[int, int]:
        self.index(device)
        return self.gpu.major, self.gpu.minor

    def name(self, device: Any = None) -> str:
        self.index(device)
        return self.gpu.name

    def mem_get_info(self, device: Any = None) -> tuple[int, int]:
        i = self.index(device)
        return self.gpu.total_memory - self.allocator.reserved[i], self.gpu.total_memory

    def memory_allocated(self, device: Any = None) -> int:
        return self.allocator.live[self.index(device)]

    def max_memory_allocated(self, device: Any = None) -> int:
        return self.allocator.peak[self.index(device)]

    def memory_reserved(self, device: Any = None) -> int:
        return self.allocator.reserved[self.index(device)]

    def reset_peak_memory_stats(self, device: Any = None) -> None:
        i = self.index(device)
        self.allocator.peak[i] = self.allocator.live[i]

    def empty_cache(self) -> None:
        self.allocator.reserved = list(self.allocator.live)

    def synchronize(self, device: Any = None) -> None:
        self._synchronize("torch.cuda.synchronize", device)

    def accelerator_synchronize(self, device: Any = None) -> None:
        self._synchronize("torch.accelerator.synchronize", device)

    @_off_the_clock
    def _synchronize(self, name: str, device: Any) -> None:
        index = self.index(device)
        _record_call(f"{name}()" if device is None else f"{name}(device)", index, device is not None)
        if self.timeline is not None:
            self.timeline.wait_for(index)

    def bf16_supported(self, including_emulation: bool = True) -> bool:
        return self.gpu.major >= 8 or including_emulation

    def current_stream(self, device: Any = None) -> FakeStream:
        return self._stream_of("torch.cuda.current_stream", device)

    def default_stream(self, device: Any = None) -> FakeStream:
        return self._stream_of("torch.cuda.default_stream", device)

    def _stream_of(self, name: str, device: Any) -> FakeStream:
        index = self.index(device)
        _record_call(f"{name}()" if device is None else f"{name}(device)", index, device is not None)
        return FakeStream.of(index)

    def stream(self, stream: Any = None) -> contextlib.AbstractContextManager:
        """``torch.cuda.stream(s)``: work queued inside goes to ``s``, on ``s``'s GPU (None: nothing changes)."""
        if stream is not None:
            _record_call("torch.cuda.stream(s)", stream.device.index, True)
        return contextlib.nullcontext(stream)

    def set_stream(self, stream: Any) -> None:
        if stream is not None:
            _record_call("torch.cuda.set_stream(s)", stream.device.index, True)

    def accelerator(self, check_available: bool = False) -> torch.device:
        return torch.device("cuda")

    def refuse(self, what: str):
        def refused(*args: Any, **kwargs: Any) -> None:
            raise NeedsRealGPU(f"{what} needs a real GPU; the fake machine has none")

        return refused

    def changes(self) -> list[tuple[Any, str, Any]]:
        """The (owner, attribute, fake) triples that make torch describe this machine."""
        cuda, acc = torch.cuda, getattr(torch, "accelerator", None)
        count = self.count
        changes = [
            (cuda, "is_available", lambda: True),
            (cuda, "device_count", lambda: count),
            (cuda, "is_initialized", lambda: True),
            (cuda, "_lazy_init", _nothing),
            (cuda, "init", _nothing),
            (cuda, "current_device", lambda: self.current),
            (cuda, "set_device", self.set_device),
            (cuda, "_exchange_device", self.exchange),
            (cuda, "_maybe_exchange_device", self.exchange),
            (cuda, "get_device_properties", self.properties),
            (cuda, "get_device_capability", self.capability),
            (cuda, "get_device_name", self.name),
            (cuda, "mem_get_info", self.mem_get_info),
            (cuda, "synchronize", self.synchronize),
            (cuda, "is_bf16_supported", self.bf16_supported),
            (cuda, "Event", FakeEvent),
            (cuda, "Stream", FakeStream),
            (cuda, "current_stream", self.current_stream),
            (cuda, "default_stream", self.default_stream),
            (cuda, "stream", self.stream),
            (cuda, "set_stream", self.set_stream),
            (cuda, "is_current_stream_capturing", lambda: False),
            (cuda, "empty_cache", self.empty_cache),
            (cuda, "ipc_collect", _nothing),
            (cuda, "utilization", self.refuse("torch.cuda.utilization (NVML)")),
            (cuda, "set_per_process_memory_fraction", _nothing),
            (cuda, "reset_peak_memory_stats", self.reset_peak_memory_stats),
            (cuda, "reset_accumulated_memory_stats", _nothing),
            (cuda, "reset_max_memory_allocated", self.reset_peak_memory_stats),
            (cuda, "memory_stats", lambda *a, **k: {}),
            (cuda, "memory_summary", lambda *a, **k: "(fake CUDA machine: no allocator statistics)"),
        ]
        changes += [(cuda, "memory_allocated", self.memory_allocated),
                    (cuda, "max_memory_allocated", self.max_memory_allocated),
                    (cuda, "memory_reserved", self.memory_reserved),
                    (cuda, "max_memory_reserved", self.memory_reserved)]
        changes += [(torch.backends.cuda, "is_built", lambda: True),
                    # what torch's own code asks (FSDP2's default mesh, DeviceMesh): C++ says "cpu" without a GPU
                    (torch._C, "_get_accelerator", lambda check=False: torch.device("cuda")),
                    (torch._C, "_accelerator_getAccelerator", lambda: torch.device("cuda"))]
        if acc is not None:
            changes += [
                (acc, "is_available", lambda: True),
                (acc, "device_count", lambda: count),
                (acc, "current_accelerator", self.accelerator),
                (acc, "current_device_index", lambda: self.current),
                (acc, "current_device_idx", lambda: self.current),
                (acc, "set_device_index", self.set_device),
                (acc, "set_device_idx", self.set_device),
                (acc, "synchronize", self.accelerator_synchronize),
            ]
        return changes


#: The machine of the fake_cuda_machine block now running (one at a time), for the stand-ins that need it.
_MACHINE: list[FakeCudaMachine] = []


def _timeline() -> Any:
    """The running machine's :class:`support.gpu_model.Timeline`, or None (no machine, or no timing profile)."""
    return _MACHINE[0].timeline if _MACHINE else None


# --------------------------------------------------------------------------- tensors


class _OrdinalCheckingMode(FakeTensorMode):
    """FakeTensorMode, plus CUDA's refusal of a device index the fake machine lacks (module-level: it pickles)."""

    machine: FakeCudaMachine

    @property
    def avoid_device_init(self) -> bool:
        """Never touch the device: FakeTensorMode asks ``torch.cuda.is_available()``, which the machine fakes."""
        return True

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        timeline = self.machine.timeline
        outer = timeline is not None and timeline.free()  # the fake mode re-enters for its decompositions
        if outer:
            timeline.enter()
        try:
            out = super().__torch_dispatch__(func, types, args, kwargs)
            for t in tree_leaves(out):
                if isinstance(t, torch.Tensor) and t.device.type == "cuda":
                    self.machine.index(t.device)
                    self.machine.allocator.track(t)
            if outer:
                timeline.operator(func, args, kwargs or {}, out)
        finally:
            if outer:
                timeline.leave(operator=True)
        return out


def _is_fake(t: Any) -> bool:
    from torch._subclasses.fake_tensor import FakeTensor

    return isinstance(t, FakeTensor)


def _apply_without_swap(original):
    """``nn.Module._apply`` that assigns new parameters where torch would swap a fake one (see the module text)."""

    def _apply(self, fn, recurse=True):
        if recurse:
            for module in self.children():
                module._apply(fn, recurse=True)
        if not any(_is_fake(p) for p in self._parameters.values() if p is not None):
            return original(self, fn, recurse=False)
        for key, param in list(self._parameters.items()):
            if param is None:
                continue
            with torch.no_grad():
                applied = fn(param)
            new = nn.Parameter(applied, requires_grad=param.requires_grad)
            if param.grad is not None:
                with torch.no_grad():
                    new.grad = fn(param.grad)
            self._parameters[key] = new
        for key, buf in list(self._buffers.items()):
            if buf is not None:
                self._buffers[key] = fn(buf)
        return self

    return _apply


def _leaves(t: torch.Tensor) -> list[torch.Tensor]:
    """The tensors whose ``.grad`` a backward pass from ``t`` would fill (AccumulateGrad nodes of its graph)."""
    found, seen, todo = [], set(), [t.grad_fn]
    while todo:
        fn = todo.pop()
        if fn is None or fn in seen:
            continue
        seen.add(fn)
        variable = getattr(fn, "variable", None)
        if variable is not None:
            found.append(variable)
        todo.extend(nxt for nxt, _ in fn.next_functions)
    return found


def _fill_grads(tensors: Any) -> None:
    """What the backward stand-in does: a zero gradient, on each leaf's own device, for every leaf reached.

    On a machine with a timing profile it also costs what a backward pass would (:meth:`Timeline.backward`).
    """
    tensors = [tensors] if isinstance(tensors, torch.Tensor) else list(tensors)
    timeline = _timeline()
    if timeline is not None:
        cuda = next((t for t in tensors if t.device.type == "cuda"), None)
        if cuda is not None:
            timeline.backward(cuda.device.index or 0)
    for t in tensors:
        if t.requires_grad and t.grad_fn is None and t.grad is None:
            t.grad = torch.zeros_like(t)
        for leaf in _leaves(t):
            if leaf.grad is None:
                leaf.grad = torch.zeros_like(leaf)


def _on_cuda(tensors: Any) -> bool:
    tensors = [tensors] if isinstance(tensors, torch.Tensor) else list(tensors)
    return any(isinstance(t, torch.Tensor) and t.device.type == "cuda" for t in tensors)


def _backward(original):
    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        if _is_fake(self) and _on_cuda(self):
            if gradient is not None and gradient.device != self.device:
                raise RuntimeError(f"invalid gradient: found two different devices {gradient.device}, {self.device}")
            return _fill_grads(self)
        return original(self, gradient, retain_graph, create_graph, inputs)

    return backward


def _autograd_backward(original):
    def backward(tensors, grad_tensors=None, *args, **kwargs):
        if _on_cuda(tensors) and all(_is_fake(t) for t in ([tensors] if isinstance(tensors, torch.Tensor) else tensors)):
            return _fill_grads(tensors)
        return original(tensors, grad_tensors, *args, **kwargs)

    return backward


def _autograd_grad(original):
    def grad(outputs, inputs, *args, **kwargs):
        if _on_cuda(outputs):
            single = isinstance(inputs, torch.Tensor)
            zeros = tuple(torch.zeros_like(t) for t in ([inputs] if single else inputs))
            return zeros
        return original(outputs, inputs, *args, **kwargs)

    return grad


def _placeholder(original, value):
    """A fake tensor's Python number is a placeholder (``value`` of its kind); a real tensor's is its own."""

    @_off_the_clock
    def number(self, *args: Any, **kwargs: Any) -> Any:
        if _is_fake(self):
            timeline = _timeline()
            if timeline is not None and self.device.type == "cuda":
                timeline.wait_for(self.device.index or 0)  # a value on the GPU: the host waits for the queue
            if value is None:  # .item(): a one of the tensor's kind
                return True if self.dtype == torch.bool else 1 if not self.is_floating_point() and not self.is_complex() else 1.0
            return value
        return original(self, *args, **kwargs)

    return number


def _indexed(machine: FakeCudaMachine, value: Any) -> Any:
    """``value`` with an index-less "cuda" turned into ``cuda:<current>``, as real CUDA resolves it."""
    if isinstance(value, (str, torch.device)):
        try:
            d = torch.device(value)
        except (RuntimeError, TypeError):
            return value
        if d.type == "cuda" and d.index is None:
            return torch.device("cuda", machine.current)
    return value


def _to(machine: FakeCudaMachine, original):
    """``Tensor.to`` that names the current GPU where it was asked for "cuda" (see the module text)."""

    def to(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        args = tuple(_indexed(machine, a) for a in args)
        if "device" in kwargs:
            kwargs["device"] = _indexed(machine, kwargs["device"])
        return original(self, *args, **kwargs)

    return to


def _cuda(machine: FakeCudaMachine):
    def cuda(self, device: Any = None, non_blocking: bool = False, memory_format: Any = torch.preserve_format):
        index = machine.index(device if isinstance(device, int) or device is None else torch.device(device))
        return self.to(torch.device("cuda", index), non_blocking=non_blocking, memory_format=memory_format)

    return cuda


def _same(original):
    """``torch.equal``/``allclose`` of fake tensors: True, a placeholder (fake tensors have no values to compare)."""

    def same(a, b, *args: Any, **kwargs: Any) -> bool:
        if _is_fake(a) or _is_fake(b):
            if a.device != b.device and not (a.dim() == 0 or b.dim() == 0):
                raise RuntimeError(f"Expected all tensors to be on the same device, but found {a.device} and {b.device}")
            return True
        return original(a, b, *args, **kwargs)

    return same


def _format(original):
    """``f"{loss:.3f}"`` of a fake 0-dim tensor: its placeholder number (torch formats only plain Tensors so)."""

    def format(self, spec: str) -> str:
        if _is_fake(self) and self.dim() == 0:
            return self.item().__format__(spec)
        return original(self, spec)

    return format


def _real_tensors(original):
    """``original`` run with real tensors: DeviceMesh keeps its ranks in a CPU tensor and reads them back."""


    from torch._subclasses.fake_tensor import unset_fake_temporarily

    @functools.wraps(original)
    def run(*args: Any, **kwargs: Any) -> Any:
        with unset_fake_temporarily():
            return original(*args, **kwargs)

    return run


def _distributed_changes() -> list[tuple[Any, str, Any]]:
    """What a process group and a device mesh need: their bookkeeping tensors stay real (see :func:`_real_tensors`)."""
    if not torch.distributed.is_available():
        return []
    import torch.distributed.fsdp._fully_shard._fsdp_init as fsdp_init
    from torch.distributed import device_mesh

    real_init = _real_tensors(device_mesh.init_device_mesh)
    return [(device_mesh.DeviceMesh, "__init__", _real_tensors(device_mesh.DeviceMesh.__init__)),
            (device_mesh, "init_device_mesh", real_init), (fsdp_init, "init_device_mesh", real_init),
            (torch.distributed, "init_device_mesh", real_init)]


def _data_property() -> property:
    """``Tensor.data`` whose setter also moves a fake tensor's device (``p.data = p.to("cuda")``, as FSDP2 does).

    A fake tensor keeps its device in a Python attribute, ``fake_device``; the C++ setter swaps the storage
    and leaves that attribute behind, so a parameter moved this way would still say "cpu".
    """
    base = torch._C.TensorBase.data

    def get(self):
        return base.__get__(self)

    def set(self, value):
        base.__set__(self, value)
        if _is_fake(self) and _is_fake(value):
            self.fake_device = value.fake_device

    return property(get, set)


def _host_statistics() -> list[tuple[Any, str, Any]]:
    """torch.utils.benchmark sums host clock readings with torch tensors: those stay real (they are not on a GPU),
    and its block-size estimate takes its median without one (:func:`_estimate_block_size`)."""
    from torch.utils.benchmark import Timer
    from torch.utils.benchmark.utils.common import Measurement

    figures = Measurement.significant_figures
    return [(Measurement, "_lazy_init", _real_tensors(Measurement._lazy_init)),
            (Measurement, "significant_figures", property(_real_tensors(figures.fget))),
            (Timer, "_estimate_block_size", _estimate_block_size)]


def _estimate_block_size(self: Any, min_run_time: float) -> int:
    """torch's ``Timer._estimate_block_size`` (2.11 and 2.13 alike), its median taken in Python.

    torch takes the median of the clock's cost with ``torch.tensor(...).median().item()``: on the fake machine
    that tensor is fake and ``.item()`` a placeholder one, so the clock would seem to cost a second and every
    block would grow past ``min_run_time``. The rest is torch's rule, unchanged.
    """
    import statistics

    from torch.utils.benchmark.utils import common

    with common.set_torch_threads(self._task_spec.num_threads):
        overhead = statistics.median([self._timeit(0) for _ in range(5)])
        number = 1
        while True:
            time_taken = self._timeit(number)
            if overhead / time_taken <= 1e-4 and time_taken >= min_run_time / 1000:
                break
            if time_taken > min_run_time or number * 10 > 2147483647:
                break
            number *= 10
    return number


def _pinning():
    """``Tensor.pin_memory``/``is_pinned`` for fake tensors: a pinned copy carries a mark that ``is_pinned`` reads."""

    def pin_memory(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        if self.device.type != "cpu":
            raise RuntimeError(f"cannot pin '{self.device}' memory: only dense CPU tensors can be pinned")
        copy = self.clone()
        copy._fake_cuda_pinned = True
        return copy

    def is_pinned(self, *args: Any, **kwargs: Any) -> bool:
        return bool(getattr(self, "_fake_cuda_pinned", False))

    return pin_memory, is_pinned


def _timed_changes(timeline: Any) -> list[tuple[Any, str, Any]]:
    """The host's clocks read the timeline, and ``torch.utils.benchmark.Timer``'s default clock synchronises.

    torch picks Timer's default clock when ``torch.utils.benchmark`` is imported: on a machine with an
    accelerator, one that calls ``torch.accelerator.synchronize()`` first. It was imported here before the fake
    machine existed, so a Timer made without ``timer=`` is given the clock it would have on a GPU machine.
    ``GradScaler`` takes its step as when no gradient is inf: a fake tensor's ``.item()`` is a placeholder one,
    which it would read as "inf found" and skip every step, so a timed fp16 step would do less work than a GPU's.
    """
    from torch.utils.benchmark import Timer

    def clock() -> float:
        torch.accelerator.synchronize()
        return timeline.now()

    original = Timer.__init__

    @functools.wraps(original)
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if len(args) < 4 and "timer" not in kwargs:  # (stmt, setup, global_setup, timer, ...)
            kwargs["timer"] = clock
        original(self, *args, **kwargs)

    from torch.amp import GradScaler

    def step_unless_inf(self: Any, optimizer: Any, optimizer_state: Any, *args: Any, **kwargs: Any) -> Any:
        return optimizer.step(*args, **kwargs)  # a fake gradient has no value to be inf: the usual step is taken

    return timeline.clocks() + [(Timer, "__init__", __init__), (GradScaler, "_maybe_opt_step", step_unless_inf)]


@contextlib.contextmanager
def fake_cuda_machine(gpu: GPU = H100, count: int = 1, timing: Any = None) -> Iterator[FakeCudaMachine]:
    """Make this process look like a machine with ``count`` GPUs of kind ``gpu``, CUDA tensors included.

    Needs a CUDA build of torch (:func:`cuda_build`). Every tensor made inside is a fake tensor; real tensors
    made before are turned into fake ones when an operator meets them. Everything is put back on exit.
    ``timing``, a :class:`support.gpu_model.Profile`, gives the machine GPU-like time: launches, queues,
    synchronisations and virtual host clocks (:class:`support.gpu_model.Timeline`); without it a fake GPU's
    work costs nothing.
    """
    if not cuda_build():
        raise RuntimeError("fake_cuda_machine needs a CUDA build of torch: a CPU-only build cannot make CUDA tensors")
    from torch._subclasses import fake_tensor
    from torch.optim.optimizer import register_optimizer_step_post_hook

    from helpers.checks.patching import patched

    machine = FakeCudaMachine(gpu=gpu, count=count)
    if timing is not None:
        from support.gpu_model import Timeline, measure_host

        machine.timeline = Timeline(timing, count, measure_host())  # the CPU is measured before anything is fake
    mode = _OrdinalCheckingMode(allow_non_fake_inputs=True)
    mode.machine = machine
    pin_memory, is_pinned = _pinning()
    T = torch.Tensor
    changes = machine.changes() + _distributed_changes() + _host_statistics() + [
        (fake_tensor, "init_gpu_context", _nothing),  # makes a real CUDA tensor once, "so that backward works"
        (nn.Module, "_apply", _apply_without_swap(nn.Module._apply)),
        (T, "backward", _backward(T.backward)),
        (torch.autograd, "backward", _autograd_backward(torch.autograd.backward)),
        (torch.autograd, "grad", _autograd_grad(torch.autograd.grad)),
        (T, "item", _placeholder(T.item, None)),
        (T, "__float__", _placeholder(T.__float__, 1.0)),
        (T, "__int__", _placeholder(T.__int__, 1)),
        (T, "__index__", _placeholder(T.__index__, 1)),
        (T, "__bool__", _placeholder(T.__bool__, False)),
        (T, "__format__", _format(T.__format__)),
        (torch, "equal", _same(torch.equal)), (T, "equal", _same(T.equal)),
        (torch, "allclose", _same(torch.allclose)), (T, "allclose", _same(T.allclose)),
        (T, "to", _to(machine, T.to)),
        (T, "cuda", _cuda(machine)),
        (T, "data", _data_property()),
        (T, "pin_memory", pin_memory),
        (T, "is_pinned", is_pinned),
        (T, "record_stream", _nothing),
    ] + (_timed_changes(machine.timeline) if machine.timeline is not None else [])
    step_hook = (register_optimizer_step_post_hook(machine.timeline.optimizer_stepped)
                 if machine.timeline is not None else None)
    with patched(changes), mode, warnings.catch_warnings(), contextlib.ExitStack() as hooks:
        if step_hook is not None:
            hooks.callback(step_hook.remove)
        # helpers.memory keys storages by data pointer, which a fake tensor does not have (torch warns; it is 0)
        warnings.filterwarnings("ignore", "Accessing the data pointer of FakeTensor")
        _MACHINE[:] = [machine]
        if machine.timeline is not None:
            probe = torch.zeros(1, device="cuda")
            machine.timeline.calibrate(lambda: probe.add_(1))
            del probe
        try:
            yield machine
        finally:
            _MACHINE.clear()


# --------------------------------------------------------------------------- ranks, one at a time


class ChildProcessRefused(OSError):
    """A child process was asked for: it would run real torch, without the fake machine, so the run stops there.

    An OSError, so code that already copes with a missing tool (``nvcc``, ``nvidia-smi``) goes on.
    """


def _refuse_children(what: str):
    def refused(*args: Any, **kwargs: Any) -> None:
        raise ChildProcessRefused(f"{what}: a child process would run without the fake machine; not started")

    return refused


class _Inert:
    """DDP's C++ Reducer and Logger in a group of one: every method does nothing."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        return _nothing


@contextlib.contextmanager
def alone_in_a_group(rank: int, world_size: int, local_world_size: int | None = None) -> Iterator[None]:
    """Let rank ``rank`` of ``world_size`` run in this process, alone: every process group it makes has one member.

    ``init_process_group`` becomes gloo over an in-memory store with this process as its only member (NCCL needs
    a real GPU); a 1-D device mesh the size of ``world_size`` becomes a mesh of one; DDP's checks across ranks,
    its first broadcast and its C++ Reducer (which times buckets with CUDA events, and whose all-reduce hooks the
    backward stand-in never fires) do nothing, as they would with nobody else in the group. The rank still reads its own
    ``rank``, ``world_size``, ``LOCAL_RANK`` and ``LOCAL_WORLD_SIZE``, so every device it picks is the one it
    would pick in a real run: what runs alone is its device placement, not its communication. With
    ``local_world_size`` below ``world_size`` the ranks are spread over machines of that many processes each
    (``LOCAL_RANK`` = rank modulo it, as torchrun sets it on each machine).
    """
    import torch.distributed as dist
    from torch.distributed import device_mesh

    real_init, mesh_init = dist.init_process_group, device_mesh.init_device_mesh

    def init_process_group(backend: Any = None, *args: Any, **kwargs: Any) -> None:
        device_id = kwargs.get("device_id")
        if isinstance(device_id, torch.device) and device_id.type == "cuda" and _MACHINE:
            _MACHINE[0].index(device_id)  # NCCL binds the group to this GPU: one the machine lacks fails here
        real_init("gloo", rank=0, world_size=1, store=dist.HashStore())

    def init_device_mesh(device_type: str, mesh_shape: tuple, *args: Any, **kwargs: Any):
        if len(mesh_shape) == 1 and mesh_shape[0] == world_size:
            if device_type == "cuda":  # what init_device_mesh does on a GPU: this rank's GPU is LOCAL_RANK's
                torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
            mesh_shape = (1,)
        return mesh_init(device_type, mesh_shape, *args, **kwargs)

    local = local_world_size or world_size  # ranks per machine: several machines when fewer than world_size
    names = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500", "RANK": str(rank), "LOCAL_RANK": str(rank % local),
             "WORLD_SIZE": str(world_size), "LOCAL_WORLD_SIZE": str(local)}
    before = {k: os.environ.get(k) for k in names}
    os.environ.update(names)
    import torch.distributed.fsdp._fully_shard._fsdp_init as fsdp_init
    from helpers.checks.patching import patched

    import torch.nn.parallel.distributed as ddp_module

    machine = _MACHINE[0] if _MACHINE else None
    current = machine.current if machine else None
    if machine:  # a rank is a process of its own: its set_device is not its launcher's
        machine.rank = rank % local
    try:
        with patched([(dist, "init_process_group", init_process_group),
                      (ddp_module, "_verify_param_shape_across_processes", _nothing),
                      (ddp_module, "_sync_module_states", _nothing),
                      (dist, "Reducer", _Inert), (dist, "Logger", _Inert),
                      (device_mesh, "init_device_mesh", init_device_mesh),
                      (fsdp_init, "init_device_mesh", init_device_mesh),
                      (dist, "init_device_mesh", init_device_mesh)]):
            yield
    finally:
        if machine:
            machine.current, machine.rank = current, None
        if dist.is_initialized():
            dist.destroy_process_group()
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def launch_each_rank_alone(fn: Any, world_size: int = 2, *, args: Any = (), kwargs: dict | None = None,
                           timeout: float = 60.0, echo: bool = True, env: dict | None = None,
                           local_world_size: int | None = None) -> Any:
    """``helpers.ddp.launch`` on the fake machine: each rank in turn, in this process (:func:`alone_in_a_group`).

    ``timeout``, ``echo`` and ``env`` are accepted and not used (nothing runs in another process). A rank that
    sleeps longer than a moment is waiting for a peer that is not there: that stops the run (:class:`NeedsRealGPU`).
    """
    from helpers import benchmark, ddp
    from helpers.checks.patching import patched

    real_sleep = time.sleep

    def sleep(seconds: float) -> None:
        if seconds > 0.05:
            raise NeedsRealGPU(f"a rank sleeps {seconds} s, waiting for another rank: alone in its group, "
                               "nobody comes (a demonstration of a hang needs real processes)")
        real_sleep(seconds)

    clock = time.perf_counter()
    results = []
    with patched([(time, "sleep", sleep)]):
        for rank in range(world_size):
            with alone_in_a_group(rank, world_size, local_world_size):
                results.append(fn(rank, world_size, *args, **(kwargs or {})))
    return ddp.Run(results, [""] * world_size, time.perf_counter() - clock, 0)


# --------------------------------------------------------------------------- a chapter, cell by cell


class CellTimedOut(BaseException):
    """A cell ran past its limit on the fake machine (a BaseException, so ``except Exception`` cannot hide it)."""


class CellLimit:
    """A cell's time limit that stops the cell only where stopping is safe: in the cell's own code or the course's.

    Why not raise in the signal handler wherever it lands: Python runs a handler at the next bytecode of
    whatever Python code is running, and on the fake machine that is often FakeTensorMode's own dispatch,
    called from torch's C++ in the middle of an operator. An exception there can leave the C++ side half
    done, and the process then aborts ("Fatal Python error: Aborted" inside ``F.linear``, seen on the floor
    torch 2.11 in chapter 08's timing loop, which always runs into its limit). So the handler raises at once
    only when the frame it interrupts is *ours* (a cell's, or ``helpers/``); otherwise it marks the stop as
    due and turns on line tracing, and the stop is raised at the next line one of our frames runs.
    The timers repeat (``setitimer``'s interval), so a stop swallowed somewhere is due again a moment later.
    """

    def __init__(self, message: str) -> None:
        import helpers

        self.message = message
        self.armed = False
        self.due = False
        self._ours = ("<cell ", str(Path(helpers.__file__).parent))  # cells' code, and the course's

    def ours(self, frame: Any) -> bool:
        name = frame.f_code.co_filename if frame is not None else ""
        return name.startswith(self._ours)

    def arm(self) -> None:
        self.armed, self.due = True, False

    def disarm(self) -> None:
        self.armed, self.due = False, False
        sys.settrace(None)

    def on_signal(self, signum: int, frame: Any) -> None:
        """The SIGPROF/SIGALRM handler."""
        if not self.armed:
            return
        if self.ours(frame):
            self._stop()
        if not self.due:
            self.due = True
            while frame is not None:  # every frame of ours already running traces its next line
                if self.ours(frame):
                    frame.f_trace, frame.f_trace_lines = self._on_line, True
                frame = frame.f_back
            sys.settrace(self._on_call)  # line events need a global trace function; new frames of ours trace too

    def _on_call(self, frame: Any, event: str, arg: Any) -> Any:
        return self._on_line if self.ours(frame) else None

    def _on_line(self, frame: Any, event: str, arg: Any) -> Any:
        if self.armed and self.due and event == "line":
            self._stop()
        return self._on_line

    def _stop(self) -> None:
        self.disarm()
        raise CellTimedOut(self.message)


@dataclass
class CellRun:
    """What one code cell did on the fake machine."""

    index: int
    status: str  #: "ran", "stopped" (as far as the CPU allows), "skipped" (not run, and why), "mismatch"
    reason: str = ""
    error: BaseException | None = None
    cell_id: str = ""  #: the notebook cell's id
    #: the streams, events and synchronisations the cell made, with the GPU each acts on (:func:`off_device`)
    device_calls: list[DeviceCall] = field(default_factory=list)
    output: str = ""  #: what the cell printed (stdout and stderr)


def _skip_reason(cell: Any) -> str | None:
    nbgrader = cell.get("metadata", {}).get("nbgrader", {})
    if nbgrader.get("grade") and not nbgrader.get("solution"):
        return "a grade cell: it grades on the CPU with its own fake machines (tests/course/test_exercises.py runs it)"
    if any(line.lstrip().startswith(("%", "!")) for line in cell["source"].splitlines()):
        return "IPython magic (%%writefile, !command): files and programs for child processes, which do not run here"
    return None


def _refuse_cuda_profiling(original):
    """The profiler with ``ProfilerActivity.CUDA`` asks CUPTI, the driver's tracer: a stop on the fake machine."""

    def start(self) -> None:
        if torch.profiler.ProfilerActivity.CUDA in (self.activities or ()):
            raise NeedsRealGPU("the profiler's CUDA activity (CUPTI) needs a real GPU")
        return original(self)

    return start


def _brief_timing(original, **limits: float):
    """A ``torch.utils.benchmark.Timer`` method that measures for a moment: fake kernels' times mean nothing."""

    def timed(self, *args: Any, **kwargs: Any) -> Any:
        kwargs.update(limits)
        return original(self, *args, **kwargs)

    return timed


@contextlib.contextmanager
def stand_ins(brief: bool = True) -> Iterator[None]:
    """What a run on the fake machine does instead of what it cannot do (with :func:`fake_cuda_machine`).

    Child processes are refused (:class:`ChildProcessRefused`: they would run real torch, without the fake);
    ``helpers.ddp.launch`` runs each rank alone in this process (:func:`launch_each_rank_alone`); the profiler's
    CUDA activity is refused (CUPTI needs a driver); ``torch.utils.benchmark``'s timers and the course's own
    synchronised blocks measure for a moment only (a fake kernel's time means nothing, and the whole check must
    stay short); ``brief=False`` leaves them as they are (a machine with a timing profile keeps GPU-like time).
    """
    from torch.utils.benchmark import Timer

    from helpers import benchmark, ddp
    from helpers.checks.patching import patched

    briefly = [(Timer, "blocked_autorange", _brief_timing(Timer.blocked_autorange, min_run_time=0.01)),
               (Timer, "adaptive_autorange", _brief_timing(Timer.adaptive_autorange, min_run_time=0.01,
                                                           max_run_time=0.02)),
               (benchmark, "measure_blocks", _brief_timing(benchmark.measure_blocks, min_run_time=0.01,
                                                           max_run_time=0.02))]
    with patched([(subprocess, "Popen", _refuse_children("subprocess.Popen")),
                  (multiprocessing.process.BaseProcess, "start", _refuse_children("multiprocessing")),
                  (ddp, "launch", launch_each_rank_alone),
                  (torch.profiler.profile, "start", _refuse_cuda_profiling(torch.profiler.profile.start))]
                 + (briefly if brief else [])):
        yield


def run_cells(cells: list[Any], gpu: GPU = H100, count: int = 1, cpu_seconds: float = 2.0,
              wall_seconds: float = 3.0, workdir: Any = None, timing: Any = None,
              brief: bool = True) -> tuple[list[CellRun], dict]:
    """Run notebook code cells in order, in one namespace, on a fake machine of ``count`` ``gpu``.

    Every cell runs, even after one stopped (a later cell that needs what a stopped one made stops too, with a
    NameError): each stop is recorded with its reason, and only a device mix-up (:func:`is_mismatch`) is a
    failure, for the caller to report. A cell gets ``cpu_seconds`` of CPU and ``wall_seconds`` in all, under
    :func:`stand_ins`. Grade cells and cells with IPython magics are skipped (:func:`_skip_reason`). What a
    cell prints is kept out of the test's output; torch's settings, the environment and the working
    directory are put back afterwards. Each :class:`CellRun` keeps the streams, events and synchronisations
    its cell made (``device_calls``: :func:`off_device` judges them) and what it printed (``output``).
    ``timing`` (a :class:`support.gpu_model.Profile`) gives the machine GPU-like time; ``brief=False`` then lets
    the course's timers measure for as long as the cells ask (:func:`stand_ins`), as on a real GPU.
    Returns each cell's :class:`CellRun` and the namespace.
    """
    import matplotlib.pyplot as plt

    limit = CellLimit(f"the cell ran past its limit on the fake machine ({cpu_seconds} s CPU, {wall_seconds} s)")

    main = types.ModuleType("__main__")  # as in a kernel, functions a cell defines live in __main__ (pickle finds them)
    namespace = main.__dict__
    runs: list[CellRun] = []
    settings, environ, cwd = _torch_settings(), dict(os.environ), os.getcwd()
    old_main = sys.modules["__main__"]
    limits = threading.current_thread() is threading.main_thread()  # signals reach the main thread only
    old_prof = signal.signal(signal.SIGPROF, limit.on_signal) if limits else None
    old_alarm = signal.signal(signal.SIGALRM, limit.on_signal) if limits else None
    old_hook = sys.unraisablehook

    def unraisable(hook_args: Any) -> None:  # a limit swallowed in a finalizer: it fires again, nothing to report
        if isinstance(hook_args.exc_value, CellTimedOut):
            limit.arm()
        else:
            old_hook(hook_args)

    sys.unraisablehook = unraisable
    names: list[str] = []  # the cells' names in linecache, so that tracebacks and DeviceCall show their lines
    try:
        if workdir is not None:
            os.chdir(workdir)
        # only __main__ is swapped (mock.patch.dict would also drop every module the cells import, on exit)
        sys.modules["__main__"] = main
        with fake_cuda_machine(gpu, count, timing) as machine, stand_ins(brief), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for index, cell in enumerate(cells):
                if cell.get("cell_type") != "code" or not cell["source"].strip():
                    continue
                skip = _skip_reason(cell)
                if skip:
                    runs.append(CellRun(index, "skipped", skip))
                    continue
                out = io.StringIO()
                name, before = f"<cell {index}>", len(runs)
                linecache.cache[name] = (len(cell["source"]), None, cell["source"].splitlines(True), name)
                names.append(name)
                machine.device_calls.clear()
                try:
                    # repeating: a limit that fires inside a finalizer is swallowed there (unraisable), so it fires again
                    if limits:
                        limit.arm()
                        signal.setitimer(signal.ITIMER_PROF, cpu_seconds, 0.25)
                        signal.setitimer(signal.ITIMER_REAL, wall_seconds, 0.25)
                    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
                        exec(compile(cell["source"], name, "exec"), namespace)
                    runs.append(CellRun(index, "ran"))
                except CellTimedOut as err:
                    runs.append(CellRun(index, "stopped", str(err), err))
                except Exception as err:  # noqa: BLE001 - every error is recorded and sorted
                    if is_mismatch(err):
                        runs.append(CellRun(index, "mismatch", _messages(err).splitlines()[0][:300], err))
                    else:
                        runs.append(CellRun(index, "stopped", stop_reason(err), err))
                finally:
                    if len(runs) > before:
                        runs[-1].cell_id, runs[-1].device_calls = cell.get("id", ""), list(machine.device_calls)
                        runs[-1].output = out.getvalue()
                    limit.disarm()
                    if limits:
                        signal.setitimer(signal.ITIMER_PROF, 0)
                        signal.setitimer(signal.ITIMER_REAL, 0)
                    plt.close("all")
    finally:
        for name in names:
            linecache.cache.pop(name, None)
        sys.modules["__main__"] = old_main
        sys.unraisablehook = old_hook
        if limits:
            signal.signal(signal.SIGPROF, old_prof)
            signal.signal(signal.SIGALRM, old_alarm)
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(environ)
        _restore_torch_settings(settings)
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()
    return runs, namespace
