"""Chapter 08's techniques: keep the GPU busy.

A GPU runs behind the CPU: the host queues kernels and goes on, and only a
*host sync* (reading a value the GPU computes, ``.item()``, ``print(tensor)``,
``if tensor:``, ``.cpu()``, ``nonzero``) makes it wait until the queue has
drained. This module holds what the chapter measures with:

* :class:`SyncCounter` (``with count_host_syncs() as syncs:``): every place a
  Python program reads a tensor's value on the host, with the line that did it.
  On a GPU each one is a sync; on a CPU nothing waits, but the same lines would
  stall a GPU, so the counter finds them on a laptop too (CUDA's own detector,
  ``torch.cuda.set_sync_debug_mode``, needs a GPU). Chapter 08's first exercise
  is graded with it.
* :func:`queued_steps`: a loop of real work queued on a stand-in stream
  (:class:`helpers.benchmark.BackgroundQueue`) beside host work, with a sync
  every step or only at the end, timed and drawn as a timeline.
* :func:`compile_timings`: what ``torch.compile`` costs once and saves per call,
  measured interleaved; :func:`graph_breaks`: where Dynamo had to stop a graph;
  :func:`kernels_per_call`: from a profiler trace, how many kernels a call ran on
  the GPU and how many launches the host made for them (what a CUDA graph saves).
* :func:`size_for_balance`: the size at which a GPU's time per step catches up with
  the host's, where a sync per step costs the most (the chapter's loop demo).
* :func:`copy_compute_overlap`: from a profiler's Chrome trace, how long
  host-to-device copies ran while kernels ran (the proof of an overlap).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
import weakref
from typing import Any
from unittest import mock

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode  # no public way to see every op torch runs (2.11-2.13)

from helpers.benchmark import BackgroundQueue, Timing
from helpers.i18n import N_, _
from helpers.record import Record

__all__ = [
    "CompileTimings",
    "GraphBreaks",
    "HostSync",
    "KernelCount",
    "Overlap",
    "QueuedRun",
    "SyncCounter",
    "compile_timings",
    "compiler_missing",
    "copy_and_compute",
    "copy_compute_overlap",
    "count_host_syncs",
    "count_kernels",
    "graph_breaks",
    "kernels_per_call",
    "queued_steps",
    "size_for_balance",
]

_HERE = os.path.abspath(__file__)
_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
#: torch's own bookkeeping reads that are not GPU syncs: an optimizer (Adam, not fused or capturable) keeps its
#: step counter on the CPU by design and reads it each step; on a GPU that read waits for nothing.
_TORCH_CPU_BOOKKEEPING = (os.path.join(_TORCH_DIR, "optim") + os.sep,)
#: GradScaler.step reads its found-inf flags on the host (``sum(v.item() ...)``) unless the optimizer is fused
_GRAD_SCALER = os.path.join(_TORCH_DIR, "amp", "grad_scaler.py")

#: aten operators that hand a device value to the host: torch must wait for the GPU to run them
SYNC_OPS: dict[str, str] = {
    "aten._local_scalar_dense": N_("a tensor read as a Python number (.item(), float(t), bool(t), `if t:`)"),
    "aten.nonzero": N_("nonzero (its output's size depends on the values)"),
    "aten.masked_select": N_("masked_select (its output's size depends on the values)"),
    "aten.equal": N_("torch.equal (returns a Python bool)"),
    "aten.unique_dim": N_("unique (its output's size depends on the values)"),
    "aten._unique2": N_("unique (its output's size depends on the values)"),
    "aten.repeat_interleave": N_("repeat_interleave with tensor repeats"),
}
#: what a boolean mask costs where it indexes (a read: the output's size depends on the values) and where it
#: writes (``t[mask] = v`` runs ``index_put_``, which finds the True places with nonzero inside the kernel)
MASK_READ = N_("indexing with a boolean mask, t[mask] (its output's size depends on the values)")
MASK_WRITE = N_("a write through a boolean mask, t[mask] = v (index_put_ runs nonzero: use torch.where or "
                "masked_fill_)")
#: Tensor methods that copy a tensor's values to the host (on a GPU: a device-to-host copy, which waits)
HOST_READ_METHODS: dict[str, str] = {
    "tolist": N_(".tolist()"),
    "numpy": N_(".numpy()"),
    "cpu": N_(".cpu()"),
    "__repr__": N_("repr(tensor)"),
    "__str__": N_("print(tensor) / str(tensor)"),
    "__format__": N_("a tensor in an f-string"),
    "__array__": N_("numpy.asarray(tensor)"),
}
#: the kinds of the copies and waits seen by :class:`_Places` and the synchronize wrappers
TO_HOST = N_("a blocking copy to the host (.to(\"cpu\"), or copy_ or [i] = into a host tensor), which waits for the "
             "queue")
TO_DEVICE = N_("a blocking copy of a host tensor to the device (.to(device) or copy_ without non_blocking=True), "
               "which waits for the queue")
TENSOR_ON_DEVICE = N_("torch.tensor(..., device=<the device>): a blocking copy of Python data to the device (make "
                      "it once, before the loop, or use torch.zeros/torch.full on the device)")
EXPLICIT_SYNC = N_("an explicit synchronize ({name}), which waits for every queued kernel")
GRAD_SCALER_READ = N_("GradScaler.step reading its found-inf flags on the host (a fused optimizer avoids it)")
#: every synchronize a program can call by name: (module or class path, attribute)
SYNCHRONIZE_CALLS: tuple[tuple[str, str], ...] = (
    ("torch.cuda", "synchronize"), ("torch.mps", "synchronize"), ("torch.accelerator", "synchronize"),
    ("torch.xpu", "synchronize"), ("torch.cuda.Event", "synchronize"), ("torch.cuda.Stream", "synchronize"),
    ("torch.Event", "synchronize"), ("torch.Stream", "synchronize"), ("helpers.device", "synchronize"),
)


@dataclass(frozen=True)
class HostSync:
    """One place where the host waits for the device: what made it wait, and the line of code that asked.

    ``read`` tells a read of a device value (``.item()``, ``.tolist()``, a copy to the host) from a wait that
    reads nothing (an explicit ``synchronize()``, a blocking copy *to* the device)."""

    kind: str
    where: str
    read: bool = True
    name: str = ""  # the call, where the kind names one (an explicit synchronize)

    def __str__(self) -> str:
        kind = _(self.kind).format(name=self.name) if self.name else _(self.kind)
        return _("{kind} at {where}").format(kind=kind, where=self.where)


def _caller() -> str:
    """The first frame outside torch and this module: the learner's line that made the read."""
    frame = sys._getframe(1)
    while frame is not None:
        path = os.path.abspath(frame.f_code.co_filename)
        if path != _HERE and not path.startswith(_TORCH_DIR):
            return _("line {line} of {function}()").format(line=frame.f_lineno, function=frame.f_code.co_name)
        frame = frame.f_back
    return _("torch's own code")


def _torch_bookkeeping() -> bool:
    frame = sys._getframe(1)
    while frame is not None:
        path = os.path.abspath(frame.f_code.co_filename)
        if path.startswith(_TORCH_CPU_BOOKKEEPING) and not path.endswith("lr_scheduler.py"):  # a scheduler's
            return True  # float(metric) reads the learner's tensor: a real sync
        if path != _HERE and not path.startswith(_TORCH_DIR):
            return False
        frame = frame.f_back
    return False


def _asked_by_grad_scaler() -> bool:
    frame = sys._getframe(1)
    while frame is not None:
        if os.path.abspath(frame.f_code.co_filename) == _GRAD_SCALER:
            return True
        frame = frame.f_back
    return False


def _bool_index(indices: Any) -> bool:
    return any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in (indices or ()))


class _Watch(TorchDispatchMode):
    """Sees the aten operators that hand a value to the host, whichever Python call asked for them."""

    def __init__(self, counter: "SyncCounter") -> None:
        super().__init__()
        self.counter = counter

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket._qualified_op_name.replace("::", ".")
        kind = SYNC_OPS.get(name)
        if kind is None and name == "aten.index" and len(args) > 1 and _bool_index(args[1]):
            kind = MASK_READ
        elif name in ("aten.index_put_", "aten.index_put", "aten._index_put_impl_") and len(args) > 1 \
                and _bool_index(args[1]):
            kind = MASK_WRITE
        if kind is not None and args and isinstance(args[0], torch.Tensor) \
                and self.counter._on_host(args[0]):
            kind = None  # a tensor that lives on the host: reading it waits for no GPU
        if kind is not None:
            self.counter._record(kind)
        return func(*args, **(kwargs or {}))


# --------------------------------------------------------------------------- where a tensor would live


#: torch functions that make a tensor from nothing: where it lives is their ``device`` argument (none: the host)
_FACTORIES = frozenset({
    "tensor", "as_tensor", "asarray", "empty", "zeros", "ones", "full", "arange", "range", "linspace", "logspace",
    "eye", "rand", "randn", "randint", "randperm", "empty_strided", "scalar_tensor", "from_numpy", "frombuffer",
    "normal", "tril_indices", "triu_indices", "complex", "polar",
})


def _spelled_host(device: Any) -> bool:
    """Whether a ``device=`` argument names the host in a way no machine reads as its accelerator."""
    return isinstance(device, str) and device.split(":")[0].strip() == "cpu"


class _Places(TorchFunctionMode):
    """Where each tensor of the block would live on a machine with a GPU, and the copies between the two that wait.

    On a GPU the answer is the tensor's own device. On a machine without one, every tensor is on the CPU, so
    the place is read from how the program *spelled* it: a tensor made with no ``device`` (the default device
    is the host on every machine), with ``device="cpu"`` written out, or by ``.cpu()``/``.to("cpu")`` lives on
    the host, and so does whatever is computed from host tensors alone; everything else (the batches and the
    model handed in, tensors made with ``device=device``) lives on the device. A copy between the two without
    ``non_blocking=True`` (``.to``, ``copy_``, ``t[i] = value``, ``torch.tensor(data, device=...)``) is a
    ``cudaMemcpy`` followed by a stream synchronize on a GPU (``at::cuda::memcpy_and_sync``), pinned memory or
    not. The one spelling left ambiguous without a GPU is ``torch.device("cpu")`` itself: on a CPU-only
    machine that is also what the course's ``device`` is, so it is read as the device.
    """

    def __init__(self, counter: "SyncCounter", accelerator_here: bool) -> None:
        super().__init__()
        self.counter = counter
        self.accelerator_here = accelerator_here
        self.host: dict[int, Any] = {}

    # -- places
    def on_host(self, t: torch.Tensor) -> bool:
        """A tensor on an accelerator is on the device; a CPU tensor is on the host only where it was made so."""
        if t.device.type != "cpu":
            return False
        ref = self.host.get(id(t))
        return ref is not None and ref() is t

    def _mark_host(self, t: torch.Tensor) -> None:
        # a plain weak reference, no callback: a callback on a tensor runs inside its deallocation, which crashed a
        # later, unrelated call under torch's FakeTensorMode (the fake CUDA check); a dead entry reads as None
        self.host[id(t)] = weakref.ref(t)

    def __exit__(self, *exc: Any) -> Any:
        self.host.clear()
        return super().__exit__(*exc)

    def _target_on_host(self, source: torch.Tensor, args: Sequence[Any], kwargs: Mapping[str, Any]) -> bool | None:
        """Where ``source.to(*args, **kwargs)`` puts its result: True the host, False the device, None unchanged."""
        target = kwargs.get("device", args[0] if args else None)
        if isinstance(target, torch.Tensor):
            return self.on_host(target)
        if isinstance(target, str):
            return _spelled_host(target)
        if isinstance(target, torch.device):  # torch.device("cpu") is the host when it takes a tensor off a GPU;
            return target.type == "cpu" and source.device.type != "cpu"  # on a CPU-only machine, the device
        if isinstance(target, int) and not isinstance(target, bool):
            return False  # .to(0): cuda:0
        return None

    # -- the calls
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        kind = self._wait(name, args, kwargs) if self.counter._depth == 0 else None
        if kind is not None:
            self.counter._record(kind, read=kind == TO_HOST)
        result = func(*args, **kwargs)
        self._place_result(name, args, kwargs, result)
        return result

    def _wait(self, name: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str | None:
        """The kind of wait this call makes on a GPU, or None."""
        blocking = not kwargs.get("non_blocking") and not any(a is True for a in args[2:4])
        if name == "to" and args and isinstance(args[0], torch.Tensor) and blocking:
            to_host = self._target_on_host(args[0], args[1:], kwargs)
            if to_host is not None and to_host != self.on_host(args[0]):
                return TO_HOST if to_host else TO_DEVICE
        elif name in ("copy_", "__setitem__") and len(args) > 1 and blocking:
            dst, src = args[0], args[-1] if name == "__setitem__" else args[1]
            if isinstance(dst, torch.Tensor) and isinstance(src, torch.Tensor) \
                    and self.on_host(dst) != self.on_host(src):
                if self.on_host(dst):
                    return TO_HOST
                return TO_DEVICE if src.dim() > 0 else None  # a host scalar is filled in, not copied
        elif name in ("as_tensor", "asarray") and self.tensor_on_device(args[0] if args else None, kwargs):
            return TENSOR_ON_DEVICE
        elif name == "cuda" and args and isinstance(args[0], torch.Tensor) and self.on_host(args[0]) and blocking:
            return TO_DEVICE
        return None

    def tensor_on_device(self, data: Any, kwargs: Mapping[str, Any]) -> bool:
        """Whether ``torch.tensor(data, **kwargs)`` copies Python data to the device (and waits for it)."""
        device = kwargs.get("device")
        if device is None or _spelled_host(device) or isinstance(data, torch.Tensor):
            return False
        return not (self.accelerator_here and torch.device(device).type == "cpu")

    def _place_result(self, name: str, args: Sequence[Any], kwargs: Mapping[str, Any], result: Any) -> None:
        from torch.utils._pytree import tree_leaves  # noqa: PLC0415

        outputs = [t for t in tree_leaves(result) if isinstance(t, torch.Tensor)]
        if not outputs:
            return
        inputs = [t for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
        if name in _FACTORIES:
            host = kwargs.get("device") is None or _spelled_host(kwargs.get("device"))
        elif name == "cpu":
            host = True
        elif name == "to" and args and isinstance(args[0], torch.Tensor):
            to_host = self._target_on_host(args[0], args[1:], kwargs)
            host = self.on_host(args[0]) if to_host is None else to_host
        elif name in ("cuda", "numpy"):
            host = False
        else:
            host = bool(inputs) and all(self.on_host(t) for t in inputs)
        if host:
            for t in outputs:
                if not any(t is i for i in inputs):  # .cpu() of a CPU tensor returns it: it stays where it was
                    self._mark_host(t)


# --------------------------------------------------------------------------- the counter


def _fingerprints(counter: "SyncCounter") -> list[dict[str, int]]:
    """What the counter and its two modes hold that decides what is counted: their instance attributes that are
    callables or the counter itself (``mode.counter``), by identity. Code that sets ``counter._record`` or
    ``mode.__torch_dispatch__`` on the instance, or hands a mode another counter, changes it."""
    found = []
    for obj in (counter, counter._mode, counter._places):
        found.append({k: id(v) for k, v in vars(obj).items() if callable(v) or v is counter} if obj is not None else {})
    return found


@dataclass
class SyncCounter:
    """The host syncs made while it was active (use :func:`count_host_syncs`)."""

    events: Record = field(default_factory=Record)  # the grader keeps a copy (helpers.record)
    _depth: int = 0
    _installed: dict[str, Callable[..., Any]] = field(default_factory=dict)
    _syncs: dict[tuple[Any, str], Callable[..., Any]] = field(default_factory=dict)
    _mode: Any = None
    _places: Any = None
    _installed_in_torch: Any = None
    _still_watching: bool | None = None
    _events: Any = None  # the record it was made with: one swapped in later is not the count
    _fingerprints: Any = None  # _fingerprints(self) once watching: a method patched on it or its modes since is found

    def __post_init__(self) -> None:
        self._events = self.events

    def watching(self) -> bool:
        """Whether everything it counts with is still in place: its wrappers and its two modes.

        Code that restores ``Tensor.tolist`` or pops a mode while the block runs would go uncounted;
        :attr:`intact` (read after the block) says whether that happened, so a check can refuse to trust the
        count."""
        from torch.overrides import _get_current_function_mode_stack  # noqa: PLC0415
        from torch.utils._python_dispatch import _get_current_dispatch_mode_stack  # noqa: PLC0415

        wrappers = all(getattr(torch.Tensor, name) is fn for name, fn in self._installed.items())
        wrappers = wrappers and all(getattr(owner, name) is fn for (owner, name), fn in self._syncs.items())
        wrappers = wrappers and (self._installed_in_torch is None or torch.tensor is self._installed_in_torch)
        wrappers = wrappers and self._fingerprints == _fingerprints(self)
        modes = any(mode is self._mode for mode in _get_current_dispatch_mode_stack())
        places = self._places is None or any(mode is self._places for mode in _get_current_function_mode_stack())
        return wrappers and modes and places

    @property
    def intact(self) -> bool:
        """After the block: the counter was still watching when the block ended (see :meth:`watching`), and its
        events are the ones it recorded (none cleared or added by other code: :meth:`helpers.record.Record.intact`)."""
        return bool(self._still_watching) and self.events is self._events and self.events.intact()

    def _on_host(self, t: torch.Tensor) -> bool:
        return self._places is not None and self._places.on_host(t)

    def _record(self, kind: str, read: bool = True, name: str = "") -> None:
        if self._depth == 0 and not _torch_bookkeeping():
            if read and _asked_by_grad_scaler():
                kind = GRAD_SCALER_READ
            self.events.append(HostSync(kind, _caller(), read, name))

    def __len__(self) -> int:
        return len(self.events)

    @property
    def reads(self) -> list[HostSync]:
        """The syncs that read a device value on the host (not the explicit waits and host-to-device copies)."""
        return [event for event in self.events if event.read]

    def by_place(self) -> dict[str, int]:
        """How many syncs each (kind, line) made, most first."""
        counts: dict[str, int] = {}
        for event in self.events:
            counts[str(event)] = counts.get(str(event), 0) + 1
        return dict(sorted(counts.items(), key=lambda kv: -kv[1]))

    def summary(self) -> str:
        if not self.events:
            return _("no host syncs")
        places = "; ".join(f"{n}x {place}" for place, n in self.by_place().items())
        return _("{n} host sync(s): {places}").format(n=len(self.events), places=places)

    def _wrap(self, name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        kind = HOST_READ_METHODS[name]

        def read(tensor: Any, *args: Any, **kwargs: Any) -> Any:
            if self._depth == 0 and not _torch_bookkeeping() and not self._on_host(tensor):
                self.events.append(HostSync(kind, _caller()))
            self._depth += 1  # the reads it makes inside (repr reads every element) are part of this one
            try:
                return original(tensor, *args, **kwargs)
            finally:
                self._depth -= 1

        read.__name__ = getattr(original, "__name__", name)
        return read

    def _wrap_synchronize(self, shown: str, original: Callable[..., Any]) -> Callable[..., Any]:
        """A synchronize that is counted; where this machine has no such device it waits for nothing and returns
        (on a GPU it would wait), so the count goes on instead of the program stopping at "no CUDA"."""

        def synchronize(*args: Any, **kwargs: Any) -> Any:
            if self._depth == 0:
                self.events.append(HostSync(EXPLICIT_SYNC, _caller(), read=False, name=shown))
            self._depth += 1
            try:
                return original(*args, **kwargs)
            except (AssertionError, RuntimeError) as err:
                if _no_such_device(err):
                    return None
                raise
            finally:
                self._depth -= 1

        synchronize.__name__ = getattr(original, "__name__", "synchronize")
        return synchronize

    def _wrap_tensor_factory(self, original: Callable[..., Any]) -> Callable[..., Any]:
        """``torch.tensor(data)``: a list holding tensors is read element by element (one device read each)."""

        def tensor(data: Any, *args: Any, **kwargs: Any) -> Any:
            reads = _tensors_in(data, on_host=self._on_host)
            if reads and self._depth == 0 and not _torch_bookkeeping():
                place = _caller()
                self.events.extend(HostSync(TENSOR_OF_TENSORS, place) for _ in range(reads))
            elif self._places is not None and self._places.tensor_on_device(data, kwargs):
                self._record(TENSOR_ON_DEVICE, read=False)
            self._depth += 1
            try:
                return original(data, *args, **kwargs)
            finally:
                self._depth -= 1

        return tensor


def _no_such_device(err: BaseException) -> bool:
    """Whether a synchronize failed only because this machine has no such device (a CPU-only build, no GPU)."""
    text = str(err)
    return any(words in text for words in ("not compiled with", "Cannot access accelerator", "without MPS",
                                            "No CUDA GPUs", "Found no NVIDIA driver", "no accelerator"))


#: what torch.tensor(list of tensors) is called in a count
TENSOR_OF_TENSORS = N_("torch.tensor(a list of tensors), which reads each element (use torch.stack)")


def _tensors_in(data: Any, limit: int = 100_000, on_host: Callable[[torch.Tensor], bool] = lambda t: False) -> int:
    """How many device tensors a (nested) list or tuple holds; 0 for anything else."""
    if not isinstance(data, (list, tuple)):
        return 0
    found, stack = 0, [data]
    while stack and found < limit:
        item = stack.pop()
        if isinstance(item, torch.Tensor):
            found += not on_host(item)
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return found


def _owner(path: str) -> Any:
    """The module or class a dotted path names (``torch.cuda.Event``), or None where this build lacks it."""
    import importlib  # noqa: PLC0415

    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for part in parts[cut:]:
            obj = getattr(obj, part, None)
        return obj
    return None


@contextlib.contextmanager
def count_host_syncs() -> Iterator[SyncCounter]:
    """Count every place the host would wait for a GPU in the block, and the line that asked.

    Four layers see them: a dispatch mode sees the operators that hand a value to the host (``.item()``,
    ``bool(t)``, ``nonzero``, ``t[mask]``, ``t[mask] = v``); the Tensor methods that copy to the host
    (``.tolist()``, ``.cpu()``, ``print(t)``) and ``torch.tensor`` (which reads a list of tensors element by
    element) are wrapped for the block's duration; a function mode (:class:`_Places`) knows where each tensor
    would live on a GPU machine and sees the blocking copies between host and device (``.to("cpu")``,
    ``host_buffer[i] = loss``, ``torch.tensor(x, device=device)``); and every ``synchronize()`` a program can
    call (``torch.cuda``, ``torch.mps``, ``torch.accelerator``, events, streams) is counted where it is called.
    A read of a tensor that lives on the host waits for nothing and is not counted. On a GPU,
    ``torch.cuda.set_sync_debug_mode`` is CUDA's own detector of the same thing; this one also works on a laptop.
    """
    from helpers.device import accelerator  # noqa: PLC0415 - ground floor

    counter = SyncCounter()
    with contextlib.ExitStack() as stack:
        for name in HOST_READ_METHODS:
            original = getattr(torch.Tensor, name)
            wrapper = counter._wrap(name, original)
            counter._installed[name] = wrapper
            stack.enter_context(mock.patch.object(torch.Tensor, name, wrapper))
        for path, name in SYNCHRONIZE_CALLS:
            owner = _owner(path)
            original = getattr(owner, name, None) if owner is not None else None
            if original is None:
                continue
            shown = f"{path.replace('helpers.device', 'dev')}.{name}()"
            wrapper = counter._wrap_synchronize(shown, original)  # on a class, the event or stream comes first
            try:
                stack.enter_context(mock.patch.object(owner, name, wrapper))
            except (TypeError, AttributeError):  # a type defined in C refuses new attributes: not counted here
                continue
            counter._syncs[(owner, name)] = wrapper
        factory = counter._wrap_tensor_factory(torch.tensor)
        counter._installed_in_torch = factory
        stack.enter_context(mock.patch.object(torch, "tensor", factory))
        counter._places = stack.enter_context(_Places(counter, accelerator_here=accelerator() is not None))
        counter._mode = stack.enter_context(_Watch(counter))
        counter._fingerprints = _fingerprints(counter)
        yield counter
        counter._still_watching = counter.watching()


# --------------------------------------------------------------------------- the stand-in stream


@dataclass
class QueuedRun:
    """One run of :func:`queued_steps`: its wall time and, per lane, the (start, end) of each piece of work."""

    seconds: float
    lanes: dict[str, list[tuple[float, float]]]
    host_wait_s: float


def queued_steps(device_work: Callable[[], Any], host_work: Callable[[], Any], steps: int,
                 sync_every_step: bool) -> QueuedRun:
    """``steps`` steps of a training-like loop on a stand-in stream, timed and recorded as a timeline.

    Each step does ``host_work()`` on this thread (preparing the next batch, Python bookkeeping) and queues
    ``device_work()`` on a :class:`~helpers.benchmark.BackgroundQueue`, whose thread runs it later as a GPU
    would. With ``sync_every_step`` the host waits for the queue after queueing (what ``loss.item()`` does),
    so host work and device work take turns; without, the host waits once, at the end, and the two overlap.
    """
    lanes: dict[str, list[tuple[float, float]]] = {"host": [], "stream": [], "host waits": []}
    origin = time.perf_counter()

    def timed(lane: str, fn: Callable[[], Any]) -> Callable[[], None]:
        def run() -> None:
            start = time.perf_counter() - origin
            fn()
            lanes[lane].append((start, time.perf_counter() - origin))
        return run

    with BackgroundQueue() as stream:
        for _ in range(steps):
            timed("host", host_work)()
            stream.submit(timed("stream", device_work))
            if sync_every_step:
                timed("host waits", stream.synchronize)()
        timed("host waits", stream.synchronize)()
        seconds = time.perf_counter() - origin
    waited = sum(b - a for a, b in lanes["host waits"])
    return QueuedRun(seconds, lanes, waited)


def size_for_balance(seconds_per_step: Callable[[int], float], sizes: Sequence[int],
                     at_least: float = 1.25) -> tuple[int, float, float]:
    """The first of ``sizes`` (growing) at which a step's device time has caught up with its host time.

    Returns ``(size, host_s, step_s)``. Why: a host sync in every step forbids the overlap of the host's work
    (Python, launches, preparing the next batch) and the device's, so it costs about min(host time, device time)
    a step, plus one round trip between host and GPU: it shows best where the two are about equal. A demo sized for a
    laptop is launch-bound on a GPU (device time far below host time), where a sync costs little more than the
    round trip. ``seconds_per_step(size)`` must time a loop with **no** sync in its steps, which takes about
    max(host, device) a step: at ``sizes[0]`` the device's share is taken as negligible, so that time is the
    host's (``host_s``); the first size whose step takes ``at_least`` times as long is one where the device's
    time has passed the host's. With none, the last size.
    """
    if not sizes:
        raise ValueError("size_for_balance needs at least one size")
    host = step = seconds_per_step(sizes[0])
    for size in sizes[1:]:
        step = seconds_per_step(size)
        if step >= at_least * host:
            return size, host, step
    return sizes[-1], host, step


# --------------------------------------------------------------------------- torch.compile


def compiler_missing(device: str | torch.device = "cpu") -> str | None:
    """Why ``torch.compile``'s default backend (inductor) cannot generate code here, or None when it can.

    On a CPU inductor writes C++ and needs a C++ compiler; on a CUDA GPU it writes Triton kernels and
    needs the ``triton`` package (installed with CUDA builds of torch on Linux).
    """
    device = torch.device(device)
    if device.type == "cuda":
        try:
            import triton  # noqa: F401
        except ImportError:
            return "inductor writes Triton kernels for a CUDA GPU, and the triton package is not installed"
        return None
    if sys.platform == "win32":
        return "inductor's CPU backend needs the MSVC C++ compiler on Windows; this course does not set it up there"
    from torch._inductor import config  # noqa: PLC0415 - imported only when compiling is asked about

    cxx = config.cpp.cxx[-1] if isinstance(config.cpp.cxx, tuple) else config.cpp.cxx
    if cxx and shutil.which(cxx):
        return None
    for candidate in ("g++", "clang++", "c++"):
        if shutil.which(candidate):
            return None
    return "inductor's CPU backend writes C++ and needs a C++ compiler (g++ or clang++), and none is on PATH"


@dataclass
class CompileTimings:
    """What compiling cost once and what it does per call, each call timed on the same inputs."""

    first_call_s: float  # tracing, compiling and one call
    eager: Timing
    compiled: Timing
    compiled_fn: Any = field(default=None, repr=False, compare=False)  # what torch.compile returned

    @property
    def compile_s(self) -> float:
        """The first compiled call less one steady compiled call: the one-off cost of compiling."""
        return max(self.first_call_s - self.compiled.median, 0.0)


def compile_timings(fn: Callable[..., Any], args: Sequence[Any], device: str | torch.device = "cpu", *,
                    repeats: int = 15, calls: int = 20, label: str = "", **compile_kwargs: Any) -> CompileTimings:
    """Compile ``fn`` with ``torch.compile(**compile_kwargs)``, time its first call, then time eager and
    compiled calls interleaved (``repeats`` rounds of ``calls`` calls each, the device synchronised around
    every round), so a change in the machine's load hits both alike.

    Dynamo's caches are cleared first (``torch._dynamo.reset()``): what is timed is a first compile of ``fn``
    for these inputs. Without it, a second call for the same code on a new shape would be a *recompile*, which
    marks the changed dimension dynamic (a different kernel), and one with another ``mode`` a recompile for the
    new backend."""
    import torch._dynamo  # noqa: PLC0415 - heavy, imported when asked

    from helpers.device import synchronize  # noqa: PLC0415 - ground floor

    torch._dynamo.reset()
    device = torch.device(device)
    compiled = torch.compile(fn, **compile_kwargs)
    synchronize(device)
    start = time.perf_counter()
    compiled(*args)
    synchronize(device)
    first = time.perf_counter() - start
    for _warm in range(3):  # warm both (a second compiled call may still specialise)
        fn(*args)
        compiled(*args)
    rounds: dict[str, list[float]] = {"eager": [], "compiled": []}
    for _round in range(repeats):
        for name, f in (("eager", fn), ("compiled", compiled)):
            synchronize(device)
            start = time.perf_counter()
            for _call in range(calls):
                f(*args)
            synchronize(device)
            rounds[name].append((time.perf_counter() - start) / calls)
    eager, compiled = ((_("{label}, eager").format(label=label), _("{label}, compiled").format(label=label)) if label
                       else (_("eager"), _("compiled")))
    return CompileTimings(first, Timing.from_times(rounds["eager"], device, label=eager),
                          Timing.from_times(rounds["compiled"], device, label=compiled), compiled_fn=compiled)


@dataclass(frozen=True)
class KernelCount:
    """Per call, from a profiler trace: kernels the GPU ran, and launches the host made for them."""

    kernels: float
    launches: float


#: the host-side calls that put work on a GPU's queue: a kernel launch (the runtime's ``cudaLaunchKernel``,
#: ``cudaLaunchKernelExC``, the driver's ``cuLaunchKernel``/``cuLaunchKernelEx`` that Triton uses) or the replay
#: of a whole CUDA graph (``cudaGraphLaunch``)
_LAUNCH = re.compile(r"^cu(da)?Launch\w*Kernel|^cu(da)?GraphLaunch")


def count_kernels(trace: str | Path | Mapping, calls: int = 1) -> KernelCount:
    """Kernels and launches per call in a profiler's Chrome trace of ``calls`` calls.

    Kernels are the device's complete events of ``cat`` "kernel" (a CUDA graph's replay still runs, and lists,
    each of its kernels); launches are the host's ``cuda_runtime``/``cuda_driver`` events that launch a kernel
    or replay a graph (:data:`_LAUNCH`), so a graph's replay is one launch however many kernels it holds.
    """
    import json  # noqa: PLC0415

    data = trace if isinstance(trace, Mapping) else json.loads(Path(trace).read_text())
    events = [e for e in data.get("traceEvents", []) if e.get("ph") == "X"]
    kernels = sum(e.get("cat") == "kernel" for e in events)
    launches = sum(e.get("cat") in ("cuda_runtime", "cuda_driver") and bool(_LAUNCH.search(str(e.get("name", ""))))
                   for e in events)
    return KernelCount(kernels / calls, launches / calls)


def kernels_per_call(fn: Callable[..., Any], args: Sequence[Any], device: str | torch.device,
                     calls: int = 5) -> KernelCount:
    """Profile ``calls`` calls of ``fn(*args)`` on a CUDA ``device`` (after one untimed call) and count, per call,
    the kernels the GPU ran and the launches the host made (:func:`count_kernels`). The profiler's C++ lines on
    file descriptor 2 are captured (``helpers.memory.native_stderr``), not shown."""
    import tempfile  # noqa: PLC0415

    from torch.profiler import ProfilerActivity, profile  # noqa: PLC0415

    from helpers.device import synchronize  # noqa: PLC0415 - ground floor
    from helpers.memory import native_stderr  # noqa: PLC0415

    device = torch.device(device)
    fn(*args)
    synchronize(device)
    with native_stderr(), profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _call in range(calls):
            fn(*args)
        synchronize(device)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(path))
        return count_kernels(path, calls)


@dataclass(frozen=True)
class GraphBreaks:
    graphs: int
    breaks: int
    reasons: list[str]

    def __str__(self) -> str:
        lines = [f"{self.graphs} graph(s), {self.breaks} graph break(s)"]
        lines += [f"  break {i}: {reason}" for i, reason in enumerate(self.reasons, 1)]
        return "\n".join(lines)


#: the first line of a Dynamo break reason that names no cause a reader knows, and what it means
_PLAIN_REASONS = {"generic_jump": "Python control flow (if/while) on a tensor's value"}


def graph_breaks(fn: Callable[..., Any], *args: Any) -> GraphBreaks:
    """Where Dynamo (``torch.compile``'s front end) had to split ``fn`` into several graphs, and why.

    ``torch._dynamo.explain`` traces without generating code, so it is quick and needs no compiler. Each
    reason is cut to its first line, which names the cause (a ``.item()``, a ``print``, Python control flow
    on a tensor's value), with the line of ``fn`` it happened at. Dynamo's own warnings about the breaks
    are silenced while it traces: the reasons returned say the same.
    """
    import logging  # noqa: PLC0415

    import torch._dynamo  # noqa: PLC0415 - heavy, imported when asked

    torch._dynamo.reset()
    dynamo_log = logging.getLogger("torch._dynamo")
    level = dynamo_log.level
    dynamo_log.setLevel(logging.ERROR)
    try:
        explained = torch._dynamo.explain(fn)(*args)
    finally:
        dynamo_log.setLevel(level)
        torch._dynamo.reset()
    reasons = []
    for b in explained.break_reasons:
        text = str(getattr(b, "reason", b)).strip()
        first = next((line.strip() for line in text.splitlines() if line.strip()), text)[:160]
        first = next((f"{plain} ({first})" for key, plain in _PLAIN_REASONS.items() if first.startswith(key)), first)
        user = getattr(b, "user_stack", None)
        where = ""
        if user:
            name = user[-1].name
            name = getattr(fn, "__name__", name) if name.startswith("torch_dynamo_resume_in_") else name
            where = f" (line {user[-1].lineno} of {name}())"
        reasons.append(first + where)
    return GraphBreaks(explained.graph_count, explained.graph_break_count, reasons)


# --------------------------------------------------------------------------- overlap, read from a trace


def _intervals(events: Sequence[Mapping[str, Any]], keep: Callable[[Mapping[str, Any]], bool]) -> list[list[float]]:
    """The merged (start, end) microsecond intervals of the complete events ``keep`` accepts."""
    spans = sorted((float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0.0)))
                   for e in events if e.get("ph") == "X" and "ts" in e and keep(e))
    merged: list[list[float]] = []
    for a, b in spans:
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return merged


@dataclass(frozen=True)
class Overlap:
    copy_s: float
    kernel_s: float
    both_s: float

    @property
    def fraction(self) -> float:
        """The share of the copies' time during which a kernel also ran (0 = none overlapped)."""
        return self.both_s / self.copy_s if self.copy_s > 0 else float("nan")


def copy_compute_overlap(trace: str | Path | Mapping) -> Overlap:
    """How long host-to-device copies and kernels ran at the same time, from a profiler's Chrome trace.

    The trace's device events are kernels (``cat`` "kernel") and copies (``cat`` "gpu_memcpy"); the
    copies that count are host-to-device ones (``HtoD`` in their name). Overlap is the length of the
    intersection of the two merged sets of intervals.
    """
    import json  # noqa: PLC0415

    data = trace if isinstance(trace, Mapping) else json.loads(Path(trace).read_text())
    events = data.get("traceEvents", [])
    copies = _intervals(events, lambda e: e.get("cat") == "gpu_memcpy" and "HtoD" in str(e.get("name", "")))
    kernels = _intervals(events, lambda e: e.get("cat") == "kernel")
    both, i, j = 0.0, 0, 0
    while i < len(copies) and j < len(kernels):
        lo, hi = max(copies[i][0], kernels[j][0]), min(copies[i][1], kernels[j][1])
        both += max(0.0, hi - lo)
        if copies[i][1] < kernels[j][1]:
            i += 1
        else:
            j += 1
    return Overlap(sum(b - a for a, b in copies) / 1e6, sum(b - a for a, b in kernels) / 1e6, both / 1e6)


# --------------------------------------------------------------------------- a copy beside compute (CUDA streams)


def copy_and_compute(host_batches: Sequence[torch.Tensor], weight: torch.Tensor, side: Any = None,
                     layers: int = 4) -> torch.Tensor:
    """Copy each (pinned) host batch to the GPU and run ``layers`` matrix products on it; the last result.

    ``side=None``: every copy and every kernel on the current stream, so each batch's copy waits for the
    previous batch's compute. ``side=torch.cuda.Stream(device)`` (on ``weight``'s device): batch i+1 is copied on the side stream while
    batch i computes; the current stream waits for the side stream (``wait_stream``) before it uses a batch,
    and ``record_stream`` tells the caching allocator the batch's memory is used on the current stream.
    A copy runs beside a kernel only from pinned memory with ``non_blocking=True``.
    """
    device = weight.device
    if side is None:
        for h in host_batches:
            x = h.to(device, non_blocking=True)
            for _ in range(layers):
                x = torch.tanh(x @ weight)
        return x
    main = torch.cuda.current_stream(device)
    with torch.cuda.stream(side):
        upcoming = host_batches[0].to(device, non_blocking=True)
    for i in range(len(host_batches)):
        main.wait_stream(side)  # the batch copied on the side stream is complete before compute reads it
        x = upcoming
        x.record_stream(main)
        if i + 1 < len(host_batches):
            with torch.cuda.stream(side):
                upcoming = host_batches[i + 1].to(device, non_blocking=True)  # runs while batch i computes
        for _ in range(layers):
            x = torch.tanh(x @ weight)
    return x
