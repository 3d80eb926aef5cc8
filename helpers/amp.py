"""Mixed precision: the fp32, autocast and autocast+GradScaler training steps, and what to use where.

Chapter 05 (mixed precision) teaches it. The three steps are the reference
versions of what the chapter asks a learner to write; they use today's API
only (``torch.autocast(device_type, dtype)`` and ``torch.amp.GradScaler(device)``),
never the deprecated ``torch.cuda.amp`` spellings, which warn since torch 2.4.

Also here, because grade cells need them and must not paste code: a spy that
records what one training step did (the autocast state inside the forward
pass, the gradients backward produced, whether the optimizer stepped through
the scaler), a way to put an inf into a gradient, and a fixed small task.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch._dynamo  # noqa: F401 - every optimizer imports it when first built (seconds, cold): pay at import, not in a check
import torch.nn.functional as F
from torch import nn

from helpers import benchmark, memory
from helpers import device as dev
from helpers.checks import CheckFailed, solved
from helpers.models import MLP, make_regression, set_seed

__all__ = [
    "AmpPlan",
    "StepRecord",
    "VariantResult",
    "amp_plan",
    "autocast_policy",
    "autocast_step",
    "check_given_scaler",
    "compare_precisions",
    "flat_grads",
    "flat_params",
    "fp32_step",
    "grading_task",
    "inject_inf_grad",
    "low_precision_units",
    "reference_grads",
    "reference_loss",
    "run_on_task",
    "scaled_step",
    "spy_step",
    "trace_autocast",
    "train_on_task",
]

LOW_PRECISION = (torch.float16, torch.bfloat16)


# --------------------------------------------------------------------------- what to use where


def low_precision_units(device: str | torch.device) -> dict[str, bool | None]:
    """Which hardware features for fast fp16 / bf16 matrix products ``device`` has.

    Autocast *runs* in low precision on almost any device, but it is only
    faster where the hardware multiplies low-precision matrices natively:
    tensor cores (fp16 from Volta, bf16 from Ampere) or, on a CPU, AMX tiles.
    AVX512-BF16 only adds bf16 dot-product instructions, which may or may not
    beat fp32's tuned kernels; without either, bf16 is converted in software.
    CPU fp16 without AMX-FP16 is emulated and very slow. None means "cannot tell".
    """
    device = torch.device(device)
    if device.type == "cuda":
        major, _ = torch.cuda.get_device_capability(device)
        return {"fp16 tensor cores": major >= 7, "bf16 tensor cores": major >= 8, "tf32 tensor cores": major >= 8}
    if device.type == "cpu":
        probe = getattr(torch, "cpu", None)

        def ask(name: str) -> bool | None:
            fn = getattr(probe, name, None)
            try:
                return bool(fn()) if fn is not None else None
            except Exception:  # noqa: BLE001 - a probe that cannot answer says "unknown"
                return None

        return {
            "AMX (bf16 matrix tiles)": ask("_is_amx_tile_supported"),
            "AMX-FP16": ask("_is_amx_fp16_supported"),
            "AVX512-BF16 (bf16 dot products)": ask("_is_avx512_bf16_supported"),
        }
    return {}


@dataclasses.dataclass(frozen=True)
class AmpPlan:
    """How to run mixed precision on one device: autocast's device type, the dtype, and whether to scale."""

    device_type: str
    dtype: torch.dtype
    use_scaler: bool
    reason: str


def amp_plan(device: str | torch.device) -> AmpPlan:
    """The low-precision dtype to use on ``device``: bf16 where it is supported natively, else fp16 with a scaler.

    bf16 keeps fp32's exponent range, so gradients do not underflow and no
    GradScaler is needed; fp16 has 5 exponent bits and needs loss scaling.
    A GPU without native bf16 (before Ampere, e.g. a T4) gets fp16: torch
    would *emulate* bf16 there, slowly. On a CPU, autocast runs bf16 (its
    default); whether that is faster than fp32 depends on AMX/AVX512-BF16,
    see :func:`low_precision_units`.
    """
    device = torch.device(device)
    if device.type == "cuda":
        try:
            native_bf16 = torch.cuda.is_bf16_supported(including_emulation=False)
        except TypeError:  # older torch without the keyword
            native_bf16 = torch.cuda.is_bf16_supported()
        if native_bf16:
            return AmpPlan("cuda", torch.bfloat16, False, "this GPU multiplies bf16 natively (Ampere or newer)")
        return AmpPlan("cuda", torch.float16, True, "this GPU has no native bf16: fp16 tensor cores, with loss scaling")
    if device.type == "mps":
        return AmpPlan("mps", torch.float16, True, "fp16 is what every Apple GPU runs natively; it needs loss scaling")
    units = low_precision_units(device)
    if units.get("AMX (bf16 matrix tiles)"):
        note = "this CPU has AMX bf16 matrix units, so bf16 can beat fp32"
    elif units.get("AVX512-BF16 (bf16 dot products)"):
        note = "this CPU has bf16 dot products (AVX512-BF16) but no AMX matrix units: do not expect a speed-up"
    else:
        note = "this CPU has no bf16 matrix units: bf16 is converted in software, expect it to be slower"
    return AmpPlan(device.type, torch.bfloat16, False, f"CPU autocast runs bf16, which needs no scaler; {note}")


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
            kind = f"casts down to {str(dtype).replace('torch.', '')}"
        elif from_low == torch.float32:
            kind = "casts up to float32"
        else:
            kind = "follows its inputs"
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

        names = tqdm(variants, desc="precision variants")
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
        peak = memory.measure_peak(step, device)
        results.append(VariantResult(name, dtype, losses, timing, int(peak)))
    return results


# --------------------------------------------------------------------------- grading aids (spies, fakes, references)


def grading_task(seed: int = 0, n: int = 64, in_features: int = 8, hidden: int = 16) -> tuple[nn.Module, torch.Tensor, torch.Tensor]:
    """A fixed small regression task for the checks: a fresh MLP and one batch, always the same."""
    set_seed(seed)
    model = MLP(in_features=in_features, hidden=hidden, out_features=1, depth=1)
    x, y = make_regression(n=n, in_features=in_features, seed=seed)
    return model, x, y


def flat_params(model: nn.Module) -> torch.Tensor:
    """All parameters as one fp32 vector (a copy)."""
    return torch.cat([p.detach().float().flatten() for p in model.parameters()])


def flat_grads(model: nn.Module) -> torch.Tensor:
    """All gradients as one fp32 vector (zeros where a gradient is None)."""
    return torch.cat([
        (p.grad.detach().float().flatten() if p.grad is not None else torch.zeros(p.numel(), device=p.device))
        for p in model.parameters()
    ])


def reference_grads(model: nn.Module, x, y, loss_fn, device_type: str, dtype: torch.dtype) -> torch.Tensor:
    """The unscaled gradients of the autocast loss, computed on a copy (the model is untouched)."""
    twin = copy.deepcopy(model)
    twin.zero_grad(set_to_none=True)
    with torch.autocast(device_type, dtype=dtype):
        loss = loss_fn(twin(x), y)
    loss.backward()
    return flat_grads(twin)


def reference_loss(model: nn.Module, x, y, loss_fn, device_type: str | None = None, dtype: torch.dtype | None = None) -> float:
    """The loss of ``model`` on (x, y), under autocast when a dtype is given, without touching gradients."""
    with torch.no_grad():
        if dtype is None or dtype == torch.float32:
            return float(loss_fn(model(x), y))
        with torch.autocast(device_type, dtype=dtype):
            return float(loss_fn(model(x), y))


@contextlib.contextmanager
def inject_inf_grad(model: nn.Module) -> Iterator[None]:
    """While active, the first parameter's gradient comes out of backward as inf (as an fp16 overflow would)."""
    param = next(model.parameters())
    handle = param.register_hook(lambda g: torch.full_like(g, float("inf")))
    try:
        yield
    finally:
        handle.remove()


@dataclasses.dataclass
class StepRecord:
    """What one call of a learner's training step did, recorded by :func:`spy_step`."""

    result: Any = None
    forward: list[tuple[bool, torch.dtype | None]] = dataclasses.field(default_factory=list)
    backward_grads: torch.Tensor | None = None  # the gradients right after the last backward
    backward_count: int = 0
    scaler_steps: int = 0  # calls of scaler.step(optimizer) with this optimizer
    scaler_updates: int = 0  # calls of scaler.update()
    optimizer_steps: list[bool] = dataclasses.field(default_factory=list)  # one per optimizer.step: inside scaler.step?
    grads_at_step: list[torch.Tensor] = dataclasses.field(default_factory=list)  # what the optimizer saw
    other_scalers: int = 0  # scale/step/update calls on a GradScaler other than the one passed in
    params_before: torch.Tensor | None = None
    params_after: torch.Tensor | None = None
    scale_before: float | None = None
    scale_after: float | None = None
    # filled in by run_on_task: the task, and what a correct step would have seen
    model: nn.Module | None = None
    x: torch.Tensor | None = None
    y: torch.Tensor | None = None
    optimizer: Any = None
    scaler: Any = None
    reference_grads: torch.Tensor | None = None
    reference_loss: float | None = None

    @property
    def direct_steps(self) -> int:
        """optimizer.step() calls made outside scaler.step()."""
        return sum(1 for inside in self.optimizer_steps if not inside)


def _prime(scaler: torch.amp.GradScaler, device: torch.device) -> None:
    """Create the scaler's scale tensor now, as its first ``scale()`` call would.

    Without this, a step that never calls ``scaler.scale`` makes
    ``scaler.step`` fail with an assertion, and one missing piece would fail
    every check; primed, it fails only the check on scaled gradients.
    """
    if scaler.is_enabled():
        scaler.scale(torch.zeros((), device=device))


WEIGHTS_CAST = (
    "the model's weights are no longer float32 after the step: the step converted the model "
    "(`model.half()` / `model.to(dtype)`). Autocast keeps fp32 master weights and casts a copy for each matrix "
    "product; do not convert the model, wrap the forward pass in `with torch.autocast(device_type, dtype=dtype):`."
)

UPDATE_BEFORE_STEP = (
    "scaler.update() was called before scaler.step(optimizer) (GradScaler raised \"No inf checks were recorded "
    "prior to update\"): update reads what step found. Call `scaler.step(optimizer)` first, then `scaler.update()`."
)


def _call_step(step_fn: Callable, model: nn.Module, *args: Any) -> Any:
    """``solved(step_fn, model, *args)``, with the crashes of two wrong approaches explained by name.

    Converting the model to fp16 makes ``scaler.step`` raise "Attempting to
    unscale FP16 gradients" (bf16 passes there and fails later on a dtype
    mismatch); either way the weights are not fp32 afterwards. Calling
    ``scaler.update()`` before ``scaler.step()`` makes GradScaler assert.
    """
    try:
        result = solved(step_fn, model, *args)
    except ValueError as err:
        if "unscale FP16 gradients" in str(err):
            raise CheckFailed(WEIGHTS_CAST) from None
        raise
    except AssertionError as err:
        if "No inf checks were recorded" in str(err):
            raise CheckFailed(UPDATE_BEFORE_STEP) from None
        raise
    if any(p.dtype != torch.float32 for p in model.parameters()):
        raise CheckFailed(WEIGHTS_CAST)
    return result


@contextlib.contextmanager
def _watch_other_scalers(scaler: torch.amp.GradScaler, rec: StepRecord, state: dict) -> Iterator[None]:
    """While active, count calls on any GradScaler other than ``scaler`` (one the step made itself).

    Patches the class for the duration (every spelling of GradScaler, the
    deprecated CUDA one included, is this class or a subclass); an optimizer step run
    inside such a scaler's ``step`` counts as inside a scaler, so that a
    check on direct steps does not misname this mistake.
    """
    cls = torch.amp.GradScaler
    originals = {name: cls.__dict__[name] for name in ("scale", "step", "update")}

    def wrap(name):
        original = originals[name]

        def method(self, *args, **kwargs):
            if self is not scaler:
                rec.other_scalers += 1
            if name != "step" or self is scaler:
                return original(self, *args, **kwargs)
            state["inside"] = True
            try:
                return original(self, *args, **kwargs)
            finally:
                state["inside"] = False

        return method

    for name in originals:
        setattr(cls, name, wrap(name))
    try:
        yield
    finally:
        for name, original in originals.items():
            setattr(cls, name, original)


def spy_step(
    step_fn: Callable,
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    loss_fn: Callable,
    optimizer,
    scaler: torch.amp.GradScaler,
    device_type: str,
    dtype: torch.dtype,
    *extra: Any,
    inf_grad: bool = False,
) -> StepRecord:
    """Call ``step_fn(model, x, y, loss_fn, optimizer, scaler, device_type, dtype, *extra)`` once, watching it.

    Records, through public hooks only: the autocast state at the start of
    each forward pass, the gradients right after backward (before any
    unscaling), every ``optimizer.step`` and whether it ran inside
    ``scaler.step``, the gradients the optimizer saw, the scale and
    parameters before and after, and calls on any *other* GradScaler. The
    scaler is primed first (see :func:`_prime`). An unsolved stub fails
    through :func:`helpers.checks.solved`, naming the learner's function; a
    step that converts the model, or updates the scaler before stepping it,
    fails with a message naming that. Every hook is removed afterwards, even
    after an error.
    """
    rec = StepRecord()
    params = list(model.parameters())
    latest: dict[int, torch.Tensor] = {}
    state = {"inside": False}
    handles = []

    def pre_forward(module, inputs):
        enabled = torch.is_autocast_enabled(device_type)
        rec.forward.append((enabled, torch.get_autocast_dtype(device_type) if enabled else None))

    def after_accumulate(i):
        def hook(p):
            latest[i] = p.grad.detach().float().clone()
            if len(latest) == len(params):
                rec.backward_grads = torch.cat([latest[j].flatten() for j in range(len(params))])
                rec.backward_count += 1
                latest.clear()
        return hook

    def pre_step(opt, args, kwargs):
        rec.optimizer_steps.append(state["inside"])
        rec.grads_at_step.append(flat_grads(model))

    handles.append(model.register_forward_pre_hook(pre_forward))
    handles += [p.register_post_accumulate_grad_hook(after_accumulate(i)) for i, p in enumerate(params)]
    handles.append(optimizer.register_step_pre_hook(pre_step))
    original_step = scaler.step

    def scaler_step(opt, *args, **kwargs):
        if opt is optimizer:
            rec.scaler_steps += 1
        state["inside"] = True
        try:
            return original_step(opt, *args, **kwargs)
        finally:
            state["inside"] = False

    original_update = scaler.update

    def scaler_update(*args, **kwargs):
        rec.scaler_updates += 1
        return original_update(*args, **kwargs)

    scaler.step = scaler_step  # instance attributes: shadow the methods for this scaler only
    scaler.update = scaler_update
    _prime(scaler, params[0].device)
    rec.params_before = flat_params(model)
    rec.scale_before = float(scaler.get_scale())
    try:
        with inject_inf_grad(model) if inf_grad else contextlib.nullcontext(), _watch_other_scalers(scaler, rec, state):
            rec.result = _call_step(step_fn, model, x, y, loss_fn, optimizer, scaler, device_type, dtype, *extra)
    finally:
        for h in handles:
            h.remove()
        del scaler.step, scaler.update
    rec.params_after = flat_params(model)
    rec.scale_after = float(scaler.get_scale())
    return rec


OWN_SCALER = (
    "`{name}` used a GradScaler of its own instead of the `scaler` argument: a scaler made inside the step starts "
    "from scratch on every call, so its scale never adapts and the caller's scaler (and checkpoint) never sees the "
    "step. Use the `scaler` you are given for `scale`, `step` and `update`."
)


def check_given_scaler(rec: StepRecord, name: str) -> None:
    """Fail, naming the mistake, if the recorded step used a GradScaler other than the one passed in."""
    if rec.other_scalers:
        raise CheckFailed(OWN_SCALER.format(name=name))


@contextlib.contextmanager
def _one_thread() -> Iterator[None]:
    """Run the checks' tiny steps on one CPU thread, then restore the thread count.

    The grading task's tensors are a few kilobytes: handing each op to a
    thread pool costs more than the op, and on a busy machine far more.
    """
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def run_on_task(
    step_fn: Callable,
    dtype: torch.dtype,
    *extra: Any,
    lr: float = 0.1,
    init_scale: float = 2.0**10,
    growth_interval: int = 2000,
    inf_grad: bool = False,
    seed: int = 0,
    device_type: str = "cpu",
) -> StepRecord:
    """One spied call of ``step_fn`` on a fresh :func:`grading_task`, with SGD and a fresh scaler.

    Before the call, the unscaled autocast gradients and loss of the same
    model are computed on a copy, so a check can compare against them. The
    returned record also holds the model, batch, optimizer and scaler, for a
    second call with :func:`spy_step`.
    """
    model, x, y = grading_task(seed)
    device = torch.device(device_type)
    model, x, y = model.to(device), x.to(device), y.to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    scaler = torch.amp.GradScaler(device_type, init_scale=init_scale, growth_interval=growth_interval)
    with _one_thread():
        ref_grads = reference_grads(model, x, y, F.mse_loss, device_type, dtype)
        ref_loss = reference_loss(model, x, y, F.mse_loss, device_type, dtype)
        rec = spy_step(step_fn, model, x, y, F.mse_loss, optimizer, scaler, device_type, dtype, *extra, inf_grad=inf_grad)
    rec.model, rec.x, rec.y, rec.optimizer, rec.scaler = model, x, y, optimizer, scaler
    rec.reference_grads, rec.reference_loss = ref_grads, ref_loss
    return rec


def train_on_task(
    step_fn: Callable | None, dtype: torch.dtype, steps: int = 50, lr: float = 0.1, seed: int = 0, device_type: str = "cpu"
) -> tuple[float, float]:
    """Train a fresh :func:`grading_task` for ``steps`` steps; returns the fp32 loss before and after.

    ``step_fn=None`` (or ``dtype=float32``) trains with :func:`fp32_step`, the
    baseline. Otherwise each call gets a new scaler whose scale is 1 and the
    gradients are cleared before each call, so the result judges only the
    arithmetic of the step: scaling, updating and clearing gradients have
    checks of their own, and one mistake should not fail every check.
    """
    model, x, y = grading_task(seed)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    before = reference_loss(model, x, y, F.mse_loss)
    with _one_thread():
        for _ in range(steps):
            if step_fn is None or dtype == torch.float32:
                fp32_step(model, x, y, F.mse_loss, optimizer)
            else:
                optimizer.zero_grad(set_to_none=True)
                scaler = torch.amp.GradScaler(device_type, init_scale=1.0)
                _prime(scaler, x.device)
                _call_step(step_fn, model, x, y, F.mse_loss, optimizer, scaler, device_type, dtype)
    return before, reference_loss(model, x, y, F.mse_loss)
