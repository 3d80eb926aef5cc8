"""Mixed precision: the fp32, autocast and autocast+GradScaler training steps, and what to use where.

Chapter 05 (mixed precision) teaches it: the chapter writes each step out in
raw torch first, then names the function here that does the same. They use
today's API only (``torch.autocast(device_type, dtype)`` and
``torch.amp.GradScaler(device)``), never the deprecated ``torch.cuda.amp``
spellings, which warn since torch 2.4. Steps are timed through
:mod:`helpers.benchmark` and their memory measured through
:mod:`helpers.memory`; this module has no clock of its own. What only grades
the chapter's exercises lives in ``helpers/checks/ch05.py``.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from helpers import benchmark, memory
from helpers import device as dev
from helpers.i18n import _
from helpers.models import set_seed

__all__ = [
    "AmpPlan",
    "VariantResult",
    "amp_plan",
    "autocast_policy",
    "autocast_step",
    "compare_precisions",
    "fp32_step",
    "low_precision_units",
    "pick_dtype",
    "scaled_step",
    "speed_verdict",
    "trace_autocast",
]

# --------------------------------------------------------------------------- what to use where


def _cpu_units() -> dict[str, bool | None]:
    """The CPU's low-precision features, from ``torch.cpu.get_capabilities()``."""
    probe = getattr(torch.cpu, "get_capabilities", None)
    try:
        caps = dict(probe()) if probe is not None else {}
    except Exception:  # noqa: BLE001 - a probe that cannot answer says "unknown"
        caps = {}
    if str(caps.get("architecture", "")).startswith(("arm", "aarch")):
        return {"BF16 instructions (Arm bf16 dot products)": caps.get("bf16"),
                "fp16 arithmetic": caps.get("fp16_arith")}
    both = None if "amx_tile" not in caps else bool(caps.get("amx_tile") and caps.get("amx_bf16"))
    return {
        "AMX (bf16 matrix tiles)": both,
        "AMX-FP16": caps.get("amx_fp16"),
        "AVX512-BF16 (bf16 dot products)": caps.get("avx512_bf16"),
        "AVX512-FP16 (fp16 vector arithmetic)": caps.get("avx512_fp16"),
    }


def _native_bf16(device: torch.device) -> bool:
    """Whether the CUDA GPU ``device`` multiplies bf16 in hardware (compute capability 8.0 or newer).

    ``torch.cuda.is_bf16_supported()`` is no answer by default: it counts
    emulation (``including_emulation=True``), so a T4 (7.5) says True while
    its bf16 runs emulated, slowly. Asked with ``including_emulation=False``
    it says what the hardware does, but only for the *current* device; for
    another GPU, or a torch without the keyword, the capability decides.
    """
    index = device.index if device.index is not None else torch.cuda.current_device()
    if index == torch.cuda.current_device():
        try:
            return bool(torch.cuda.is_bf16_supported(including_emulation=False))
        except TypeError:  # a torch without the keyword: read the capability below
            pass
    return torch.cuda.get_device_capability(index)[0] >= 8


def low_precision_units(device: str | torch.device) -> dict[str, bool | None]:
    """Which hardware features for fast fp16 / bf16 matrix products ``device`` has.

    Autocast *runs* in low precision on almost any device, but it is only
    faster where the hardware multiplies low-precision matrices natively:
    tensor cores (fp16 from Volta, compute capability 7.0; bf16 and TF32 from
    Ampere, 8.0: a T4, 7.5, has fp16 tensor cores only and emulates bf16) or,
    on a CPU, AMX tiles. AVX512-BF16 only adds bf16 dot-product instructions,
    which may or may not beat fp32's tuned kernels; without either, bf16 is
    converted in software. For fp16 a CPU may have AMX-FP16 (matrix tiles),
    AVX512-FP16 (fp16 vector arithmetic, no tiles) or neither (fp16 converted
    in software, very slow). None means "cannot tell".
    """
    device = torch.device(device)
    if device.type == "cuda":
        major = torch.cuda.get_device_capability(device)[0]  # not `major, _ =`: that would shadow _()
        return {"fp16 tensor cores": major >= 7, "bf16 tensor cores": _native_bf16(device),
                "tf32 tensor cores": major >= 8}
    if device.type == "cpu":
        return _cpu_units()
    return {}


def pick_dtype(device: str | torch.device) -> torch.dtype:
    """The 16-bit dtype mixed precision uses on ``device``: bf16 where the hardware has it, else fp16.

    bf16 keeps fp32's exponent range, so gradients do not underflow and no
    GradScaler is needed; fp16 has 5 exponent bits and needs loss scaling.
    So bf16 wherever it is native: a CUDA GPU of compute capability 8.0 or
    newer (A100 8.0, H100 9.0). Below that (a T4, Colab's GPU, is 7.5; a
    V100 7.0) torch would *emulate* bf16, slowly, while fp16 runs on the
    tensor cores (from 7.0): fp16, with a scaler. Apple GPUs run fp16. A
    CPU gets bf16, CPU autocast's default, on every CPU (converted in software
    where it has no bf16 instructions; :func:`low_precision_units` says).
    """
    device = torch.device(device)
    if device.type == "cuda":
        return torch.bfloat16 if _native_bf16(device) else torch.float16
    if device.type == "mps":
        return torch.float16
    return torch.bfloat16


@dataclasses.dataclass(frozen=True)
class AmpPlan:
    """How to run mixed precision on one device: autocast's device type, the dtype, and whether to scale."""

    device_type: str
    dtype: torch.dtype
    use_scaler: bool
    reason: str


def amp_plan(device: str | torch.device) -> AmpPlan:
    """How to run mixed precision on ``device``: :func:`pick_dtype`'s dtype, a scaler for fp16, and why.

    On a CPU, whether bf16 is faster than fp32 depends on AMX/AVX512-BF16,
    see :func:`low_precision_units`; the reason says which this CPU has.
    """
    device = torch.device(device)
    dtype = pick_dtype(device)
    if device.type == "cuda":
        major, minor = torch.cuda.get_device_capability(device)
        if dtype == torch.bfloat16:
            return AmpPlan("cuda", dtype, False, _("this GPU (compute capability {major}.{minor}) multiplies bf16 "
                                                   "natively (8.0 or newer)").format(major=major, minor=minor))
        cores = (_("fp16 on its tensor cores") if major >= 7 else
                 _("fp16 (it has no tensor cores, below 7.0: expect little speed-up)"))
        return AmpPlan("cuda", dtype, True, _("this GPU (compute capability {major}.{minor}) has no native bf16 (torch "
                                              "would emulate it, slowly; native from 8.0): {cores}, with loss "
                                              "scaling").format(major=major, minor=minor, cores=cores))
    if device.type == "mps":
        return AmpPlan("mps", dtype, True, _("fp16 is what every Apple GPU runs natively; it needs loss scaling"))
    units = low_precision_units(device)
    if units.get("AMX (bf16 matrix tiles)"):
        note = _("this CPU has AMX bf16 matrix units, so bf16 can beat fp32")
    elif units.get("AVX512-BF16 (bf16 dot products)") or units.get("BF16 instructions (Arm bf16 dot products)"):
        note = _("this CPU has bf16 dot products but no bf16 matrix units: do not expect a speed-up")
    else:
        note = _("this CPU has no bf16 matrix units: bf16 is converted in software, expect it to be slower")
    return AmpPlan(device.type, dtype, False,
                   _("CPU autocast runs bf16, which needs no scaler; {note}").format(note=note))


def _cpu_slower(dtype: torch.dtype, units: dict[str, bool | None]) -> str:
    """Why a CPU autocast step measured slower than fp32, from the features this CPU reports."""
    if dtype == torch.float16:
        if units.get("AMX-FP16"):
            return _("even with AMX-FP16 tiles, the casts and per-operation overheads cost more at this size than "
                     "the tiles save")
        if units.get("AVX512-FP16 (fp16 vector arithmetic)"):
            return _("this CPU has AVX512-FP16 vector arithmetic but no fp16 matrix tiles (AMX-FP16), so fp16 "
                     "products gain little over the tuned fp32 kernels, and autocast adds a cast of every input and "
                     "weight on top")
        return _("this CPU has no fp16 arithmetic (neither AMX-FP16 nor AVX512-FP16), so fp16 products are converted "
                 "in software")
    if units.get("AMX (bf16 matrix tiles)"):
        return _("even with AMX bf16 tiles, the casts and per-operation overheads cost more at this size than the "
                 "tiles save")
    instructions = [units[k] for k in _BF16_INSTRUCTIONS if k in units]
    if units.get("AMX (bf16 matrix tiles)") is False and instructions and all(v is False for v in instructions):
        return _("this CPU has no bf16 instructions (no AMX tiles, no bf16 dot products), so bf16 is emulated here: "
                 "every bf16 product is converted to fp32 in software")
    return _("without AMX matrix tiles, bf16 matrix products are no faster than the tuned fp32 kernels, and autocast "
             "adds a cast of every input and weight on top")


_BF16_INSTRUCTIONS = ("AVX512-BF16 (bf16 dot products)", "BF16 instructions (Arm bf16 dot products)")


def _gpu_without(dtype: torch.dtype, units: dict[str, bool | None]) -> str | None:
    """Why a GPU without tensor cores for ``dtype`` (``units`` says False) ran it as it did; None if it has them.

    There the casts are not the story: bf16 below compute capability 8.0 (a
    T4, a V100) is emulated, and fp16 below 7.0 runs on the ordinary cores.
    """
    name = {torch.bfloat16: "bf16", torch.float16: "fp16"}.get(dtype)
    if name is None or units.get(f"{name} tensor cores") is not False:
        return None
    if name == "bf16":
        return _("bf16 is emulated on this GPU (no bf16 tensor cores below compute capability 8.0, e.g. a T4), so "
                 "its products do not run on the tensor cores; amp.amp_plan picks fp16 with a GradScaler here")
    return _("this GPU has no fp16 tensor cores (compute capability below 7.0), so fp16 runs on its ordinary cores")


def speed_verdict(low: benchmark.Timing, fp32: benchmark.Timing, dtype: torch.dtype,
                  units: dict[str, bool | None]) -> str:
    """Whether the low-precision step ``low`` ran faster than ``fp32``, slower, or within the noise, and why.

    The conclusion is :func:`helpers.benchmark.compare`'s, the course's one rule
    for conclusions from measurements: a difference only when the two
    timings' bands do not overlap, with the ratio's interval. Only then does
    the sentence go on to say why, for the kind of device the timings were
    made on (``low.device``): ``units`` is :func:`low_precision_units` of
    that device, and a CPU's explanation names the feature it has or lacks,
    never one it was not asked about. On a GPU without tensor cores for
    ``dtype`` (bf16 on a T4) it says the dtype is emulated there, never that
    casts outweighed tensor cores it does not have. Within the noise on this
    machine, or with too few repeats to know, it says so and explains nothing.
    (Its name predates :class:`helpers.benchmark.Conclusion`: chapter 05's text, in both editions, names it.)
    """
    conclusion = benchmark.compare(low, fp32)  # the messages' {verdict} is it: the catalog keeps their msgids
    device_type = torch.device(low.device).type
    without = _gpu_without(dtype, units) if device_type == "cuda" else None
    if conclusion.faster is low:
        where = {torch.bfloat16: "AMX (bf16 matrix tiles)", torch.float16: "AMX-FP16"}.get(dtype)
        if device_type == "cpu" and where and units.get(where):
            return _("{verdict}: the {unit} matrix tiles pay for the casts").format(verdict=conclusion,
                                                                                    unit=where.split(" (")[0])
        if without:
            return _("{verdict}, although {without}: what it saves is memory traffic (16-bit tensors), not "
                     "arithmetic").format(verdict=conclusion, without=without)
        return _("{verdict}: the low-precision arithmetic pays for the casts").format(verdict=conclusion)
    if conclusion.faster is fp32:
        if device_type == "cpu":
            why = _cpu_slower(dtype, units)
        elif without:
            why = without
        elif device_type == "cuda":
            why = _("at this size the casts and extra kernel launches cost more than the tensor cores save")
        else:
            why = _("at this size the casts and extra kernel launches cost more than the 16-bit arithmetic saves")
        return f"{conclusion.sentence(longer=True)}: {why}"  # both halves are translated already
    return str(conclusion)


# --------------------------------------------------------------------------- the three training steps


def fp32_step(model: nn.Module, x: torch.Tensor, y: torch.Tensor, loss_fn: Callable, optimizer) -> float:
    """One ordinary fp32 training step; returns the loss as a Python float (the baseline)."""
    optimizer.zero_grad(set_to_none=True)
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    return loss.item()


def autocast_step(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor, loss_fn: Callable, optimizer, device_type: str, dtype: torch.dtype
) -> float:
    """One autocast step without a scaler: right for bf16 (fp32's range), risky for fp16 (underflow)."""
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast(device_type, dtype=dtype):
        loss = loss_fn(model(x), y)
    loss.backward()  # backward outside autocast: each op's backward runs in its forward's dtype anyway
    optimizer.step()
    return loss.item()


def scaled_step(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    loss_fn: Callable,
    optimizer,
    scaler: torch.amp.GradScaler,
    device_type: str,
    dtype: torch.dtype,
    max_norm: float | None = None,
) -> float:
    """One autocast step with loss scaling (needed for fp16), optionally with gradient-norm clipping.

    The scaler multiplies the loss so small gradients survive fp16, then
    ``scaler.step`` unscales them, skips the step if any is inf/NaN, and
    ``scaler.update`` adjusts the scale. Clipping must see true gradients, so
    it comes after ``scaler.unscale_``.
    """
    sys.audit("course.version", "helpers.amp:scaled_step")  # the grader: no exercise passes by calling this
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast(device_type, dtype=dtype):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    if max_norm is not None:
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    scaler.step(optimizer)
    scaler.update()
    return loss.item()


# --------------------------------------------------------------------------- what autocast does, observed


def _policy_ops() -> dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]]:
    return {
        "matmul": lambda a, t: a @ a,
        "linear": lambda a, t: F.linear(a, a),
        "conv1d": lambda a, t: F.conv1d(a[None], a[:, :, None]),
        "bmm": lambda a, t: torch.bmm(a[None], a[None]),
        "relu": lambda a, t: F.relu(a),
        "add": lambda a, t: a + a,
        "exp": lambda a, t: a.exp(),
        "sum": lambda a, t: a.sum(),
        "softmax": lambda a, t: a.softmax(-1),
        "log_softmax": lambda a, t: a.log_softmax(-1),
        "layer_norm": lambda a, t: F.layer_norm(a, a.shape[-1:]),
        "mse_loss": lambda a, t: F.mse_loss(a, a),
        "cross_entropy": lambda a, t: F.cross_entropy(a, t),
    }


def autocast_policy(device_type: str, dtype: torch.dtype, size: int = 8) -> list[dict[str, Any]]:
    """Run a dozen common ops under ``torch.autocast(device_type, dtype)`` and record what each did.

    Each op is fed fp32 inputs and then ``dtype`` inputs; its output dtypes
    sort it into one of autocast's three lists: *casts down* (runs in
    ``dtype`` whatever comes in: the matrix products), *casts up* (runs in
    float32 whatever comes in: reductions and losses that lose accuracy in
    low precision), or *follows its inputs*. The lists differ between CPU and
    CUDA, which is why the chapter observes them rather than reciting them.
    """
    device = torch.device(device_type)
    g = torch.Generator().manual_seed(0)
    a32 = torch.randn(size, size, generator=g).to(device)
    target = torch.randint(0, size, (size,), generator=g).to(device)
    rows = []
    for name, op in _policy_ops().items():
        with torch.autocast(device_type, dtype=dtype):
            from32 = op(a32, target).dtype
            from_low = op(a32.to(dtype), target).dtype
        if from32 == dtype:
            kind = _("casts down to {dtype}").format(dtype=str(dtype).replace("torch.", ""))
        elif from_low == torch.float32:
            kind = _("casts up to float32")
        else:
            kind = _("follows its inputs")
        rows.append({"op": name, "from float32": from32, f"from {str(dtype).replace('torch.', '')}": from_low, "autocast": kind})
    return rows


def trace_autocast(model: nn.Module, x: torch.Tensor, device_type: str, dtype: torch.dtype) -> list[dict[str, Any]]:
    """One forward pass under autocast, with the input and output dtype of every leaf module recorded."""
    rows: list[dict[str, Any]] = []
    handles = []

    def hook(module, inputs, output, name):
        first = next((t for t in inputs if isinstance(t, torch.Tensor)), None)
        rows.append({"module": name, "type": type(module).__name__,
                     "input": first.dtype if first is not None else None,
                     "output": output.dtype if isinstance(output, torch.Tensor) else None,
                     "weights": next((p.dtype for p in module.parameters(recurse=False)), None)})

    for name, module in model.named_modules():
        if not list(module.children()):
            handles.append(module.register_forward_hook(lambda m, i, o, n=name: hook(m, i, o, n)))
    try:
        with torch.no_grad(), torch.autocast(device_type, dtype=dtype):
            model(x)
    finally:
        for h in handles:
            h.remove()
    return rows


# --------------------------------------------------------------------------- measuring the variants


@dataclasses.dataclass
class VariantResult:
    """One precision variant measured on the local device."""

    name: str
    dtype: torch.dtype
    losses: list[float]
    step_time: Any  # helpers.benchmark.Timing
    peak_bytes: int


def compare_precisions(
    make_model: Callable[[], nn.Module],
    x: torch.Tensor,
    y: torch.Tensor,
    loss_fn: Callable,
    device: str | torch.device,
    steps: int = 40,
    lr: float = 1e-2,
    variants: tuple[str, ...] = ("fp32", "bf16", "fp16+scaler"),
    min_run_time: float = 0.3,
    progress: bool = False,
) -> list[VariantResult]:
    """Train a fresh copy of the model with each precision variant; time one step and measure its peak memory.

    Every variant starts from the same weights (``make_model`` is called
    after the same seed), sees the same batch and uses Adam with ``lr``, so
    the loss curves are comparable. Step time comes from
    :func:`helpers.benchmark.time_callable`, peak memory from
    :func:`helpers.memory.measure_peak`: this module has no clock of its own.
    The gradients are cleared just before the measured step: the step would
    free them inside the measurement, which the CPU profiler does not count
    anyway (they were allocated before it started) and reports with a C++
    warning on stderr; cleared first, the peak is the same and nothing is printed.
    """
    device = torch.device(device)
    x, y = dev.to_device((x, y), device)
    specs = {
        "fp32": (torch.float32, None),
        "bf16": (torch.bfloat16, None),
        "fp16+scaler": (torch.float16, "scaler"),
    }
    results = []
    names = variants
    if progress:
        from tqdm.auto import tqdm

        names = tqdm(variants, desc=_("precision variants"))
    for name in names:
        dtype, scaling = specs[name]
        set_seed(0)
        model = make_model().to(device)
        optimizer = torch.optim.Adam(model.parameters(), lr=lr)
        scaler = torch.amp.GradScaler(device.type) if scaling else None

        def step() -> float:
            if dtype == torch.float32:
                return fp32_step(model, x, y, loss_fn, optimizer)
            if scaler is None:
                return autocast_step(model, x, y, loss_fn, optimizer, device.type, dtype)
            return scaled_step(model, x, y, loss_fn, optimizer, scaler, device.type, dtype)

        losses = [step() for _ in range(steps)]  # also the warm-up for the timing below
        timing = benchmark.time_callable(step, device, warmup=2, min_run_time=min_run_time, label=name, warn=False)
        optimizer.zero_grad(set_to_none=True)  # else the step frees them inside the measurement (docstring)
        peak = memory.measure_peak(step, device)
        results.append(VariantResult(name, dtype, losses, timing, int(peak)))
    return results
