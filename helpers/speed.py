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
import functools
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
    "aten.bincount": N_("bincount (its output's size depends on the largest value)"),
    "aten.unique_consecutive": N_("unique_consecutive (its output's size depends on the values)"),
}
#: histc with min == max (its defaults) reads the tensor's min and max on the host to find its range
HISTC_RANGE = N_("histc without a range (min == max: it reads the tensor's min and max on the host)")
#: what a boolean mask costs where it indexes (a read: the output's size depends on the values) and where it
#: writes a tensor (``t[mask] = other`` runs ``index_put_``, which finds the True places with nonzero). A Python
#: number (or a one-element host tensor) written through a mask on the tensor's device is not that: CUDA turns
#: ``t[mask] = 0`` into ``masked_fill_``, which reads nothing (``canDispatchToMaskedFill``).
MASK_READ = N_("indexing with a boolean mask, t[mask] (its output's size depends on the values)")
MASK_WRITE = N_("a write of a tensor through a boolean mask, t[mask] = other (index_put_ runs nonzero: use "
                "torch.where; t[mask] = 0 with a Python number becomes masked_fill_, which does not sync)")
#: a device tensor indexed with an index made on the host: CUDA copies the index to the device first, blocking
HOST_INDEX = N_("a device tensor indexed with an index made on the host (x[torch.randperm(n)], index_select): the "
                "index is copied to the device with a blocking copy (make it with device=...)")
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
EMPTY_CACHE = N_("{name}, which hands the cached memory back to the driver (cudaFree waits for the whole device)")
SAVE_DEVICE = N_("torch.save of a device tensor, which copies it to the host")
#: not a sync: what raises on a GPU, found on the way (a tensor on the host updated in place from a device tensor)
HOST_OUT_DEVICE_IN = N_("an in-place operation ({name}) on a host tensor with a device tensor as input (e.g. "
                        "total += loss, with total made on the host)")
GRAD_SCALER_READ = N_("GradScaler.step reading its found-inf flags on the host (a fused optimizer avoids it)")
#: every synchronize a program can call by name: (module or class path, attribute)
SYNCHRONIZE_CALLS: tuple[tuple[str, str], ...] = (
    ("torch.cuda", "synchronize"), ("torch.mps", "synchronize"), ("torch.accelerator", "synchronize"),
    ("torch.xpu", "synchronize"), ("torch.cuda.Event", "synchronize"), ("torch.cuda.Stream", "synchronize"),
    ("torch.Event", "synchronize"), ("torch.Stream", "synchronize"), ("helpers.device", "synchronize"),
)
#: the calls that hand cached device memory back to the driver, which waits for the device to finish with it
EMPTY_CACHE_CALLS: tuple[tuple[str, str], ...] = (
    ("torch.cuda", "empty_cache"), ("torch.mps", "empty_cache"), ("torch.accelerator", "empty_cache"),
    ("torch.xpu", "empty_cache"),
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


def _learner_frame() -> Any:
    """The first frame outside torch and this module (the learner's code that asked), or None."""
    frame = sys._getframe(1)
    while frame is not None:
        path = os.path.abspath(frame.f_code.co_filename)
        if path != _HERE and not path.startswith(_TORCH_DIR):
            return frame
        frame = frame.f_back
    return None


def _caller() -> str:
    """The learner's line that made the read."""
    frame = _learner_frame()
    if frame is None:
        return _("torch's own code")
    return _("line {line} of {function}()").format(line=frame.f_lineno, function=frame.f_code.co_name)


def _call_spells_host() -> bool:
    """Whether the learner's call being run writes ``torch.device("cpu")`` out (``torch.device(type="cpu")``,
    ``"cpu:0"`` too).

    Why read the code: on a machine without a GPU the course's ``device`` *is* ``torch.device("cpu")``, so the
    object cannot tell ``x.to(device)`` (stays on the device) from ``x.to(torch.device("cpu"))`` (a copy to the
    host on a GPU); only the spelling can. It is read from the bytecode of the learner's frame (a ``device`` load
    followed by the constant ``"cpu"`` inside the running call's span), which needs no source file."""
    frame = _learner_frame()
    return frame is not None and _spells_host_at(frame.f_code, frame.f_lasti)


def _within(inner: Any, outer: Any) -> bool:
    if inner is None or None in (inner.lineno, inner.end_lineno, inner.col_offset, inner.end_col_offset):
        return False
    return ((inner.lineno, inner.col_offset) >= (outer.lineno, outer.col_offset)
            and (inner.end_lineno, inner.end_col_offset) <= (outer.end_lineno, outer.end_col_offset))


@functools.lru_cache(maxsize=1024)
def _spells_host_at(code: Any, offset: int) -> bool:
    import dis  # noqa: PLC0415

    instructions = list(dis.get_instructions(code))
    here = next((i for i in instructions if i.offset == offset), None)
    if here is None or not _within(here.positions, here.positions):
        return False
    inside = [i for i in instructions if i.offset <= offset and _within(i.positions, here.positions)]
    return any(load.argval == "device" and load.opname.startswith("LOAD") and const.opname == "LOAD_CONST"
               and isinstance(const.argval, str) and re.fullmatch(r"cpu(:\d+)?", const.argval) is not None
               for load, const in zip(inside, inside[1:]))


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


#: the aten operators that index a tensor with index tensors, and the argument that holds them
_INDEXING = {"aten.index": 1, "aten.index_put_": 1, "aten.index_put": 1, "aten._index_put_impl_": 1,
             "aten.index_select": 2}


class _Watch(TorchDispatchMode):
    """Sees the aten operators that hand a value to the host, whichever Python call asked for them."""

    def __init__(self, counter: "SyncCounter") -> None:
        super().__init__()
        self.counter = counter

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket._qualified_op_name.replace("::", ".")
        kind = self._kind(name, args, kwargs or {})
        if kind is not None and args and isinstance(args[0], torch.Tensor) \
                and self.counter._on_host(args[0]):
            kind = None  # a tensor that lives on the host: reading it waits for no GPU
        if kind is not None:
            self.counter._record(kind, read=kind != HOST_INDEX)
        result = func(*args, **(kwargs or {}))
        if self.counter._places is not None:
            self.counter._places.mark_made(result)  # what backward and torch's own code make, too
        return result

    def _kind(self, name: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str | None:
        """What this operator makes the host wait for, were its first argument on the device; None: nothing."""
        kind = SYNC_OPS.get(name)
        if kind is not None:
            return kind
        if name == "aten.histc":
            low, high = (list(args[2:4]) + [kwargs.get("min", 0), kwargs.get("max", 0)][len(args[2:4]):])
            return HISTC_RANGE if low == high else None
        where = _INDEXING.get(name)
        if where is None or len(args) <= where:
            return None
        indices = args[where] if isinstance(args[where], (list, tuple)) else [args[where]]
        if any(isinstance(i, torch.Tensor) and i.dim() > 0 and self.counter._on_host(i) for i in indices):
            return HOST_INDEX  # on the device itself, a host index must be copied there first
        if not _bool_index(indices):
            return None
        if name == "aten.index":
            return MASK_READ
        return None if self.counter._filling else MASK_WRITE


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
    is the host on every machine), with ``device="cpu"`` or ``torch.device("cpu")`` written out, by
    ``torch.from_numpy``, or by ``.cpu()``/``.to("cpu")`` lives on the host, and so does whatever is computed
    from host tensors alone; everything else (tensors made with ``device=device``, or computed from a device
    tensor) lives on the device. Tensors that existed before the block are the device's, unless the caller
    named the ones that are (``device_tensors``: the batches and the model it hands in); then every other
    tensor that existed before is the host's (a buffer made in another cell, ``BUF = torch.zeros(64)``). A copy
    between the two without ``non_blocking=True`` (``.to``, ``copy_``, ``t[i] = value``, ``torch.tensor(data,
    device=...)``) is a ``cudaMemcpy`` followed by a stream synchronize on a GPU (``at::cuda::memcpy_and_sync``),
    pinned memory or not. ``torch.device("cpu")`` is read as the host only where the call writes it out
    (:func:`_call_spells_host`): on a CPU-only machine the course's ``device`` is that same object.
    """

    def __init__(self, counter: "SyncCounter", accelerator_here: bool, device_tensors: Any = None) -> None:
        super().__init__()
        self.counter = counter
        self.accelerator_here = accelerator_here
        self.host: dict[int, Any] = {}
        #: with ``device_tensors``: those tensors, and every tensor the block made (so the rest existed before)
        self.device = None if device_tensors is None else {id(t): weakref.ref(t) for t in _tensors_of(device_tensors)}
        self.made: dict[int, Any] = {}

    # -- places
    def on_host(self, t: torch.Tensor) -> bool:
        """A tensor on an accelerator is on the device; a CPU tensor is on the host where it was made so, or (with
        ``device_tensors``) where it existed before the block and was not named as the device's."""
        if t.device.type != "cpu":
            return False
        if _holds(self.host, t):
            return True
        return self.device is not None and not _holds(self.device, t) and not _holds(self.made, t)

    def _mark_host(self, t: torch.Tensor) -> None:
        # a plain weak reference, no callback: a callback on a tensor runs inside its deallocation, which crashed a
        # later, unrelated call under torch's FakeTensorMode (the fake CUDA check); a dead entry reads as None
        self.host[id(t)] = weakref.ref(t)

    def mark_made(self, outputs: Any) -> None:
        """Note the tensors an operator of the block made (only where tensors from before are told apart)."""
        if self.device is None:
            return
        from torch.utils._pytree import tree_leaves  # noqa: PLC0415

        if len(self.made) > 100_000:  # a long block: forget the dead
            self.made = {k: ref for k, ref in self.made.items() if ref() is not None}
        for t in tree_leaves(outputs):
            if isinstance(t, torch.Tensor):
                self.made[id(t)] = weakref.ref(t)

    def __exit__(self, *exc: Any) -> Any:
        self.host.clear()
        return super().__exit__(*exc)

    @staticmethod
    def names_host(device: Any) -> bool:
        """Whether a ``device=`` argument names the host in a way no machine reads as its accelerator."""
        if isinstance(device, torch.device):
            return device.type == "cpu" and _call_spells_host()
        return _spelled_host(device)

    def _target_on_host(self, source: torch.Tensor, args: Sequence[Any], kwargs: Mapping[str, Any]) -> bool | None:
        """Where ``source.to(*args, **kwargs)`` puts its result: True the host, False the device, None unchanged."""
        target = kwargs.get("device", args[0] if args else None)
        if isinstance(target, torch.Tensor):
            return self.on_host(target)
        if isinstance(target, str):
            return _spelled_host(target)
        if isinstance(target, torch.device):  # torch.device("cpu") is the host when it takes a tensor off a GPU
            return target.type == "cpu" and (source.device.type != "cpu" or self.names_host(target))
        if isinstance(target, int) and not isinstance(target, bool):
            return False  # .to(0): cuda:0
        return None

    # -- the calls
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        to_host = self._target_on_host(args[0], args[1:], kwargs) \
            if name == "to" and args and isinstance(args[0], torch.Tensor) else None
        kind = self._wait(name, args, kwargs, to_host) if self.counter._depth == 0 else None
        if kind is not None:
            self.counter._record(kind, read=kind == TO_HOST)
        if self.counter._depth == 0 and self._raises_on_device(name, args, kwargs):
            self.counter._refuse(HOST_OUT_DEVICE_IN, name)
        filling = name == "__setitem__" and len(args) > 2 and self._fills(args[0], args[2])
        self.counter._filling += filling
        try:
            result = func(*args, **kwargs)
        finally:
            self.counter._filling -= filling
        if result is (args[0] if args else None) and isinstance(result, torch.Tensor) and not self.on_host(result) \
                and (name == "cpu" or to_host):
            result = result.view_as(result)  # here it is already on the CPU and comes back as itself; a GPU hands
            # back a copy on the host, a tensor of its own, which is what gets marked (and read for free) below
        if name == "__iter__" and args and isinstance(args[0], torch.Tensor):
            rows = list(result)  # the rows, placed like any result computed from the tensor (an iterator hides them)
            self._place_result(name, args, kwargs, rows, to_host)
            return iter(rows)
        self._place_result(name, args, kwargs, result, to_host)
        return result

    def _fills(self, target: Any, value: Any) -> bool:
        """Whether ``target[mask] = value`` is a masked fill on a GPU (a number, or one element on the host, written
        into a device tensor), which finds no True places on the host."""
        if isinstance(value, torch.Tensor):
            return value.numel() == 1 and self.on_host(value)
        return isinstance(value, (int, float, complex)) and isinstance(target, torch.Tensor)

    def _raises_on_device(self, name: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> bool:
        """Whether the call writes into a host tensor (in place, or ``out=``) from a device tensor, which CUDA
        refuses (a CPU output with a CUDA input; only a copy may cross)."""
        from torch.utils._pytree import tree_leaves  # noqa: PLC0415

        out = kwargs.get("out")
        if isinstance(out, torch.Tensor):
            target, inputs = out, [*args, *(v for k, v in kwargs.items() if k != "out")]
        elif args and isinstance(args[0], torch.Tensor) and (name in _IN_PLACE_OPERATORS or (
                name.endswith("_") and not name.startswith("_") and name not in _IN_PLACE_ACROSS)):
            target, inputs = args[0], [*args[1:], *kwargs.values()]
        else:
            return False
        return self.on_host(target) and any(
            isinstance(t, torch.Tensor) and not self.on_host(t) for t in tree_leaves(inputs))

    def _wait(self, name: str, args: Sequence[Any], kwargs: Mapping[str, Any], to_host: bool | None) -> str | None:
        """The kind of wait this call makes on a GPU, or None."""
        blocking = not kwargs.get("non_blocking") and not any(a is True for a in args[2:4])
        if name == "to" and blocking:
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
        if device is None or isinstance(data, torch.Tensor) or self.names_host(device):
            return False
        return not (self.accelerator_here and torch.device(device).type == "cpu")

    def _place_result(self, name: str, args: Sequence[Any], kwargs: Mapping[str, Any], result: Any,
                      to_host: bool | None) -> None:
        from torch.utils._pytree import tree_leaves  # noqa: PLC0415

        outputs = [t for t in tree_leaves(result) if isinstance(t, torch.Tensor)]
        if not outputs:
            return
        self.mark_made(outputs)
        inputs = [t for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
        if name in _FACTORIES:
            host = kwargs.get("device") is None or self.names_host(kwargs.get("device"))
        elif name == "cpu":
            host = True
        elif name == "to" and to_host is not None:
            host = to_host
        elif name in ("cuda", "numpy"):
            host = False
        else:
            host = bool(inputs) and all(self.on_host(t) for t in inputs)
        if host:
            for t in outputs:
                if not any(t is i for i in inputs):  # .cpu() of a host tensor returns it: it stays where it was
                    self._mark_host(t)


#: Python's in-place operators on a tensor (``total += loss``); the other in-place calls end in ``_`` (``add_``)
_IN_PLACE_OPERATORS = frozenset({"__iadd__", "__isub__", "__imul__", "__itruediv__", "__ifloordiv__", "__imod__",
                                 "__ipow__", "__imatmul__", "__iand__", "__ior__", "__ixor__", "__ilshift__",
                                 "__irshift__"})
#: in-place calls that may take a tensor from another device: a copy, or what reads no input values
_IN_PLACE_ACROSS = frozenset({"copy_", "set_", "requires_grad_", "retain_grad_", "share_memory_", "detach_",
                              "resize_", "resize_as_", "zero_", "record_stream_", "fill_", "pin_memory_"})


def _tensors_of(obj: Any, limit: int = 100_000) -> list[torch.Tensor]:
    """The tensors ``obj`` holds: itself, a module's parameters and buffers, an optimizer's parameters and state,
    and those inside lists, tuples, sets and dicts (nested)."""
    found: list[torch.Tensor] = []
    stack, seen = [obj], set()
    while stack and len(found) < limit:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, torch.Tensor):
            found.append(item)
        elif isinstance(item, torch.nn.Module):
            stack.extend(item.parameters())
            stack.extend(item.buffers())
        elif isinstance(item, torch.optim.Optimizer):
            stack.extend(item.param_groups)
            stack.extend(item.state.values())
        elif isinstance(item, Mapping):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple, set, frozenset)):
            stack.extend(item)
    return found


def _holds(places: Mapping[int, Any], t: torch.Tensor) -> bool:
    ref = places.get(id(t))
    return ref is not None and ref() is t


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
    #: not syncs: the places that would raise on a GPU (a host tensor updated in place from a device tensor)
    raises: list[HostSync] = field(default_factory=list)
    _depth: int = 0
    _filling: int = 0  # inside ``t[mask] = number``: a masked fill on a GPU, which reads nothing
    _installed: dict[str, Callable[..., Any]] = field(default_factory=dict)
    _syncs: dict[tuple[Any, str], Callable[..., Any]] = field(default_factory=dict)
    _mode: Any = None
    _places: Any = None
    _in_torch: dict[str, Callable[..., Any]] = field(default_factory=dict)  # torch functions wrapped (torch.tensor)
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
        wrappers = wrappers and all(getattr(torch, name) is fn for name, fn in self._in_torch.items())
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

    def _refuse(self, kind: str, name: str = "") -> None:
        self.raises.append(HostSync(kind, _caller(), read=False, name=name))

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

    def _wrap_synchronize(self, shown: str, original: Callable[..., Any], kind: str = EXPLICIT_SYNC
                          ) -> Callable[..., Any]:
        """A synchronize (or ``empty_cache``, ``kind``) that is counted; where this machine has no such device it
        waits for nothing and returns (on a GPU it would wait), so the count goes on instead of the program
        stopping at "no CUDA"."""

        def synchronize(*args: Any, **kwargs: Any) -> Any:
            if self._depth == 0:
                self.events.append(HostSync(kind, _caller(), read=False, name=shown))
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

    def _wrap_host_factory(self, original: Callable[..., Any]) -> Callable[..., Any]:
        """``torch.from_numpy``, ``torch.frombuffer``: a tensor on the host, made where no mode sees it."""

        def made_on_host(*args: Any, **kwargs: Any) -> Any:
            result = original(*args, **kwargs)
            if self._places is not None:
                self._places._mark_host(result)
            return result

        made_on_host.__name__ = getattr(original, "__name__", "made_on_host")
        return made_on_host

    def _wrap_save(self, original: Callable[..., Any]) -> Callable[..., Any]:
        """``torch.save``: pickling a device tensor copies its storage to the host (one read per call is counted)."""

        def save(obj: Any, *args: Any, **kwargs: Any) -> Any:
            if self._depth == 0 and any(not self._on_host(t) for t in _tensors_of(obj)):
                self._record(SAVE_DEVICE)
            self._depth += 1
            try:
                return original(obj, *args, **kwargs)
            finally:
                self._depth -= 1

        return save


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
def count_host_syncs(device_tensors: Any = None) -> Iterator[SyncCounter]:
    """Count every place the host would wait for a GPU in the block, and the line that asked.

    Four layers see them: a dispatch mode sees the operators that hand a value to the host (``.item()``,
    ``bool(t)``, ``nonzero``, ``t[mask]``, ``t[mask] = other_tensor``); the Tensor methods that copy to the host
    (``.tolist()``, ``.cpu()``, ``print(t)``) and ``torch.tensor`` (which reads a list of tensors element by
    element) are wrapped for the block's duration; a function mode (:class:`_Places`) knows where each tensor
    would live on a GPU machine and sees the blocking copies between host and device (``.to("cpu")``,
    ``host_buffer[i] = loss``, ``torch.tensor(x, device=device)``); and every ``synchronize()`` a program can
    call (``torch.cuda``, ``torch.mps``, ``torch.accelerator``, events, streams) is counted where it is called,
    and so are ``empty_cache()`` and ``torch.save`` of a device tensor. A read of a tensor that lives on the host
    waits for nothing and is not counted. On a GPU, ``torch.cuda.set_sync_debug_mode`` is CUDA's own detector of
    the same thing; this one also works on a laptop.

    ``device_tensors`` (tensors, modules, optimizers, or lists, tuples and dicts of them): what stands for the
    device among the tensors that exist before the block, on a machine whose device is the CPU; every other
    tensor made before the block is then the host's (a check hands in its batches and model, and a learner's
    buffer made in another cell is on the host). Left out, everything made before the block is the device's.
    What would raise on a GPU (a host tensor updated in place from a device tensor) is kept in
    :attr:`SyncCounter.raises`, apart from the syncs.
    """
    from helpers.device import accelerator  # noqa: PLC0415 - ground floor

    counter = SyncCounter()
    with contextlib.ExitStack() as stack:
        for name in HOST_READ_METHODS:
            original = getattr(torch.Tensor, name)
            wrapper = counter._wrap(name, original)
            counter._installed[name] = wrapper
            stack.enter_context(mock.patch.object(torch.Tensor, name, wrapper))
        waits = [(call, EXPLICIT_SYNC) for call in SYNCHRONIZE_CALLS]
        waits += [(call, EMPTY_CACHE) for call in EMPTY_CACHE_CALLS]
        for (path, name), kind in waits:
            owner = _owner(path)
            original = getattr(owner, name, None) if owner is not None else None
            if original is None:
                continue
            shown = f"{path.replace('helpers.device', 'dev')}.{name}()"
            wrapper = counter._wrap_synchronize(shown, original, kind)  # on a class, the event or stream comes first
            try:
                stack.enter_context(mock.patch.object(owner, name, wrapper))
            except (TypeError, AttributeError):  # a type defined in C refuses new attributes: not counted here
                continue
            counter._syncs[(owner, name)] = wrapper
        for name, wrap in (("tensor", counter._wrap_tensor_factory), ("from_numpy", counter._wrap_host_factory),
                           ("frombuffer", counter._wrap_host_factory), ("save", counter._wrap_save)):
            counter._in_torch[name] = wrap(getattr(torch, name))
            stack.enter_context(mock.patch.object(torch, name, counter._in_torch[name]))
        counter._places = stack.enter_context(_Places(counter, accelerator_here=accelerator() is not None,
                                                      device_tensors=device_tensors))
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
                     at_least: float = 1.5, repeats: int = 3) -> tuple[int, float, float]:
    """The first of ``sizes`` (growing) at which a step's device time has caught up with its host time.

    Returns ``(size, host_s, step_s)``. Why: a host sync in every step forbids the overlap of the host's work
    (Python, launches, preparing the next batch) and the device's, so it costs about min(host time, device time)
    a step, plus one round trip between host and GPU: it shows best where the two are about equal. A demo sized for a
    laptop is launch-bound on a GPU (device time far below host time), where a sync costs little more than the
    round trip. ``seconds_per_step(size)`` must time a loop with **no** sync in its steps, which takes about
    max(host, device) a step. While the device's share is negligible that time is the host's: ``host_s`` is the
    least reading of the sizes so far. The first size whose step takes ``at_least`` times as long is one where the
    device's time has passed the host's. With none, the last size.

    Each size is read ``repeats`` times and its least reading kept: another program on a shared machine only ever
    adds time, so the least is the reading closest to the loop's own. A size that seems to cross is read again
    ``repeats`` times, interleaved with ``sizes[0]``, and taken only if it still crosses: one slow moment (a CI run
    with every core busy read 1.5x at a size where the device's share was a hundredth) must not pick a size where the
    device idles, where the demo's syncs would then cost nothing. Why 1.5 and not less: on a shared virtual machine
    the least of six readings of a host-bound step still wandered by up to a third (the simulated T4's host, which
    is this machine's Python), while a width past the balance reads 1.6x or more: each doubling of the width
    doubles the device's share.
    """
    if not sizes:
        raise ValueError("size_for_balance needs at least one size")
    if repeats < 1:
        raise ValueError("size_for_balance needs at least one reading a size")

    def least(size: int) -> float:
        return min(seconds_per_step(size) for _ in range(repeats))

    host = step = least(sizes[0])
    for size in sizes[1:]:
        step = least(size)
        if step < at_least * host:
            host = min(host, step)  # still the host's time: one more reading of it
            continue
        for _ in range(repeats):  # confirm, interleaved with the smallest size, so a change in load hits both
            step = min(step, seconds_per_step(size))
            host = min(host, seconds_per_step(sizes[0]))
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
            return _("inductor writes Triton kernels for a CUDA GPU, and the triton package is not installed")
        return None
    if sys.platform == "win32":
        return _("inductor's CPU backend needs the MSVC C++ compiler on Windows; this course does not set it up there")
    from torch._inductor import config  # noqa: PLC0415 - imported only when compiling is asked about

    cxx = config.cpp.cxx[-1] if isinstance(config.cpp.cxx, tuple) else config.cpp.cxx
    if cxx and shutil.which(cxx):
        return None
    for candidate in ("g++", "clang++", "c++"):
        if shutil.which(candidate):
            return None
    return _("inductor's CPU backend writes C++ and needs a C++ compiler (g++ or clang++), and none is on PATH")


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
