"""Chapter 10's checks: a matrix product's arithmetic intensity against the roofline, and a row softmax in Triton.

The roofline exercise is graded on numbers. When ``matmul_intensity`` is wrong, the check recomputes the intensity
each typical wrong way, and each pair of them (a multiply-add counted as one FLOP, bits for bytes, the output's
write forgotten, 4 bytes whatever the dtype, C read as well as written, bytes per FLOP), and names the mistake that
explains *every* case of the call: one case alone cannot tell "4 bytes an element" from "one FLOP a multiply-add" in
bfloat16, the float32 case beside it can. ``bound`` is judged the same way against the reversed comparison and the
inverted ridge point. At the ridge point itself either verdict is accepted: ``i >= peak / bw`` and
``i * bw >= peak`` may round apart there.

The softmax exercise is graded by behaviour on whatever runs the kernel: a GPU, or Triton's interpreter on a CPU
(``TRITON_INTERPRET=1``: the kernel's loads and stores then go through raw pointers into the tensors' memory, as
on a GPU). So that a wrong kernel can neither crash the grader nor pass by luck:

- the input lies inside a larger buffer: NaN beyond its ends, other finite numbers in the gaps between strided
  rows, so a load past the row's end shows; a second run with other numbers there tells a kernel that reads outside
  its rows from one that is wrong in another way;
- every tensor the learner's code allocates while ``softmax_rows`` runs (``torch.empty``, ``empty_like``,
  ``clone``...) is handed out as a view into a buffer three times its size or more (an ``empty`` one NaN-filled:
  an element never written stays NaN instead of whatever the allocator left): a store past the end lands in the
  check's margin, is seen there, and overwrites nothing else (under the interpreter, an unmasked store past a plain
  ``torch.empty`` corrupts the heap: the process aborts, "double free or corruption", and takes the grader along);
- a ``TorchDispatchMode`` records the aten ops the wrapper runs: an interpreted launch dispatches only ``empty``,
  ``new_empty``, ``set_`` and ``copy_`` (its maths is NumPy's), a compiled one none, so a pointwise or reduction
  op (``exp``, ``amax``, ``sum``, ``div``, ``_softmax``...) means torch computed the answer;
- ``JITFunction.run`` and ``InterpretedFunction.run`` (where every ``kernel[grid](...)`` launch goes) count the
  launches: an answer with none was not computed by a Triton kernel.

The cases (shapes, seeds, strides, scales) stay in the grade cells; nothing here is a hidden case.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from helpers.checks.core import CheckFailed, check, solved, warnings_dropped
from helpers.checks.patching import patched
from helpers.i18n import N_, _

__all__ = ["PREDICTION_SHAPES", "check_bound", "check_intensity", "check_predictions", "check_softmax"]


# --------------------------------------------------------------------------- exercise 1: the roofline


def _number(value: Any) -> float | None:
    """``value`` as a float when it is one finite real number (int, float, NumPy scalar, one-element tensor)."""
    if isinstance(value, (bool, str, bytes)) or value is None:
        return None
    if isinstance(value, torch.Tensor) and (value.numel() != 1 or value.is_complex() or value.dtype == torch.bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


# Each typical mistake of matmul_intensity: one way the count goes wrong (N_: translated where shown).
_HALVED = N_("it counts a multiply-add as one FLOP: each of the m·n·k multiply-adds is two FLOPs, a multiply and an "
             "add (2·m·n·k in all), as peaks are quoted")
_BITS = N_("it counts bits, not bytes: an element of {dtype} is {size} bytes (dtype.itemsize), not {bits}")
_FOUR = N_("it ignores the dtype's size: 4 bytes an element is float32's; bfloat16 and float16 take 2 "
           "(dtype.itemsize)")
_NO_OUTPUT = N_("it forgets the output: C (m·n elements) is written once, and its bytes count with A's and B's")
_C_TWICE = N_("it counts C twice, read and written: C = A @ B only writes C")
_INVERTED = N_("it returns bytes per FLOP: the intensity is FLOPs divided by bytes")


@dataclass(frozen=True)
class _Count:
    """One way to count a product's FLOPs and bytes: the right one, or one with some typical mistakes."""

    halved: bool = False  #: a multiply-add as one FLOP
    bits: bool = False  #: element sizes in bits
    four: bool = False  #: 4 bytes an element, whatever the dtype
    output: int = 1  #: times C's m·n elements are counted (0: forgotten, 2: read and written)
    inverted: bool = False  #: bytes per FLOP

    def intensity(self, m: int, n: int, k: int, dtype: torch.dtype) -> float:
        sys.audit("course.version", "helpers.checks.ch10:_Count.intensity")  # the grader: refused to the learner's code
        flops = (1 if self.halved else 2) * m * n * k
        size = (4 if self.four else dtype.itemsize) * (8 if self.bits else 1)
        moved = (m * k + k * n + self.output * m * n) * size
        return moved / flops if self.inverted else flops / moved

    def mistakes(self, dtype: torch.dtype) -> list[str]:
        """The mistakes in words, for a case of ``dtype``."""
        named = [(self.halved, _(_HALVED)), (self.four, _(_FOUR)), (self.output == 0, _(_NO_OUTPUT)),
                 (self.output == 2, _(_C_TWICE)), (self.inverted, _(_INVERTED)),
                 (self.bits, _(_BITS).format(dtype=_dtype_name(dtype), size=dtype.itemsize, bits=8 * dtype.itemsize))]
        return [text for wrong, text in named if wrong]


def _counts() -> list[_Count]:
    """Every count with one or two typical mistakes, single mistakes first (the likelier explanation)."""
    flags = [{"halved": True}, {"bits": True}, {"four": True}, {"output": 0}, {"output": 2}, {"inverted": True}]
    singles = [_Count(**f) for f in flags]
    pairs = [_Count(**a, **b) for a, b in itertools.combinations(flags, 2) if not set(a) & set(b)]
    return singles + pairs


Case = tuple[int, int, int, torch.dtype]


def _likely(got: Sequence[float], cases: Sequence[Case], dtype: torch.dtype) -> str:
    """" Likely: ..." naming the typical mistakes that give ``got`` in every case (told for a case of ``dtype``),
    or "". Where cases of one dtype cannot tell two apart (4 bytes an element halves bfloat16's intensity, as a
    halved FLOP count does), each is named, joined by "Or:"."""
    fits = [count for count in _counts()
            if all(math.isclose(g, count.intensity(*case), rel_tol=1e-6) for g, case in zip(got, cases))]
    fewest = [count for count in fits if len(count.mistakes(dtype)) == min(len(c.mistakes(dtype)) for c in fits)]
    explanations = [(" " + _("And:") + " ").join(f"{why}." for why in count.mistakes(dtype)) for count in fewest]
    return " " + _("Likely:") + " " + (" " + _("Or:") + " ").join(explanations) if explanations else ""


def _intensities(matmul_intensity: Callable[..., Any], cases: Sequence[Case]) -> list[float]:
    """The learner's intensity of each case, each checked to be a number."""
    got = []
    for m, n, k, dtype in cases:
        value = solved(matmul_intensity, m, n, k, dtype)
        number = _number(value)
        check(number is not None, _("matmul_intensity({m}, {n}, {k}, {dtype}) returned {value!r}; expected a number "
                                    "(FLOP per byte).").format(m=m, n=n, k=k, dtype=dtype, value=value))
        got.append(number)
    return got


def _intensity_failure(got: Sequence[float], cases: Sequence[Case]) -> str | None:
    """What is wrong with the intensities ``got`` of ``cases``, in words; None when all are right."""
    right = _Count()
    wrong = [(g, case) for g, case in zip(got, cases) if not math.isclose(g, right.intensity(*case), rel_tol=1e-6)]
    if not wrong:
        return None
    g, (m, n, k, dtype) = wrong[0]
    return _("matmul_intensity({m}, {n}, {k}, {dtype}): got {got:.6g}, expected {want:.6g} FLOP/byte (A and B read "
             "once, C written once).").format(m=m, n=n, k=k, dtype=dtype, got=g,
                                             want=right.intensity(m, n, k, dtype)) + _likely(got, cases, dtype)


def check_intensity(matmul_intensity: Callable[..., Any], cases: Sequence[Case]) -> None:
    """matmul_intensity(m, n, k, dtype) == 2·m·n·k / ((m·k + k·n + m·n) · dtype.itemsize) for each case
    ``(m, n, k, dtype)``; a wrong answer is named by the typical mistake that explains every case."""
    cases = list(cases)
    failure = _intensity_failure(_intensities(matmul_intensity, cases), cases)
    if failure is not None:
        raise CheckFailed(failure)


_REVERSED = N_("the comparison is reversed: below the ridge point the bandwidth holds an op back ('memory'), at or "
               "above it the arithmetic units do ('compute')")
_RIDGE_INVERTED = N_("the ridge point is inverted: it is peak_flops / bandwidth (FLOP/s over bytes/s: FLOP per byte), "
                     "not bandwidth / peak_flops")
VERDICTS = ("memory", "compute")


def _verdict(intensity: float, ridge: float) -> str:
    sys.audit("course.version", "helpers.checks.ch10:_verdict")  # the grader: refused to the learner's code
    return "compute" if intensity >= ridge else "memory"


def _at_ridge(intensity: float, ridge: float) -> bool:
    """At the ridge point, within rounding: either verdict is accepted there."""
    return math.isclose(intensity, ridge, rel_tol=1e-9)


def _bound_verdicts(bound: Callable[..., Any], intensities: Sequence[float], peak_flops: float,
                    bandwidth: float) -> list[str]:
    """The learner's verdict on each intensity, each checked to be one of the two strings."""
    got = []
    for intensity in intensities:
        value = solved(bound, intensity, peak_flops, bandwidth)
        check(type(value) is str and value in VERDICTS,
              _("bound({i:g}, {peak:.4g}, {bw:.4g}) returned {value!r}; expected exactly the string 'memory' or "
                "'compute' (lower case, no '-bound').").format(i=intensity, peak=peak_flops, bw=bandwidth,
                                                                value=value))
        got.append(value)
    return got


def _bound_failure(got: Sequence[str], intensities: Sequence[float], peak_flops: float,
                   bandwidth: float) -> str | None:
    """What is wrong with the verdicts ``got``, in words; None when all are right."""
    ridge = peak_flops / bandwidth
    wrong = [(g, i) for g, i in zip(got, intensities) if g != _verdict(i, ridge) and not _at_ridge(i, ridge)]
    if not wrong:
        return None
    flip = {"memory": "compute", "compute": "memory"}
    ways = [([_REVERSED], lambda i: flip[_verdict(i, ridge)]), ([_RIDGE_INVERTED], lambda i: _verdict(i, 1 / ridge)),
            ([_REVERSED, _RIDGE_INVERTED], lambda i: flip[_verdict(i, 1 / ridge)])]
    whys = next((whys for whys, way in ways
                 if all(g == way(i) or _at_ridge(i, ridge) for g, i in zip(got, intensities))), [])
    named = (" " + _("And:") + " ").join(f"{_(why)}." for why in whys)
    g, i = wrong[0]
    text = _("bound({i:g}, peak_flops={peak:.4g}, bandwidth={bw:.4g}): got '{got}', expected '{want}' (the ridge "
             "point is {ridge:.4g} FLOP/byte).").format(i=i, peak=peak_flops, bw=bandwidth, got=g,
                                                        want=_verdict(i, ridge), ridge=ridge)
    return text + (" " + _("Likely:") + " " + named if named else "")


def check_bound(bound: Callable[..., Any], peak_flops: float, bandwidth: float,
                intensities: Sequence[float]) -> None:
    """bound(i, peak_flops, bandwidth) is 'compute' at or above the ridge point peak_flops / bandwidth, else
    'memory', for each intensity ``i``; a wrong pattern is named (reversed comparison, inverted ridge)."""
    intensities = list(intensities)
    failure = _bound_failure(_bound_verdicts(bound, intensities, peak_flops, bandwidth), intensities, peak_flops,
                             bandwidth)
    if failure is not None:
        raise CheckFailed(failure)


#: the products the prediction cell asks about: (what it is, m, n, k). With a datasheet's bfloat16 peak and
#: bandwidth (H100 SXM: a ridge point near 295 FLOP/byte) each typical mistake flips at least one verdict: a
#: halved count or 4 bytes an element the 1024 square (341 -> 171), bits for bytes the 4096 square (1365 -> 171),
#: a forgotten output the rank-256 product (228 -> 2048), the reversed comparison or the inverted ridge every one.
PREDICTION_SHAPES: tuple[tuple[str, int, int, int], ...] = (
    (N_("a matrix-vector product (one token through a 4096 x 4096 layer)"), 1, 4096, 4096),
    (N_("a linear layer on a batch of 16 tokens (4096 -> 4096)"), 16, 4096, 4096),
    (N_("a rank-256 product (4096 x 256 by 256 x 4096)"), 4096, 4096, 256),
    (N_("a square product of 512"), 512, 512, 512),
    (N_("a square product of 1024"), 1024, 1024, 1024),
    (N_("a square product of 4096"), 4096, 4096, 4096),
)


def _sheet(part: str) -> Any:
    from helpers import datasheet  # noqa: PLC0415 - the sheets, read when a prediction is checked

    found = next((sheet for _pattern, sheet in datasheet.SHEETS if sheet.part == part), None)
    return found if found is not None else datasheet.lookup(part)


def check_predictions(matmul_intensity: Callable[..., Any], bound: Callable[..., Any], part: str,
                      dtype: torch.dtype, shapes: Sequence[tuple[str, int, int, int]] = PREDICTION_SHAPES) -> None:
    """bound(matmul_intensity(m, n, k, dtype), peak, bandwidth) gives the roofline's verdict for each product of
    ``shapes`` on the datasheet of ``part`` (its dense peak for ``dtype``, its memory bandwidth); a wrong verdict
    is explained by the mistake in the intensity, else in ``bound``."""
    sheet = _sheet(part)
    peak, bandwidth = (None, None) if sheet is None else (sheet.peak(_dtype_name(dtype)), sheet.bandwidth)
    if not peak or not bandwidth:
        raise ValueError(f"check_predictions: no {_dtype_name(dtype)} peak and bandwidth on a datasheet for {part!r}")
    ridge = peak / bandwidth
    cases = [(m, n, k, dtype) for _label, m, n, k in shapes]
    intensities = _intensities(matmul_intensity, cases)
    verdicts = _bound_verdicts(bound, intensities, peak, bandwidth)
    right = [_Count().intensity(*case) for case in cases]
    for (label, m, n, k), got, intensity in zip(shapes, verdicts, right):
        if got == _verdict(intensity, ridge):
            continue
        text = _("{what} (m={m}, n={n}, k={k}, {dtype}) on the {part}: your functions say '{got}', the roofline says "
                 "'{want}' ({intensity:.4g} FLOP/byte against a ridge point of {ridge:.4g} = {peak:.4g} FLOP/s / "
                 "{bw:.4g} bytes/s).").format(what=_(label), m=m, n=n, k=k, dtype=_dtype_name(dtype), part=part,
                                              got=got, want=_verdict(intensity, ridge), intensity=intensity,
                                              ridge=ridge, peak=peak, bw=bandwidth)
        why = _intensity_failure(intensities, cases) or _bound_failure(verdicts, right, peak, bandwidth) or ""
        raise CheckFailed(f"{text} {why}".rstrip())


# --------------------------------------------------------------------------- exercise 2: a softmax kernel


def _kernel_device(device: Any) -> torch.device:
    """Where the kernels run for ``device`` (None: the GPU if there is one), Triton set up for it as the chapter's
    setup cell does (:func:`helpers.kernels.setup`: in a fresh process, such as the grader's, ``tl.max`` and the rest
    of triton.language may have been decorated for the other mode); a failure that says where the exercise can run
    when Triton is missing."""
    from helpers import kernels  # noqa: PLC0415 - Triton is imported only where this exercise is checked

    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    _triton, _tl, state = kernels.setup(device)
    if state.mode == "missing":
        raise CheckFailed(_("Triton is not installed here, so softmax_kernel cannot run: Triton installs on Linux "
                            "x86-64 only (pip install triton; Colab has it). The exercise is graded there; on this "
                            "machine, read it and run the rest of the chapter."))
    return state.device


#: aten ops that only allocate, copy or convert: a wrapper may run them (an interpreted launch itself runs
#: new_empty, set_ and copy_). Every other op tagged pointwise or reduction, and those of _COMPUTING, computes.
_MOVING = frozenset({"clone", "_to_copy", "copy", "copy_", "fill", "fill_", "zero_", "zeros_like", "ones_like",
                     "full_like", "empty_like", "lift_fresh_copy", "constant_pad_nd"})
_COMPUTING = frozenset({"_softmax", "_log_softmax", "_safe_softmax", "softmax", "log_softmax", "special_softmax",
                        "mm", "bmm", "addmm", "matmul", "cumsum", "cumprod", "logcumsumexp", "sort", "topk"})
#: ops whose fresh result the check hands out inside a guarded buffer; those of _EMPTY start NaN
_EMPTY = frozenset({"empty", "empty_like", "new_empty", "empty_strided", "new_empty_strided"})
_FILLED = frozenset({"zeros", "zeros_like", "new_zeros", "full", "full_like", "new_full", "ones", "ones_like",
                     "new_ones", "clone", "_to_copy"})


def _computes(func: Any) -> bool:
    name = func.overloadpacket.__name__
    if name in _MOVING:
        return False
    tagged = any(tag in (torch.Tag.pointwise, torch.Tag.reduction) for tag in getattr(func, "tags", ()))
    return tagged or name in _COMPUTING


#: what fills the margins around a tensor the learner's code allocated: no softmax is negative, and a power of two is
#: exact in every float dtype (NaN would hide a NaN stored past the end)
MARGIN = -1024.0


@dataclass
class _Guarded:
    """A tensor the learner's code allocated, handed out inside ``buffer`` with ``margin`` elements each side."""

    buffer: torch.Tensor
    margin: int
    size: int

    def written_outside(self) -> int:
        """How many elements of the margins no longer hold :data:`MARGIN`: stores past the tensor's ends."""
        outside = torch.cat([self.buffer[:self.margin], self.buffer[self.margin + self.size:]])
        return int((outside != MARGIN).sum())


class _Watch(TorchDispatchMode):
    """While softmax_rows runs: the computing aten ops it ran, and its allocations, each inside a guarded buffer."""

    def __init__(self) -> None:
        super().__init__()
        self.computed: list[str] = []
        self.guarded: list[_Guarded] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        result = func(*args, **(kwargs or {}))
        name = func.overloadpacket.__name__
        if _computes(func):
            self.computed.append(f"torch.ops.aten.{name}")
        if (name in _EMPTY or name in _FILLED) and isinstance(result, torch.Tensor):
            return self._guard(result, fill=name in _FILLED)
        return result

    def _guard(self, tensor: torch.Tensor, fill: bool) -> torch.Tensor:
        if tensor.numel() == 0 or not tensor.is_floating_point() or not tensor.is_contiguous():
            return tensor
        size = tensor.numel()
        margin = max(4096, 2 * size)
        buffer = torch.full((margin + size + margin,), MARGIN, dtype=tensor.dtype, device=tensor.device)
        view = buffer.as_strided(tensor.shape, tensor.stride(), margin)
        if fill:
            view.copy_(tensor)
        else:  # an element the kernel never writes shows as NaN, not as whatever the allocator left
            view.fill_(math.nan)
        self.guarded.append(_Guarded(buffer, margin, size))
        return view


@contextlib.contextmanager
def _launches() -> Iterator[list[str]]:
    """The names of the Triton kernels launched while the block runs (compiled or interpreted)."""
    from triton.runtime.interpreter import InterpretedFunction  # noqa: PLC0415
    from triton.runtime.jit import JITFunction  # noqa: PLC0415

    launched: list[str] = []

    def counting(cls: type) -> Callable[..., Any]:
        original = cls.run

        def run(self: Any, *args: Any, **kwargs: Any) -> Any:
            launched.append(getattr(self, "__name__", type(self).__name__))
            return original(self, *args, **kwargs)

        return run

    with patched([(JITFunction, "run", counting(JITFunction)),
                  (InterpretedFunction, "run", counting(InterpretedFunction))]):
        yield launched


@dataclass
class _Case:
    """x inside a buffer: NaN past both ends, other numbers in the gaps between strided rows."""

    buffer: torch.Tensor
    x: torch.Tensor
    inside: torch.Tensor  #: True on the buffer's elements that are x's

    @classmethod
    def make(cls, shape: tuple[int, int], dtype: torch.dtype, device: Any, seed: int, scale: float,
             row_stride: int | None, offset: int) -> _Case:
        rows, cols = shape
        stride = cols if row_stride is None else row_stride
        if offset + cols > stride:
            raise ValueError(f"check_softmax: offset {offset} + {cols} columns exceed row_stride {stride}")
        margin = 2 * rows * stride + 1024
        g = torch.Generator().manual_seed(seed)
        values = torch.randn(rows, cols, generator=g) * scale
        buffer = torch.full((margin + rows * stride + margin,), math.nan, dtype=dtype, device=device)
        x = buffer[margin:margin + rows * stride].view(rows, stride)[:, offset:offset + cols]
        inside = torch.zeros(buffer.shape, dtype=torch.bool, device=device)
        inside.as_strided(x.shape, x.stride(), x.storage_offset()).fill_(True)
        case = cls(buffer, x, inside)
        x.copy_(values.to(dtype))
        case.surround(seed + 1, gaps_only=True)
        return case

    def surround(self, seed: int, gaps_only: bool = False) -> None:
        """New numbers in the gaps between rows (and, unless ``gaps_only``, past the ends too, where NaN was)."""
        g = torch.Generator().manual_seed(seed)
        start = self.x.storage_offset()
        end = start + (self.x.shape[0] - 1) * self.x.stride(0) + self.x.shape[1]
        noise = (torch.randn(self.buffer.shape, generator=g) * 3).to(self.buffer.dtype).to(self.buffer.device)
        outside = ~self.inside
        if gaps_only:
            outside[:start] = False
            outside[end:] = False
        self.buffer[outside] = noise[outside]


def _tolerance(dtype: torch.dtype) -> dict[str, float]:
    """float32's rounding, or bfloat16's (two of its 8-bit mantissa's steps) for a 16-bit result."""
    return dict(rtol=1.6e-2, atol=1e-5) if dtype in (torch.bfloat16, torch.float16) else dict(rtol=1e-5, atol=1e-6)


def _close(got: torch.Tensor, want: torch.Tensor, equal_nan: bool = False) -> bool:
    """Within the rounding of ``want``'s dtype."""
    return bool(torch.allclose(got.float(), want.float(), equal_nan=equal_nan, **_tolerance(want.dtype)))


def _softmax_of(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return torch.softmax(x.float(), dim=1).to(dtype)


_PADDED_ZERO = N_("the lanes past the row's end were loaded as 0 (`other=0`; with no `other` their value is "
                  "undefined): the sum then counts exp(0 - max) for each of those {lanes} lanes. Load them as -inf "
                  "(`other=-float('inf')`), whose exp is 0")
_NO_MAX = N_("exp overflowed: without subtracting the row's max first, exp(x) is inf in float32 for x above about "
             "88, and inf / inf is nan. Subtract tl.max(x, axis=0) before tl.exp: softmax is the same, and the "
             "largest exp is 1")
_STRIDE = N_("the row stride is ignored: row r starts r * x_row_stride elements after x's first element (here "
             "x_row_stride is {stride}), not r * n_cols; pass x.stride(0) and use it in the kernel")
_SHORT_BLOCK = N_("only the first {block} columns of each row were computed: BLOCK must cover the whole row, "
                  "BLOCK=triton.next_power_of_2(n_cols) (or loop over the row in blocks)")


def _named_mistake(got: torch.Tensor, case: _Case) -> str | None:
    """The typical kernel mistake that gives ``got`` for ``case``, in words; None when none does."""
    x, dtype = case.x.float(), case.x.dtype
    rows, cols = x.shape
    lanes = (1 << (cols - 1).bit_length()) - cols
    if lanes:
        top = torch.clamp(x.max(dim=1, keepdim=True).values, min=0)
        e = torch.exp(x - top)
        zero_padded = (e / (e.sum(dim=1, keepdim=True) + lanes * torch.exp(-top))).to(dtype)
        if _close(got, zero_padded):
            return _(_PADDED_ZERO).format(lanes=lanes)
    unshifted = (torch.exp(x) / torch.exp(x).sum(dim=1, keepdim=True)).to(dtype)
    if not bool(unshifted.isfinite().all()) and _close(got, unshifted, equal_nan=True):
        return _(_NO_MAX)
    if case.x.stride(0) != cols:
        flat = case.buffer[case.x.storage_offset():case.x.storage_offset() + rows * cols].view(rows, cols)
        if bool(flat.isfinite().all()) and _close(got, _softmax_of(flat, dtype)):
            return _(_STRIDE).format(stride=case.x.stride(0))
    block = 1
    while block < cols:
        if _close(got[:, :block], _softmax_of(x[:, :block], dtype)):
            return _(_SHORT_BLOCK).format(block=block)
        block *= 2
    return None


def _difference(got: torch.Tensor, want: torch.Tensor) -> str:
    """Where ``got`` is farthest from ``want``, compactly."""
    diff = (got.float() - want.float()).abs().nan_to_num(nan=math.inf)
    flat = int(diff.argmax())
    row, col = divmod(flat, want.shape[1])
    off = int((~torch.isclose(got.float(), want.float(), **_tolerance(want.dtype))).sum())
    return _("row {row}, column {col}: got {got:.6g}, expected {want:.6g} ({off} of {n} elements off)").format(
        row=row, col=col, got=float(got[row, col]), want=float(want[row, col]), off=off, n=want.numel())


def _run(softmax_rows: Callable[..., Any], case: _Case) -> tuple[Any, _Watch, list[str]]:
    """softmax_rows(x) under the watch, with its launches counted."""
    watch = _Watch()
    with _launches() as launched, watch:
        out = solved(softmax_rows, case.x)
    return out, watch, launched


def _check_watched(out: Any, watch: _Watch, launched: list[str], case: _Case, before: torch.Tensor) -> None:
    """What the run did besides its numbers: torch's maths, no launch, its input changed, stores out of bounds,
    the result's type, shape, dtype and device."""
    if watch.computed:
        raise CheckFailed(_("torch computed while softmax_rows ran ({ops}): the softmax must be computed by "
                            "softmax_kernel, in Triton; calling torch's operations earns nothing here. The wrapper "
                            "only allocates the output and launches the kernel.").format(
            ops=", ".join(dict.fromkeys(watch.computed))))
    check(launched, _("softmax_rows launched no Triton kernel: launch softmax_kernel[(rows,)](...) and return the "
                      "tensor it wrote."))
    if not torch.equal(case.buffer[case.inside], before[case.inside]):
        raise CheckFailed(_("softmax_rows changed its input x: write the softmax into a new tensor "
                            "(torch.empty_like(x)) and leave x as it was."))
    check(torch.equal(case.buffer.isnan(), before.isnan()) and torch.equal(
        case.buffer.nan_to_num(), before.nan_to_num()),
        _("the kernel wrote into memory around its input x (past its rows' ends): a store's pointer or mask is off."))
    past = sum(guarded.written_outside() for guarded in watch.guarded)
    check(past == 0, _("the kernel stored {n} element(s) past the end of a tensor softmax_rows allocated: a store lets "
                       "through lanes past the row's end (a mask off by one, `offsets <= n_cols`; an offset off by "
                       "one; or no mask). On a GPU that overwrites other tensors' memory.").format(n=past))
    x = case.x
    check(isinstance(out, torch.Tensor), _("softmax_rows returned {kind}; expected a tensor.").format(
        kind=type(out).__name__))
    check(tuple(out.shape) == tuple(x.shape) and out.dtype == x.dtype and out.device == x.device,
          _("softmax_rows returned a {dtype} tensor of shape {shape} on {device} for a {x_dtype} x of shape {x_shape} "
            "on {x_device}; expected x's shape, dtype and device (torch.empty_like(x), or torch.empty(..., "
            "dtype=x.dtype, device=x.device)).").format(
              dtype=_dtype_name(out.dtype), shape=tuple(out.shape), device=out.device, x_dtype=_dtype_name(x.dtype),
              x_shape=tuple(x.shape), x_device=x.device))


def check_softmax(softmax_rows: Callable[..., Any], shapes: Sequence[tuple[int, int]], seed: int,
                  dtype: torch.dtype = torch.float32, scale: float = 1.0, row_stride: int | None = None,
                  offset: int = 0, device: Any = None) -> None:
    """softmax_rows(x) equals torch.softmax(x.float(), 1).to(x.dtype), computed by a Triton kernel, for x of
    each shape (``randn * scale`` from ``seed``, of ``dtype``); with ``row_stride``, x's rows are a slice of a
    wider tensor, starting at column ``offset`` of rows ``row_stride`` apart. x lives where the kernels run for
    ``device`` (None: the GPU if there is one): on it when Triton compiles, on the CPU when it interprets.

    Within float32's rounding (rtol 1e-5, atol 1e-6), or bfloat16's (rtol 1.6e-2, atol 1e-5). A wrong answer is
    named: torch computed it, no kernel launched, the input changed, a store or a load past the row's end, the
    padded lanes loaded as 0, exp overflowing without the max subtracted, the row stride ignored, a BLOCK shorter
    than the row."""
    device = _kernel_device(device)
    for i, shape in enumerate(shapes):
        with warnings_dropped():
            case = _Case.make(tuple(shape), dtype, device, seed + 1000 * i, scale, row_stride, offset)
        before = case.buffer.clone()
        out, watch, launched = _run(softmax_rows, case)
        _check_watched(out, watch, launched, case, before)
        want = _softmax_of(case.x, dtype)
        if _close(out, want):
            continue
        where = _("x of shape {shape}, {dtype}, row stride {stride}").format(
            shape=tuple(case.x.shape), dtype=_dtype_name(dtype), stride=case.x.stride(0))
        named = _named_mistake(out, case)
        if named is None:
            case.surround(seed + 7)
            again, _watch, _launched = _run(softmax_rows, case)
            if isinstance(again, torch.Tensor) and again.shape == out.shape and not (
                    torch.equal(again.isnan(), out.isnan()) and torch.equal(again.nan_to_num(), out.nan_to_num())):
                named = _("the result changed when the memory just outside x's rows changed: the kernel loads past "
                          "the row's end (a mask or an offset off by one, or a load with no mask). Load only "
                          "offsets < n_cols, from x_ptr + row * x_row_stride + offsets")
        raise CheckFailed(_("softmax_rows(x) for {where}: {difference}.").format(
            where=where, difference=_difference(out, want)) + (" " + _("Likely:") + " " + named + "." if named else ""))
