"""The roofline of this machine, measured: how fast it can compute, how fast it can move bytes, and where a model's
operations sit between the two.

Chapter 10 teaches it (Williams, Waterman and Patterson, "Roofline", CACM 2009). An operation that does ``F`` FLOPs
while moving ``B`` bytes to and from memory has an *arithmetic intensity* of ``F / B`` FLOP/byte; at most it runs at
``min(peak, intensity * bandwidth)``. Below the *ridge* (``peak / bandwidth``) memory limits it, and a faster
multiplier would not help; above it, compute does. Both roofs are measured where the chapter runs: the peak by
chapter 09's matrix-product sweep (``helpers.ladder.measured_peak``), the bandwidth here (:func:`measure_bandwidth`,
through :func:`helpers.benchmark.time_callable`); a vendor's figures (:mod:`helpers.datasheet`) are shown beside
them, labelled as such. :func:`op_points` places each operation of a real step on the plot (:func:`plot`).
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from helpers.benchmark import Timing, time_callable
from helpers.i18n import N_, _
from helpers.units import format_rate

__all__ = ["OPS", "Bandwidth", "OpPoint", "Roof", "measure_bandwidth", "op_points", "plot", "table"]

#: the operations :func:`measure_bandwidth` times, and the tensors each reads and writes per call (each ``nbytes``)
OPS = {"copy": (1, 1), "add": (2, 1)}
#: what one tensor of :func:`measure_bandwidth` holds by default: larger than a GPU's L2 cache (50 MB on an H100),
#: so the bytes come from memory, not from the cache
DEFAULT_NBYTES = {"cuda": 256 * 2**20}
DEFAULT_NBYTES_ELSEWHERE = 64 * 2**20


# --------------------------------------------------------------------------- the bandwidth roof


@dataclasses.dataclass(frozen=True)
class Bandwidth:
    """What one memory-bound operation reached: bytes moved per call over its time."""

    op: str  #: "copy" (``dst.copy_(src)``) or "add" (``torch.add(a, b, out=c)``)
    bytes_moved: int  #: bytes read plus bytes written in one call
    timing: Timing  #: the measurement (its median, spread and blocks)

    @property
    def bytes_per_s(self) -> float:
        """Bytes per second at the median time: the headline figure, robust to an odd slow block."""
        return self.bytes_moved / self.timing.median

    @property
    def low(self) -> float:
        """Bytes per second at the upper quartile of the times: the slower end of the middle half."""
        return self.bytes_moved / _quartiles(self.timing.times)[1]

    @property
    def high(self) -> float:
        """Bytes per second at the lower quartile of the times: the faster end of the middle half."""
        return self.bytes_moved / _quartiles(self.timing.times)[0]

    def __str__(self) -> str:
        return _("{op}: {rate} ({low} to {high}), {moved} bytes per call").format(
            op=self.op, rate=format_rate(self.bytes_per_s, "B/s"), low=format_rate(self.low, "B/s"),
            high=format_rate(self.high, "B/s"), moved=f"{self.bytes_moved:,}")


def _quartiles(times: Sequence[float]) -> tuple[float, float]:
    """The lower and upper quartiles of ``times`` (both the one time when there is one)."""
    if len(times) < 2:
        return times[0], times[0]
    q1, _q2, q3 = statistics.quantiles(times, n=4, method="inclusive")
    return q1, q3


def measure_bandwidth(device: str | torch.device, nbytes: int | None = None, op: str = "copy",
                      min_run_time: float = 0.2, dtype: torch.dtype = torch.float32) -> Bandwidth:
    """The memory bandwidth ``device`` reaches on ``op``, measured: the roofline's sloped roof.

    ``nbytes`` is the size of each tensor (by default larger than a GPU's cache: :data:`DEFAULT_NBYTES`). A copy
    reads one tensor and writes one, so it moves ``2 * nbytes`` per call; an add ``c = a + b`` reads two and writes
    one, ``3 * nbytes`` (:data:`OPS`). Why not the datasheet's figure: it is the memory's clock times its width,
    which no real kernel reaches; what a plain copy reaches is the roof a kernel of your own can hope for."""
    if op not in OPS:
        raise ValueError(_("op must be one of {ops}, not {op!r}").format(ops=", ".join(OPS), op=op))
    device = torch.device(device)
    size = nbytes if nbytes is not None else DEFAULT_NBYTES.get(device.type, DEFAULT_NBYTES_ELSEWHERE)
    n = max(1, int(size) // torch.tensor([], dtype=dtype).element_size())
    reads, writes = OPS[op]
    inputs = [torch.rand(n, device=device).to(dtype) for _ in range(reads)]
    out = torch.empty(n, device=device, dtype=dtype)
    if op == "copy":
        def fn() -> Any:
            return out.copy_(inputs[0])
    else:
        def fn() -> Any:
            return torch.add(inputs[0], inputs[1], out=out)
    moved = (reads + writes) * out.numel() * out.element_size()
    timing = time_callable(fn, device, min_run_time=min_run_time, nbytes=moved, label=f"{op} ({device})")
    return Bandwidth(op, moved, timing)


# --------------------------------------------------------------------------- the roofline


@dataclasses.dataclass(frozen=True)
class Roof:
    """A machine's two roofs: ``peak_flops`` (FLOP/s) and ``bandwidth`` (bytes/s), and what follows from them."""

    peak_flops: float  #: FLOP/s: the flat roof
    bandwidth: float  #: bytes/s: the sloped roof
    label: str = ""  #: what the roofs are ("measured on cuda:0", "H100 SXM datasheet")

    def __post_init__(self) -> None:
        if not (self.peak_flops > 0 and self.bandwidth > 0 and math.isfinite(self.peak_flops)
                and math.isfinite(self.bandwidth)):
            raise ValueError(_("a roof needs a peak and a bandwidth above 0, not {peak} and {bandwidth}").format(
                peak=self.peak_flops, bandwidth=self.bandwidth))

    @property
    def ridge(self) -> float:
        """The intensity (FLOP/byte) where the roofs meet: below it memory limits an operation, above it compute."""
        return self.peak_flops / self.bandwidth

    def attainable(self, intensity: float) -> float:
        """The most FLOP/s an operation of ``intensity`` FLOP/byte can reach here: ``min(peak, intensity * bw)``."""
        return min(self.peak_flops, intensity * self.bandwidth)

    def bound(self, intensity: float) -> str:
        """``"memory"`` below the ridge, ``"compute"`` at or above it: what to make faster first."""
        sys.audit("course.version", "helpers.roofline:Roof.bound")  # the grader: chapter 10's exercise is yours
        return "memory" if intensity < self.ridge else "compute"


# --------------------------------------------------------------------------- the operations of a step


@dataclasses.dataclass(frozen=True)
class OpPoint:
    """One aten operation (or every call of it, grouped) with its work: where it sits on the roofline."""

    name: str  #: the aten operation, e.g. "aten.addmm"
    flops: int  #: floating-point operations (see :func:`op_points` for how they are counted)
    bytes: int  #: bytes its tensors hold: inputs plus outputs
    calls: int = 1  #: calls added up in this point
    flops_per_s: float | None = None  #: a measured rate, when the caller timed it: :func:`plot` places it there

    @property
    def intensity(self) -> float:
        """FLOP per byte moved; 0 for an operation that moves bytes and computes nothing (or does neither)."""
        return self.flops / self.bytes if self.bytes else 0.0


#: operations that compute nothing: they allocate, move, fill or gather bytes (0 FLOPs by the convention of op_points)
DATA_MOVEMENT = frozenset({
    "_to_copy", "copy", "copy_", "clone", "contiguous", "empty", "empty_like", "empty_strided", "new_empty",
    "new_empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like", "new_zeros", "new_ones",
    "new_full", "fill", "fill_", "zero_", "cat", "stack", "index_select", "gather", "embedding", "constant_pad_nd",
    "slice_scatter", "select_scatter", "lift_fresh", "lift_fresh_copy", "detach", "_unsafe_view", "scalar_tensor",
    "arange", "_local_scalar_dense", "split_with_sizes_copy",
})
#: what torch asks a tensor about, not operations: never recorded (FlopCounterMode leaves them alone too)
_METADATA = frozenset({"is_contiguous", "is_strides_like_format", "is_non_overlapping_and_dense", "size", "sym_size",
                       "stride", "sym_stride", "storage_offset", "sym_storage_offset", "numel", "sym_numel", "dim",
                       "layout"})


def _tensors(tree: Any) -> list[torch.Tensor]:
    return [t for t in tree_leaves(tree) if isinstance(t, torch.Tensor)]


def _unique_bytes(tensors: Iterable[torch.Tensor]) -> int:
    """Bytes of ``tensors``, each piece of memory once (an input passed twice is read once)."""
    seen, total = set(), 0
    for t in tensors:
        # the storage's own handle, not data_ptr(): a tensor without real memory (a fake or meta tensor, as on the
        # course's simulated GPU) has no data pointer, and an error here, inside a backward pass, aborts the process
        key = (t.untyped_storage()._cdata, t.storage_offset(), tuple(t.shape), tuple(t.stride()), t.dtype)
        if key not in seen:
            seen.add(key)
            total += t.numel() * t.element_size()
    return total


def _flops(func: Any, args: Any, kwargs: Any, out: Any) -> int:
    """FLOPs of one call: torch's formula where it has one, else the course's convention (see :func:`op_points`)."""
    from torch.utils.flop_counter import flop_registry  # noqa: PLC0415

    packet = func._overloadpacket
    if packet in flop_registry:
        return int(flop_registry[packet](*args, **kwargs, out_val=out))
    if func.is_view or packet.__name__ in DATA_MOVEMENT:
        return 0
    return max((t.numel() for t in _tensors((args, kwargs, out))), default=0)


class _Recorder(TorchDispatchMode):
    """Every aten operation run under it, with its FLOPs and bytes, as :class:`OpPoint` (one per call)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[OpPoint] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        from torch.utils.flop_counter import flop_registry  # noqa: PLC0415

        if func.namespace != "aten" or func._overloadpacket.__name__ in _METADATA:
            return func(*args, **kwargs)  # prim::device and the like: questions about a tensor, not operations
        if func._overloadpacket not in flop_registry:  # a composite: its parts are recorded, as FlopCounterMode does
            with self:
                decomposed = func.decompose(*args, **kwargs)
            if decomposed is not NotImplemented:
                return decomposed
        out = func(*args, **kwargs)
        moved = 0 if func.is_view else _unique_bytes(_tensors((args, kwargs))) + _unique_bytes(_tensors(out))
        self.calls.append(OpPoint(f"aten.{func._overloadpacket.__name__}", _flops(func, args, kwargs, out), moved))
        return out


def op_points(fn: Callable[..., Any], *args: Any, grouped: bool = True) -> list[OpPoint]:
    """Run ``fn(*args)`` (say, a model's forward and backward) and place each aten operation it ran on the roofline.

    FLOPs: torch's own formula where ``torch.utils.flop_counter`` has one (matrix products, ``addmm``, ``bmm``,
    convolutions, attention), so a step's matrix products count exactly as ``FlopCounterMode`` counts them;
    otherwise **one FLOP per element of the largest tensor the operation reads or writes** (an element-wise
    operation, one per output element; a reduction, one per input element); **0** for operations that only move,
    allocate or view bytes (:data:`DATA_MOVEMENT`, and every view). Bytes: every input and output tensor's size,
    each piece of memory once per side (an in-place ``add_`` reads its tensor and writes it: counted twice); a view
    moves nothing. Both are the least an operation must do: a kernel that reads a tensor twice moves more.

    ``grouped`` (the default) adds every call of the same operation into one point (``calls`` says how many), in
    the order each first ran: a step runs ``aten.mm`` many times, and one point per operation keeps the plot
    readable; its intensity is then its total FLOPs over its total bytes. ``grouped=False`` keeps each call."""
    recorder = _Recorder()
    with recorder:
        fn(*args)
    if not grouped:
        return recorder.calls
    totals: dict[str, OpPoint] = {}
    for call in recorder.calls:
        seen = totals.get(call.name)
        totals[call.name] = call if seen is None else dataclasses.replace(
            seen, flops=seen.flops + call.flops, bytes=seen.bytes + call.bytes, calls=seen.calls + 1)
    return list(totals.values())


#: how :func:`table` shows the two answers of :meth:`Roof.bound`, translated
_BOUNDS = {"memory": N_("memory-bound"), "compute": N_("compute-bound")}


def table(points: Iterable[OpPoint], roof: Roof, rows: int = 12) -> str:
    """The ``rows`` operations that move the most bytes, one line each: calls, FLOPs, bytes, intensity and the bound
    ``roof`` gives it. Sorted by bytes because a memory-bound operation's time is its bytes: the top of this table
    is where fusing would save the most."""
    points = sorted(points, key=lambda p: p.bytes, reverse=True)
    header = [_("operation"), _("calls"), "FLOP", _("bytes"), _("FLOP/byte"), _("limited by, here")]
    lines = [[p.name.removeprefix("aten."), str(p.calls), f"{p.flops:.3g}", f"{p.bytes:.3g}", f"{p.intensity:.3g}",
              _(_BOUNDS[roof.bound(p.intensity)]) if p.bytes else "—"] for p in points[:rows]]  # a view: free
    widths = [max(len(row[i]) for row in [header, *lines]) for i in range(len(header))]
    text = ["  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths)))
            for row in [header, *lines]]
    if len(points) > rows:
        text.append(_("... and {n} more operations").format(n=len(points) - rows))
    return "\n".join(text)


# --------------------------------------------------------------------------- the plot

_INTENSITY = N_("arithmetic intensity (FLOP/byte)")
_RATE = N_("attainable FLOP/s")


def plot(roof: Roof, points: Iterable[OpPoint] = (), *, title: str | None = None, ax: Any = None) -> Any:
    """A log-log roofline of ``roof`` with each of ``points`` on it; returns the axes (``ax.figure`` is the figure).

    The sloped roof is the bandwidth, the flat one the peak, the dotted line the ridge between them. A point sits
    at its intensity and, when it was timed (``flops_per_s``), at the rate it reached, else at the most it *could*
    reach (:meth:`Roof.attainable`): its height under the roof is what is left to gain. A point that computes
    nothing (intensity 0) has no place on a log axis and is left out."""
    if ax is None:
        # matplotlib only when a plot is drawn: importing it reads the system's fonts (fc-list), whose complaint on
        # stderr in the grading sandbox costs a grade cell its points under nbgrader, and a check that only asks
        # Roof.bound (chapter 10's exercise) must not pay for a plot
        from helpers.plots import new_figure  # noqa: PLC0415

        _fig, ax = new_figure(width=6.0, height=4.0)
    points = [p for p in points if p.intensity > 0]
    xs = [p.intensity for p in points] + [roof.ridge]
    lo, hi = min(xs) / 4, max(xs) * 4
    ax.plot([lo, roof.ridge], [roof.attainable(lo), roof.peak_flops], color="C0",
            label=_("memory: {rate}").format(rate=format_rate(roof.bandwidth, "B/s")))
    ax.plot([roof.ridge, hi], [roof.peak_flops, roof.peak_flops], color="C3",
            label=_("compute: {rate}").format(rate=format_rate(roof.peak_flops)))
    ax.axvline(roof.ridge, color="grey", ls=":", lw=1,
               label=_("ridge: {x:.3g} FLOP/byte").format(x=roof.ridge))
    for i, p in enumerate(points):
        y = p.flops_per_s if p.flops_per_s else roof.attainable(p.intensity)
        ax.scatter([p.intensity], [y], color=f"C{(i % 8) + 1}", zorder=3, s=18)
        ax.annotate(p.name.removeprefix("aten."), (p.intensity, y), textcoords="offset points",
                    xytext=(3, 4 if i % 2 else -9), fontsize=7)  # neighbours alternate above and below
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set(xlabel=_(_INTENSITY), ylabel=_(_RATE),
           title=_(title) if title else _("Roofline: {label}").format(label=roof.label) if roof.label else "")
    ax.legend(fontsize=8, loc="lower right")
    return ax
