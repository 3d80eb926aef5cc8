"""helpers.checks.ch10: the verdicts of chapter 10's two exercises, on right answers written several ways and on
the typical mistakes, each of which must be named.

The cases are the notebook's grade cells' (solutions/10_kernels/10_kernels.ipynb), passed with the same keyword
arguments; the reference answers are the notebook's, written out here. The kernels run in Triton's interpreter on
the CPU (TRITON_INTERPRET=1, set before triton is imported: ``@triton.jit`` reads it when it decorates).
"""

import math
import os

os.environ["TRITON_INTERPRET"] = "1"

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from helpers import datasheet  # noqa: E402
from conftest import OLD_INTERPRETER_SKIP_REASON  # noqa: E402
from helpers.checks import CheckFailed, ch10  # noqa: E402

triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")

INTENSITY_CASES = [(4096, 4096, 4096, torch.float32), (4096, 4096, 4096, torch.bfloat16),
                   (1, 4096, 4096, torch.float16), (300, 7, 50, torch.float32)]
H100 = dict(peak_flops=989.5e12, bandwidth=3.35e12)  # ridge point 295.4 FLOP/byte
BOUND_CASES = [dict(**H100, intensities=[0.25, 50.0, 290.0, 300.0, 2000.0]),
               dict(peak_flops=312e12, bandwidth=2.039e12, intensities=[1.0, 140.0, 160.0, 1e4]),
               dict(peak_flops=2e12, bandwidth=1e11, intensities=[0.5, 19.0, 21.0])]
SOFTMAX_CASES = {
    "rows": dict(shapes=[(1, 1), (3, 7), (4, 128), (6, 1000)], seed=0),
    "strided": dict(shapes=[(5, 300)], row_stride=512, offset=37, seed=1),
    "bf16": dict(shapes=[(2, 33), (4, 700)], dtype=torch.bfloat16, seed=2),
    "stable": dict(shapes=[(3, 10), (4, 500)], scale=100.0, seed=3),
}


# --------------------------------------------------------------------------- exercise 1: the roofline


def matmul_intensity(m, n, k, dtype):
    """The notebook's reference answer."""
    return 2 * m * n * k / ((m * k + k * n + m * n) * dtype.itemsize)


def bound(intensity, peak_flops, bandwidth):
    """The notebook's reference answer."""
    return "compute" if intensity >= peak_flops / bandwidth else "memory"


def finfo_intensity(m, n, k, dtype):
    """Right, written differently: the size from finfo's bits, FLOPs and bytes apart, a tensor returned."""
    size = torch.finfo(dtype).bits // 8
    flops = 2 * m * n * k
    return torch.tensor(flops / (size * (m * k + k * n) + size * m * n), dtype=torch.float64)


def attainable_bound(intensity, peak_flops, bandwidth):
    """Right, written differently: the roofline's attainable FLOP/s against the peak."""
    return "memory" if min(peak_flops, intensity * bandwidth) < peak_flops else "compute"


def halved(m, n, k, dtype):
    return matmul_intensity(m, n, k, dtype) / 2


def in_bits(m, n, k, dtype):
    return 2 * m * n * k / ((m * k + k * n + m * n) * torch.finfo(dtype).bits)


def no_output(m, n, k, dtype):
    return 2 * m * n * k / ((m * k + k * n) * dtype.itemsize)


def four_bytes(m, n, k, dtype):
    return 2 * m * n * k / ((m * k + k * n + m * n) * 4)


def c_twice(m, n, k, dtype):
    return 2 * m * n * k / ((m * k + k * n + 2 * m * n) * dtype.itemsize)


def bytes_per_flop(m, n, k, dtype):
    return 1 / matmul_intensity(m, n, k, dtype)


def reversed_bound(intensity, peak_flops, bandwidth):
    return "memory" if intensity >= peak_flops / bandwidth else "compute"


def inverted_ridge(intensity, peak_flops, bandwidth):
    return "compute" if intensity >= bandwidth / peak_flops else "memory"


def both_wrong(intensity, peak_flops, bandwidth):
    return "memory" if intensity >= bandwidth / peak_flops else "compute"


def suffixed(intensity, peak_flops, bandwidth):
    return bound(intensity, peak_flops, bandwidth) + "-bound"


def strict(intensity, peak_flops, bandwidth):
    """Right but at the ridge point itself, where rounding may decide: accepted."""
    return "compute" if intensity * bandwidth > peak_flops else "memory"


@pytest.mark.parametrize("answer", [matmul_intensity, finfo_intensity])
def test_right_intensities_pass(answer):
    ch10.check_intensity(answer, cases=INTENSITY_CASES)


@pytest.mark.parametrize(("answer", "says"), [
    (halved, "multiply-add as one FLOP"), (in_bits, "bits, not bytes"), (no_output, "forgets the output"),
    (four_bytes, "ignores the dtype's size"), (c_twice, "counts C twice"), (bytes_per_flop, "bytes per FLOP")])
def test_each_intensity_mistake_is_named(answer, says):
    with pytest.raises(CheckFailed, match=says):
        ch10.check_intensity(answer, cases=INTENSITY_CASES)


def test_four_bytes_is_not_taken_for_a_halved_count():
    """In bfloat16 both halve the intensity; the float32 case beside it tells them apart."""
    with pytest.raises(CheckFailed) as err:
        ch10.check_intensity(four_bytes, cases=INTENSITY_CASES)
    assert "multiply-add" not in str(err.value) and "torch.bfloat16" in str(err.value)


def test_two_intensity_mistakes_at_once_are_both_named():
    with pytest.raises(CheckFailed, match="multiply-add.*And: .*forgets the output"):
        ch10.check_intensity(lambda m, n, k, d: no_output(m, n, k, d) / 2, cases=INTENSITY_CASES)


def test_an_unnamed_wrong_intensity_and_a_non_number_fail():
    with pytest.raises(CheckFailed, match="expected") as err:
        ch10.check_intensity(lambda m, n, k, d: 3.0, cases=INTENSITY_CASES)
    assert "Likely" not in str(err.value)
    with pytest.raises(CheckFailed, match="expected a number"):
        ch10.check_intensity(lambda m, n, k, d: "682", cases=INTENSITY_CASES)


def test_the_intensity_mistakes_are_told_apart_on_the_grade_cells_cases():
    values = [tuple(round(c.intensity(*case), 6) for case in INTENSITY_CASES) for c in [ch10._Count(),
                                                                                        *ch10._counts()]]
    assert values[0] not in values[1:]
    singles = values[1:7]
    assert len(set(singles)) == len(singles)


@pytest.mark.parametrize("answer", [bound, attainable_bound, strict])
@pytest.mark.parametrize("case", BOUND_CASES)
def test_right_bounds_pass(answer, case):
    ch10.check_bound(answer, **case)


def test_either_verdict_is_accepted_at_the_ridge_point_itself():
    ridge = H100["peak_flops"] / H100["bandwidth"]
    for answer in (bound, strict, lambda i, p, b: "memory" if i <= p / b else "compute"):
        ch10.check_bound(answer, **H100, intensities=[ridge, ridge * (1 + 1e-12)])


@pytest.mark.parametrize(("answer", "says"), [
    (reversed_bound, "comparison is reversed"), (inverted_ridge, "ridge point is inverted"),
    (both_wrong, "reversed.*And: .*inverted"), (suffixed, "exactly the string"),
    (lambda i, p, b: i >= p / b, "exactly the string")])
@pytest.mark.parametrize("case", BOUND_CASES)
def test_each_bound_mistake_is_named(answer, says, case):
    with pytest.raises(CheckFailed, match=says):
        ch10.check_bound(answer, **case)


@pytest.fixture
def h100_bandwidth(monkeypatch):
    """The H100 SXM sheet with its memory bandwidth (3.35 TB/s), whether or not datasheet has it yet."""
    sheet = ch10._sheet("H100 SXM")
    if getattr(sheet, "bandwidth", None) is None:
        monkeypatch.setattr(type(sheet), "bandwidth", 3.35e12, raising=False)
    return ch10._sheet("H100 SXM")


@pytest.mark.parametrize(("intensity_fn", "bound_fn"), [(matmul_intensity, bound),
                                                        (finfo_intensity, attainable_bound)])
def test_right_predictions_pass(h100_bandwidth, intensity_fn, bound_fn):
    ch10.check_predictions(intensity_fn, bound_fn, part="H100 SXM", dtype=torch.bfloat16)


@pytest.mark.parametrize(("intensity_fn", "bound_fn", "says"), [
    (halved, bound, "multiply-add as one FLOP"), (in_bits, bound, "bits, not bytes"),
    (no_output, bound, "forgets the output"), (four_bytes, bound, "ignores the dtype's size"),
    (matmul_intensity, reversed_bound, "comparison is reversed"),
    (matmul_intensity, inverted_ridge, "ridge point is inverted"), (matmul_intensity, suffixed, "exactly the string")])
def test_each_mistake_flips_a_prediction_and_is_named(h100_bandwidth, intensity_fn, bound_fn, says):
    with pytest.raises(CheckFailed, match=says):
        ch10.check_predictions(intensity_fn, bound_fn, part="H100 SXM", dtype=torch.bfloat16)


def test_the_predictions_are_the_roofline_s(h100_bandwidth):
    """The shapes the chapter names: the matrix-vector product and the batch of 16 memory-bound, the big square
    compute-bound, and every shape clear of the ridge point by more than rounding."""
    ridge = h100_bandwidth.peak("bfloat16") / h100_bandwidth.bandwidth
    verdicts = {tuple(m_n_k): ch10._verdict(matmul_intensity(*m_n_k, torch.bfloat16), ridge)
                for _label, *m_n_k in ch10.PREDICTION_SHAPES}
    assert verdicts[(1, 4096, 4096)] == verdicts[(16, 4096, 4096)] == "memory"
    assert verdicts[(4096, 4096, 4096)] == "compute"
    assert all(abs(matmul_intensity(*s, torch.bfloat16) / ridge - 1) > 0.1 for _l, *s in ch10.PREDICTION_SHAPES)


def test_the_datasheet_part_is_found_by_its_name():
    assert ch10._sheet("H100 SXM").part == "H100 SXM"
    assert ch10._sheet("H100 PCIe").part == "H100 PCIe"
    assert any(sheet.part == "H100 SXM" for _p, sheet in datasheet.SHEETS)


# --------------------------------------------------------------------------- exercise 2: softmax_kernel


@triton.jit
def softmax_kernel(out_ptr, x_ptr, x_row_stride, out_row_stride, n_cols, BLOCK: tl.constexpr):
    """The notebook's reference kernel."""
    row = tl.program_id(0)
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n_cols
    x = tl.load(x_ptr + row * x_row_stride + offsets, mask=mask, other=-float("inf")).to(tl.float32)
    x = x - tl.max(x, axis=0)
    numerator = tl.exp(x)
    y = numerator / tl.sum(numerator, axis=0)
    tl.store(out_ptr + row * out_row_stride + offsets, y.to(out_ptr.dtype.element_ty), mask=mask)


def softmax_rows(x):
    """The notebook's reference wrapper."""
    rows, cols = x.shape
    out = torch.empty((rows, cols), dtype=x.dtype, device=x.device)
    softmax_kernel[(rows,)](out, x, x.stride(0), out.stride(0), cols, BLOCK=triton.next_power_of_2(cols))
    return out


def launching(kernel, block=None, stride=None, dtype=None, contiguous=False):
    """A wrapper around ``kernel``: a fixed ``block``, ``stride(x, cols)`` as x's row stride, an output ``dtype``,
    x made contiguous first."""
    def wrapper(x):
        if contiguous:
            x = x.contiguous()
        rows, cols = x.shape
        out = torch.empty_like(x, dtype=dtype or x.dtype)
        kernel[(rows,)](out, x, x.stride(0) if stride is None else stride(x, cols), out.stride(0), cols,
                        BLOCK=block or triton.next_power_of_2(cols))
        return out
    wrapper.__name__ = "softmax_rows"
    return wrapper


@triton.jit
def online_kernel(out_ptr, x_ptr, x_row_stride, out_row_stride, n_cols, BLOCK: tl.constexpr):
    """Right, written differently: the row in blocks of BLOCK, a running max and sum (online softmax), exp2."""
    row = tl.program_id(0)
    top = -float("inf")
    total = 0.0
    for start in range(0, n_cols, BLOCK):
        offsets = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * x_row_stride + offsets, mask=offsets < n_cols, other=-float("inf"))
        x = x.to(tl.float32) * 1.4426950408889634
        new_top = tl.maximum(top, tl.max(x, axis=0))
        total = total * tl.exp2(top - new_top) + tl.sum(tl.exp2(x - new_top), axis=0)
        top = new_top
    for start in range(0, n_cols, BLOCK):
        offsets = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * x_row_stride + offsets, mask=offsets < n_cols, other=-float("inf"))
        y = tl.exp2(x.to(tl.float32) * 1.4426950408889634 - top) / total
        tl.store(out_ptr + row * out_row_stride + offsets, y, mask=offsets < n_cols)


@triton.jit
def zero_padded_kernel(out_ptr, x_ptr, x_row_stride, out_row_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n_cols
    x = tl.load(x_ptr + row * x_row_stride + offsets, mask=mask, other=0.0).to(tl.float32)
    x = x - tl.max(x, axis=0)
    numerator = tl.exp(x)
    tl.store(out_ptr + row * out_row_stride + offsets, numerator / tl.sum(numerator, axis=0), mask=mask)


@triton.jit
def mask_le_kernel(out_ptr, x_ptr, x_row_stride, out_row_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offsets = tl.arange(0, BLOCK)
    mask = offsets <= n_cols
    x = tl.load(x_ptr + row * x_row_stride + offsets, mask=mask, other=-float("inf")).to(tl.float32)
    x = x - tl.max(x, axis=0)
    numerator = tl.exp(x)
    tl.store(out_ptr + row * out_row_stride + offsets, numerator / tl.sum(numerator, axis=0), mask=mask)


@triton.jit
def unmasked_store_kernel(out_ptr, x_ptr, x_row_stride, out_row_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n_cols
    x = tl.load(x_ptr + row * x_row_stride + offsets, mask=mask, other=-float("inf")).to(tl.float32)
    x = x - tl.max(x, axis=0)
    numerator = tl.exp(x)
    tl.store(out_ptr + row * out_row_stride + offsets, numerator / tl.sum(numerator, axis=0))


@triton.jit
def shifted_load_kernel(out_ptr, x_ptr, x_row_stride, out_row_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n_cols
    x = tl.load(x_ptr + row * x_row_stride + offsets + 1, mask=mask, other=-float("inf")).to(tl.float32)
    x = x - tl.max(x, axis=0)
    numerator = tl.exp(x)
    tl.store(out_ptr + row * out_row_stride + offsets, numerator / tl.sum(numerator, axis=0), mask=mask)


@triton.jit
def no_max_kernel(out_ptr, x_ptr, x_row_stride, out_row_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n_cols
    x = tl.load(x_ptr + row * x_row_stride + offsets, mask=mask, other=-float("inf")).to(tl.float32)
    numerator = tl.exp(x)
    tl.store(out_ptr + row * out_row_stride + offsets, numerator / tl.sum(numerator, axis=0), mask=mask)


@triton.jit
def in_place_kernel(out_ptr, x_ptr, x_row_stride, out_row_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n_cols
    x = tl.load(x_ptr + row * x_row_stride + offsets, mask=mask, other=-float("inf")).to(tl.float32)
    x = x - tl.max(x, axis=0)
    numerator = tl.exp(x)
    y = numerator / tl.sum(numerator, axis=0)
    tl.store(x_ptr + row * x_row_stride + offsets, y.to(x_ptr.dtype.element_ty), mask=mask)


def in_place(x):
    in_place_kernel[(x.shape[0],)](x, x, x.stride(0), x.stride(0), x.shape[1],
                                   BLOCK=triton.next_power_of_2(x.shape[1]))
    return x


def by_torch(x):
    return torch.softmax(x, dim=1)


def by_numpy(x):
    a = x.float().numpy()
    e = np.exp(a - a.max(axis=1, keepdims=True))
    return torch.from_numpy(e / e.sum(axis=1, keepdims=True)).to(x.dtype)


def both(x):
    """The kernel launched, and torch's softmax returned."""
    softmax_rows(x)
    return torch.softmax(x.float(), dim=1).to(x.dtype)


_OLD_INTERPRETER = tuple(int(p) for p in triton.__version__.split(".")[:2]) < (3, 9)
RIGHT = [pytest.param(softmax_rows, id="reference"),
         pytest.param(launching(online_kernel, block=64), id="online exp2",
                      marks=pytest.mark.skipif(_OLD_INTERPRETER, reason=OLD_INTERPRETER_SKIP_REASON)),
         pytest.param(launching(softmax_kernel, stride=lambda x, cols: cols, contiguous=True), id="contiguous first")]


@pytest.mark.parametrize("answer", RIGHT)
@pytest.mark.parametrize("case", SOFTMAX_CASES.values(), ids=SOFTMAX_CASES.keys())
def test_right_softmaxes_pass(answer, case):
    ch10.check_softmax(answer, device="cpu", **case)


#: (answer, what it must be told, the grade cells it fails)
WRONG = {
    "padded lanes 0": (launching(zero_padded_kernel), "loaded as 0", {"rows", "strided", "bf16"}),
    "mask <=": (launching(mask_le_kernel), "past the row's end", set(SOFTMAX_CASES)),
    "unmasked store": (launching(unmasked_store_kernel), "past the row's end", {"rows", "strided", "bf16", "stable"}),
    "offset off by one": (launching(shifted_load_kernel), "off by one", set(SOFTMAX_CASES)),
    "no max": (launching(no_max_kernel), "subtract", {"stable"}),
    "stride ignored": (launching(softmax_kernel, stride=lambda x, cols: cols), "row stride is ignored", {"strided"}),
    "block 128": (launching(softmax_kernel, block=128), "first 128 columns", set(SOFTMAX_CASES)),
    "float32 out": (launching(softmax_kernel, dtype=torch.float32), "dtype", {"bf16"}),
    "torch": (by_torch, "torch computed", set(SOFTMAX_CASES)),
    "torch after the kernel": (both, "torch computed", set(SOFTMAX_CASES)),
    "numpy": (by_numpy, "no Triton kernel", set(SOFTMAX_CASES)),
    "in place": (in_place, "changed its input", set(SOFTMAX_CASES)),
}


@pytest.mark.parametrize("name", WRONG)
@pytest.mark.parametrize("cell", SOFTMAX_CASES)
def test_each_softmax_mistake_fails_its_cells_and_is_named(name, cell):
    answer, says, fails = WRONG[name]
    if cell not in fails:
        ch10.check_softmax(answer, device="cpu", **SOFTMAX_CASES[cell])
        return
    with pytest.raises(CheckFailed) as err:
        ch10.check_softmax(answer, device="cpu", **SOFTMAX_CASES[cell])
    assert says.lower() in str(err.value).lower(), str(err.value)


def test_a_store_past_the_end_lands_in_the_check_s_margin():
    """An unmasked store writes BLOCK - n_cols elements past the output's end: the check's margin takes them (a
    plain torch.empty would have its heap overwritten), and counts them."""
    with pytest.raises(CheckFailed, match=r"stored 24 element\(s\) past the end"):
        ch10.check_softmax(launching(unmasked_store_kernel), shapes=[(6, 1000)], device="cpu", seed=0)


def test_triton_missing_is_said_plainly(monkeypatch):
    from helpers import kernels

    monkeypatch.setattr(kernels, "_import_triton", lambda: (_ for _ in ()).throw(ImportError("No module 'triton'")))
    with pytest.raises(CheckFailed, match="Linux x86-64"):
        ch10.check_softmax(softmax_rows, shapes=[(2, 3)], device="cpu", seed=0)


def test_an_unsolved_stub_says_so():
    def softmax_rows(x):
        raise NotImplementedError()

    with pytest.raises(CheckFailed, match="not written yet"):
        ch10.check_softmax(softmax_rows, shapes=[(2, 3)], device="cpu", seed=0)


def test_the_check_leaves_triton_and_the_dispatch_modes_as_they_were():
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    runs = (JITFunction.run, InterpretedFunction.run)
    with pytest.raises(CheckFailed):
        ch10.check_softmax(launching(unmasked_store_kernel), shapes=[(3, 7)], device="cpu", seed=0)
    assert (JITFunction.run, InterpretedFunction.run) == runs
    assert not _get_current_dispatch_mode_stack()


def test_the_input_sits_in_nan_with_other_numbers_between_strided_rows():
    case = ch10._Case.make((3, 5), torch.float32, "cpu", 0, 1.0, row_stride=8, offset=2)
    assert case.x.stride() == (8, 1) and case.x.storage_offset() > 0
    start = case.x.storage_offset()
    assert case.buffer[:start - 2].isnan().all() and case.buffer[start + 2 * 8 + 5 + 1:].isnan().all()
    gaps = case.buffer[start:start + 2 * 8 + 5][~case.inside[start:start + 2 * 8 + 5]]
    assert gaps.numel() == 6 and gaps.isfinite().all()
    assert math.isfinite(float(case.x.sum()))
