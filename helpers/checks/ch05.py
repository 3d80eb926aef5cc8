"""Chapter 05's verdicts: an AMP training step (exercise 1) and the same step with clipping (exercise 2).

A check calls the learner's step once on a small fixed task and *watches* it
(:func:`spy_step`): the autocast state inside the forward pass, the gradients
backward produced, whether the optimizer stepped through the scaler, and
calls on any GradScaler other than the one passed in. Torch's public hooks do
most of the watching; the one patch (GradScaler's methods, to tell the given
scaler from one the step made itself) goes through
:func:`helpers.checks.patching.patched`, so it is undone on exit, on error too.

Each ``check_*`` function is the verdict of one grade cell. It takes the
case (the dtype, the scale, the seed) as arguments: the cases themselves,
visible and hidden, live in the grade cells.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from helpers import amp
from helpers.checks.core import CheckFailed, check, check_close, check_type, solved
from helpers.checks.patching import Change, patched
from helpers.i18n import N_, _
from helpers.models import MLP, flat_grads, flat_params, make_regression

__all__ = [
    "StepRecord",
    "check_clip_scaler",
    "check_clips",
    "check_clips_unscaled",
    "check_converges",
    "check_forward",
    "check_given_scaler",
    "check_no_pile_up",
    "check_returns",
    "check_scaled_backward",
    "check_scaler_step",
    "check_skip_inf",
    "check_still_amp",
    "check_update",
    "grading_loss",
    "grading_task",
    "inject_inf_grad",
    "reference_grads",
    "reference_loss",
    "run_on_task",
    "spy_step",
    "train_on_task",
]

# --------------------------------------------------------------------------- the task and what a correct step sees


def grading_task(seed: int = 0, n: int = 64, in_features: int = 8, hidden: int = 16) -> tuple[nn.Module, torch.Tensor, torch.Tensor]:
    """A small regression task: a fresh MLP and one batch, the same for the same seed.

    The weights are drawn under ``torch.random.fork_rng``, so a grade cell
    leaves the learner's random state as it found it.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = MLP(in_features=in_features, hidden=hidden, out_features=1, depth=1)
    x, y = make_regression(n=n, in_features=in_features, seed=seed)
    return model, x, y


def grading_loss(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """The mean squared error the checks hand the learner's step as ``loss_fn``, computed in float32.

    The exercise lets the loss run inside autocast or after it, on the
    low-precision output. Torch 2.11 (the course's floor) cannot run backward
    through ``F.mse_loss`` of a bf16/fp16 output and a float32 target ("Found
    dtype Float but expected BFloat16", pytorch issue #94086; 2.13 can), so
    the second placement would crash there. Autocast runs ``mse_loss`` in
    float32 anyway, so casting first gives the numbers ``F.mse_loss`` gives,
    on every torch the course supports.
    """
    return F.mse_loss(output.float(), target.float())


def reference_grads(model: nn.Module, x, y, loss_fn, device_type: str, dtype: torch.dtype) -> torch.Tensor:
    """The unscaled gradients of the autocast loss, computed on a copy (the model is untouched)."""
    twin = copy.deepcopy(model)
    twin.zero_grad(set_to_none=True)
    with torch.autocast(device_type, dtype=dtype):
        loss = loss_fn(twin(x), y)
    loss.backward()
    return flat_grads(twin)


def reference_loss(model: nn.Module, x, y, loss_fn, device_type: str = "cpu", dtype: torch.dtype | None = None) -> float:
    """The loss of ``model`` on (x, y), under autocast when a low-precision dtype is given; no gradients."""
    with torch.no_grad():
        if dtype is None or dtype == torch.float32:
            return float(loss_fn(model(x), y))
        with torch.autocast(device_type, dtype=dtype):
            return float(loss_fn(model(x), y))


@contextlib.contextmanager
def inject_inf_grad(model: nn.Module) -> Iterator[None]:
    """While active, the first parameter's gradient comes out of backward as inf (as an fp16 overflow would)."""
    handle = next(model.parameters()).register_hook(lambda g: torch.full_like(g, float("inf")))
    try:
        yield
    finally:
        handle.remove()


# --------------------------------------------------------------------------- watching one step


@dataclasses.dataclass
class StepRecord:
    """What one call of a learner's training step did, recorded by :func:`spy_step`."""

    result: Any = None
    forward: list[tuple[bool, torch.dtype | None]] = dataclasses.field(default_factory=list)
    backward_grads: torch.Tensor | None = None  # the gradients right after the last backward
    backward_count: int = 0
    scaler_steps: int = 0  # calls of scaler.step(optimizer) on the given scaler with this optimizer
    scaler_updates: int = 0  # calls of update() on the given scaler
    optimizer_steps: list[bool] = dataclasses.field(default_factory=list)  # one per optimizer.step: inside a scaler's step?
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
        """optimizer.step() calls made outside any scaler's step()."""
        return sum(1 for inside in self.optimizer_steps if not inside)


# The verdicts of typical mistakes, marked with N_ here and translated with _() where they are raised.
WEIGHTS_CAST = N_(
    "the model's weights are no longer float32 after the step: the step converted the model "
    "(`model.half()` / `model.to(dtype)`). Autocast keeps fp32 master weights and casts a copy for each matrix "
    "product; do not convert the model, wrap the forward pass in `with torch.autocast(device_type, dtype=dtype):`."
)

UPDATE_BEFORE_STEP = N_(
    "scaler.update() was called before scaler.step(optimizer) (GradScaler raised \"No inf checks were recorded "
    "prior to update.\"): update reads what step found. Call `scaler.step(optimizer)` first, then `scaler.update()`."
)

NO_GRADIENTS_AT_STEP = N_(
    "scaler.step(optimizer) found no gradients to check (GradScaler raised \"No inf checks were recorded for this "
    "optimizer.\"): {cause}"
)
GRADIENTS_CLEARED = N_(
    "backward ran, but the gradients were cleared between backward and the step. `optimizer.zero_grad()` belongs "
    "at the start of the step (or at the end, after `scaler.update()`), never between backward and "
    "`scaler.step(optimizer)`."
)
NO_BACKWARD = N_(
    "backward never ran. `scaler.scale(loss)` only returns the scaled loss; call `.backward()` on it: "
    "`scaler.scale(loss).backward()`."
)
BACKWARD_TWICE_FREED = N_(
    "backward ran twice through the same graph (torch raised \"Trying to backward through the graph a second "
    "time\"): the first backward freed it. Call backward once per step, on the scaled loss only: "
    "`scaler.scale(loss).backward()`, without a `loss.backward()` before it."
)

OWN_SCALER = N_(
    "`{name}` used a GradScaler of its own instead of the `scaler` argument: a scaler made inside the step starts "
    "from scratch on every call, so its scale never adapts and the caller's scaler (and checkpoint) never sees the "
    "step. Use the `scaler` you are given for `scale`, `step` and `update`."
)


def _prime(scaler: torch.amp.GradScaler, device: torch.device) -> None:
    """Create the scaler's scale tensor now, as its first ``scale()`` call would.

    Without this, a step that never calls ``scaler.scale`` makes
    ``scaler.step`` fail with an assertion, and one missing piece would fail
    every check; primed, it fails only the check on scaled gradients.
    """
    if scaler.is_enabled():
        scaler.scale(torch.zeros((), device=device))


def _call_step(step_fn: Callable, model: nn.Module, *args: Any) -> Any:
    """``solved(step_fn, model, *args)``, its warnings kept off stderr and the errors of typical mistakes named.

    A warning alone never costs points, but nbgrader scores 0 for a cell that
    writes to stderr, so warnings are recorded, not printed (filters that turn
    them into errors still apply). GradScaler's errors are told apart by
    their exact text, and each message quotes only what was raised:
    converting the model to fp16 makes ``scaler.step`` raise "Attempting to
    unscale FP16 gradients" (bf16 passes there and fails later on a dtype
    mismatch; either way the weights are not fp32 afterwards); ``update``
    before ``step`` asserts "... prior to update."; a ``step`` that finds no
    gradients asserts "... for this optimizer." (backward never ran, or the
    gradients were cleared after it: a hook counting backward passes tells
    which).
    """
    backwards = [0]
    handle = next(model.parameters()).register_post_accumulate_grad_hook(lambda p: backwards.__setitem__(0, backwards[0] + 1))
    try:
        with warnings.catch_warnings(record=True):
            result = solved(step_fn, model, *args)
    except ValueError as err:
        if "unscale FP16 gradients" in str(err):
            raise CheckFailed(_(WEIGHTS_CAST)) from None
        raise
    except AssertionError as err:
        if "No inf checks were recorded prior to update" in str(err):
            raise CheckFailed(_(UPDATE_BEFORE_STEP)) from None
        if "No inf checks were recorded for this optimizer" in str(err):
            cause = GRADIENTS_CLEARED if backwards[0] else NO_BACKWARD
            raise CheckFailed(_(NO_GRADIENTS_AT_STEP).format(cause=_(cause))) from None
        raise
    except RuntimeError as err:
        if "backward through the graph a second time" in str(err):
            raise CheckFailed(_(BACKWARD_TWICE_FREED)) from None
        raise
    finally:
        handle.remove()
    if any(p.dtype != torch.float32 for p in model.parameters()):
        raise CheckFailed(_(WEIGHTS_CAST))
    return result


def _scaler_spies(scaler: torch.amp.GradScaler, optimizer, rec: StepRecord, state: dict) -> list[Change]:
    """Replacements for GradScaler's scale/step/update that record which scaler was used, and how.

    They patch the class (every spelling of GradScaler, the deprecated CUDA
    one included, is this class or a subclass), so a scaler the step makes
    itself is seen too. An optimizer step run inside any scaler's ``step``
    counts as inside a scaler, so a check on direct steps does not misname
    that mistake.
    """
    cls = torch.amp.GradScaler

    def spy(name: str) -> Callable:
        original = getattr(cls, name)

        def method(self, *args: Any, **kwargs: Any) -> Any:
            if self is not scaler:
                rec.other_scalers += 1
            elif name == "step" and (args[0] if args else kwargs.get("optimizer")) is optimizer:
                rec.scaler_steps += 1
            elif name == "update":
                rec.scaler_updates += 1
            if name != "step":
                return original(self, *args, **kwargs)
            state["inside"] = True
            try:
                return original(self, *args, **kwargs)
            finally:
                state["inside"] = False

        return method

    return [(cls, name, spy(name)) for name in ("scale", "step", "update")]


def _hooks(model: nn.Module, optimizer, device_type: str, rec: StepRecord, state: dict) -> list:
    """Public hooks that record the forward's autocast state, the gradients after backward and at each step."""
    params = list(model.parameters())
    latest: dict[int, torch.Tensor] = {}

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

    return [model.register_forward_pre_hook(pre_forward),
            *(p.register_post_accumulate_grad_hook(after_accumulate(i)) for i, p in enumerate(params)),
            optimizer.register_step_pre_hook(pre_step)]


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

    Records the autocast state at the start of each forward pass, the
    gradients right after backward (before any unscaling), every
    ``optimizer.step`` and whether it ran inside a scaler's ``step``, the
    gradients the optimizer saw, the scale and parameters before and after,
    and calls on any *other* GradScaler. The scaler is primed first (see
    :func:`_prime`). An unsolved stub fails through
    :func:`helpers.checks.solved`, naming the learner's function. Every hook
    and patch is removed afterwards, even after an error.
    """
    rec = StepRecord()
    state = {"inside": False}
    _prime(scaler, next(model.parameters()).device)
    rec.params_before = flat_params(model)
    rec.scale_before = float(scaler.get_scale())
    handles = _hooks(model, optimizer, device_type, rec, state)
    try:
        with inject_inf_grad(model) if inf_grad else contextlib.nullcontext(), \
                patched(_scaler_spies(scaler, optimizer, rec, state)):
            rec.result = _call_step(step_fn, model, x, y, loss_fn, optimizer, scaler, device_type, dtype, *extra)
    finally:
        for h in handles:
            h.remove()
    rec.params_after = flat_params(model)
    rec.scale_after = float(scaler.get_scale())
    return rec


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
    """One watched call of ``step_fn`` on a fresh :func:`grading_task`, with SGD and a fresh scaler.

    Before the call, the unscaled autocast gradients and loss of the same
    model are computed on a copy, so a check can compare against them. The
    returned record also holds the model, batch, optimizer and scaler, for a
    second call with :func:`spy_step`.
    """
    model, x, y = grading_task(seed)
    model, x, y = model.to(device_type), x.to(device_type), y.to(device_type)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    scaler = torch.amp.GradScaler(device_type, init_scale=init_scale, growth_interval=growth_interval)
    with _one_thread():
        ref_grads = reference_grads(model, x, y, grading_loss, device_type, dtype)
        ref_loss = reference_loss(model, x, y, grading_loss, device_type, dtype)
        rec = spy_step(step_fn, model, x, y, grading_loss, optimizer, scaler, device_type, dtype, *extra, inf_grad=inf_grad)
    rec.model, rec.x, rec.y, rec.optimizer, rec.scaler = model, x, y, optimizer, scaler
    rec.reference_grads, rec.reference_loss = ref_grads, ref_loss
    return rec


def train_on_task(
    step_fn: Callable | None, dtype: torch.dtype, *extra: Any, steps: int = 50, lr: float = 0.1, seed: int = 0,
    device_type: str = "cpu",
) -> tuple[float, float]:
    """Train a fresh :func:`grading_task` for ``steps`` steps; returns the fp32 loss before and after.

    ``step_fn=None`` (or ``dtype=float32``) trains with the course's
    :func:`helpers.amp.fp32_step`, the baseline. Otherwise each call gets a
    new scaler whose scale is 1 and the gradients are cleared before each
    call, so the result judges only the arithmetic of the step: scaling,
    updating and clearing gradients have checks of their own, and one
    mistake should not fail every check.
    """
    model, x, y = grading_task(seed)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    before = reference_loss(model, x, y, grading_loss)
    with _one_thread():
        for _ in range(steps):
            if step_fn is None or dtype == torch.float32:
                amp.fp32_step(model, x, y, grading_loss, optimizer)
                continue
            optimizer.zero_grad(set_to_none=True)
            scaler = torch.amp.GradScaler(device_type, init_scale=1.0)
            _prime(scaler, x.device)
            _call_step(step_fn, model, x, y, grading_loss, optimizer, scaler, device_type, dtype, *extra)
    return before, reference_loss(model, x, y, grading_loss)


def _name(step_fn: Callable) -> str:
    return getattr(step_fn, "__name__", _("the step"))


def _run(step_fn: Callable, dtype: torch.dtype, *extra: Any, **options: Any) -> StepRecord:
    """:func:`run_on_task`, failing at once, by name, when the step did nothing at all (a constant answer)."""
    rec = run_on_task(step_fn, dtype, *extra, **options)
    check(rec.forward or rec.backward_count or rec.optimizer_steps,
          _("`{name}` did nothing: it never called the model, backward or the optimizer (it returned {result}). Write "
            "the whole step: forward under autocast, scaled backward, `scaler.step`, `scaler.update`.").format(
              name=_name(step_fn), result=repr(rec.result)[:60]))
    return rec


def check_given_scaler(rec: StepRecord, name: str) -> None:
    """Fail, naming the mistake, if the recorded step used a GradScaler other than the one passed in."""
    if rec.other_scalers:
        raise CheckFailed(_(OWN_SCALER).format(name=name))


# --------------------------------------------------------------------------- verdicts shared by both exercises


def _scaled_backward(rec: StepRecord, scale: float, unscaled_hint: str, other_hint: str) -> None:
    """Backward ran on the loss multiplied by ``scale``; the hint (translated by the caller, which words it for its
    exercise) says what to fix: backward on the unscaled loss, or otherwise off."""
    check(rec.backward_count > 0, _("backward never ran: call `scaler.scale(loss).backward()`."))
    ratio = (rec.backward_grads.norm() / rec.reference_grads.norm()).item()
    check(abs(ratio / scale - 1) < 0.1,
          _("backward produced gradients {ratio:.4g} times the true ones; with the scale at {scale:.0f} they should "
            "be {scale:.0f} times larger").format(ratio=ratio, scale=scale)
          + ": " + (unscaled_hint if abs(ratio - 1) < 0.1 else other_hint))


def _true_gradients(step_fn: Callable, dtype: torch.dtype, *extra: Any, seed: int = 0) -> None:
    """At a scale of 1, the gradients backward leaves must be the true ones: not twice them, not half.

    At a large scale an extra unscaled ``loss.backward()`` hides: it adds the
    true gradients to ``scale`` times them, a factor of (1 + 1/scale), inside
    any tolerance. With the scale at 1 (as a disabled scaler is) it doubles them.
    """
    rec = _run(step_fn, dtype, *extra, lr=0.0, init_scale=1.0, seed=seed)
    check(rec.backward_count > 0, _("backward never ran: call `scaler.scale(loss).backward()`."))
    ratio = (rec.backward_grads.norm() / rec.reference_grads.norm()).item()
    if abs(ratio - 1) < 0.05:
        return
    twice = _("backward ran more than once ({count} times in one call), and the gradients add up: with "
              "`loss.backward()` and then `scaler.scale(loss).backward()` each gradient is (1 + 1/scale) times the "
              "true one, twice it when the scale is 1 (a disabled scaler, as with bf16). Call backward once, on "
              "`scaler.scale(loss)`.").format(count=rec.backward_count)
    raise CheckFailed(_("with the scale at 1, backward left gradients {ratio:.3g} times the true ones; expected "
                        "equal").format(ratio=ratio)
                      + ": " + (twice if rec.backward_count > 1 else
                                _("backward should run once, on `scaler.scale(loss)` of this batch's loss.")))


def _returns_loss(rec: StepRecord, name: str, what: str = "") -> None:
    check_type(rec.result, float, _("the value {name} returned{what}").format(name=name, what=what),
               _("return `loss.item()`: a Python float (a tensor would keep the graph alive and, on a GPU, "
                 "synchronise whenever it is compared)."))
    check_close(rec.result, rec.reference_loss, _("the returned loss{what}").format(what=what),
                _("return the loss of this batch, unscaled: `loss.item()`, not `scaler.scale(loss).item()`."),
                rtol=0.05, atol=1e-6)


def _no_pile_up(step_fn: Callable, dtype: torch.dtype, *extra: Any, seed: int = 0) -> None:
    """The same batch twice, learning rate 0 and a scale of 1: the second backward must equal the first."""
    first = _run(step_fn, dtype, *extra, lr=0.0, init_scale=1.0, seed=seed)
    with _one_thread():
        second = spy_step(step_fn, first.model, first.x, first.y, grading_loss, first.optimizer,
                          torch.amp.GradScaler("cpu", init_scale=1.0), "cpu", dtype, *extra)
    ratio = (second.backward_grads.norm() / first.backward_grads.norm()).item()
    check(abs(ratio - 1) < 0.01,
          _("on the second call the gradients were {ratio:.3g} times those of the first, for the same batch and "
            "weights; expected equal: gradients pile up (accumulate) across calls. Clear them in every step with "
            "`optimizer.zero_grad()` (at the start or at the end).").format(ratio=ratio))


# --------------------------------------------------------------------------- exercise 1: amp_train_step


def check_forward(step_fn: Callable, dtype: torch.dtype, seed: int = 0) -> None:
    """The forward pass runs under autocast with the dtype the step is given."""
    rec = _run(step_fn, dtype, seed=seed)
    check(rec.forward, _("{name} never called the model: compute `model(x)` inside the step.").format(
        name=_name(step_fn)))
    enabled, seen = rec.forward[0]
    check(enabled, _("the forward pass ran without autocast (autocast was off inside the model, asked for {dtype}): "
                     "wrap `model(x)` in `with torch.autocast(device_type, dtype=dtype):`, with the `device_type` you "
                     "are given (here 'cpu': autocast for another device type, such as a hard-coded 'cuda', does "
                     "nothing on this one). (`torch.cuda.amp.autocast` is deprecated and does nothing on a "
                     "CPU.)").format(dtype=dtype))
    check(seen == dtype, _("the forward pass ran under autocast with {seen}, but the step was given dtype={dtype}: "
                           "pass the `dtype` argument to torch.autocast instead of a fixed dtype.").format(
                               seen=seen, dtype=dtype))


def check_scaled_backward(step_fn: Callable, dtype: torch.dtype, scale: float, seed: int = 0) -> None:
    """Backward runs on ``scaler.scale(loss)``: the gradients come out ``scale`` times the true ones."""
    rec = _run(step_fn, dtype, init_scale=scale, seed=seed)
    check_given_scaler(rec, _name(step_fn))
    _scaled_backward(rec, scale, _("backward ran on the unscaled loss. Call `scaler.scale(loss).backward()`, not "
                                   "`loss.backward()`, so that small fp16 gradients do not underflow."),
                     _("backward should run once, on `scaler.scale(loss)`."))
    _true_gradients(step_fn, dtype, seed=seed)


def check_scaler_step(step_fn: Callable, dtype: torch.dtype, seed: int = 0) -> None:
    """The optimizer steps once, through ``scaler.step(optimizer)``."""
    rec = _run(step_fn, dtype, seed=seed)
    check_given_scaler(rec, _name(step_fn))
    check(rec.optimizer_steps, _("the optimizer never stepped: call `scaler.step(optimizer)`."))
    check(rec.direct_steps == 0,
          _("optimizer.step() was called directly, not through `scaler.step(optimizer)`: scaler.step unscales the "
            "gradients, checks them for inf/NaN and skips the step if it finds any; a direct optimizer.step() cannot "
            "skip. Replace it with `scaler.step(optimizer)`."))
    check(rec.scaler_steps == 1, _("scaler.step(optimizer) ran {count} times in one step; expected once.").format(
        count=rec.scaler_steps))


def check_update(step_fn: Callable, dtype: torch.dtype, seed: int = 0) -> None:
    """``scaler.update()`` runs once after the step (the scale grows at growth_interval=1; a second call works)."""
    rec = _run(step_fn, dtype, init_scale=2.0**10, growth_interval=1, seed=seed)
    check_given_scaler(rec, _name(step_fn))
    check(rec.scale_after == 2 * rec.scale_before,
          _("with growth_interval=1, the scale after one clean step was {got:.0f}; expected {want:.0f}").format(
              got=rec.scale_after, want=2 * rec.scale_before)
          + ": " + (_("scaler.update() was not called. Call `scaler.update()` after `scaler.step(optimizer)`; it "
                      "adjusts the scale (and without it the next step fails).") if rec.scale_after == rec.scale_before
                    else _("call `scaler.update()` exactly once, after `scaler.step(optimizer)`.")))
    try:
        with _one_thread():
            spy_step(step_fn, rec.model, rec.x, rec.y, grading_loss, rec.optimizer, rec.scaler, "cpu", dtype)
    except RuntimeError as err:
        raise CheckFailed(_("a second call with the same scaler raised RuntimeError: {err} Call `scaler.update()` "
                            "once at the end of every step.").format(err=err)) from None


def check_no_pile_up(step_fn: Callable, dtype: torch.dtype, seed: int = 0) -> None:
    """Gradients do not pile up from one call to the next."""
    _no_pile_up(step_fn, dtype, seed=seed)


def check_skip_inf(step_fn: Callable, dtype: torch.dtype, seed: int = 0) -> None:
    """An inf gradient skips the optimizer step and halves the scale."""
    rec = _run(step_fn, dtype, init_scale=2.0**10, inf_grad=True, seed=seed)
    check_given_scaler(rec, _name(step_fn))
    check(torch.equal(rec.params_after, rec.params_before),
          _("a gradient was inf, and the weights changed anyway: the step was not skipped. Step with "
            "`scaler.step(optimizer)`, which skips optimizer.step() when a gradient is inf/NaN; a direct "
            "optimizer.step() writes the inf/NaN into the weights."))
    check(rec.scaler_updates > 0,
          _("after an inf gradient the scale was {got:.0f}; expected {want:.0f} (halved): scaler.update() was not "
            "called. Call `scaler.update()` after `scaler.step(optimizer)`; it lowers the scale after an "
            "inf.").format(got=rec.scale_after, want=rec.scale_before / 2))
    check(rec.scale_after == rec.scale_before / 2,
          _("after an inf gradient the scale was {got:.0f}; expected {want:.0f} (halved): the scaler never saw the "
            "inf. Call `scaler.step(optimizer)` right after backward, without clearing the gradients in between "
            "(zero_grad belongs at the start or at the end of the step).").format(
              got=rec.scale_after, want=rec.scale_before / 2))


def check_returns(step_fn: Callable, dtype: torch.dtype, scale: float = 2.0**10, seed: int = 0) -> None:
    """The step returns this batch's unscaled loss as a Python float."""
    rec = _run(step_fn, dtype, init_scale=scale, seed=seed)
    _returns_loss(rec, _name(step_fn), "" if dtype == torch.bfloat16 else f" ({str(dtype).replace('torch.', '')})")


def check_converges(step_fn: Callable, dtype: torch.dtype, steps: int = 50, seed: int = 0) -> None:
    """``steps`` calls end near the loss that as many fp32 steps reach: not above it, and not far below it either.

    Two-sided, because a step whose gradients are too large (backward run
    twice) trains *faster* than fp32 at the same learning rate; a correct
    step lands within a fraction of a percent of fp32's loss here.
    """
    start, fp32_final = train_on_task(None, torch.float32, steps=steps, seed=seed)
    final = train_on_task(step_fn, dtype, steps=steps, seed=seed)[1]  # not `_, final =`: that would shadow _()
    told = _("after {steps} steps in {dtype} the loss is {final:.4g}; fp32 went from {start:.4g} to "
             "{fp32_final:.4g}").format(steps=steps, dtype=dtype, final=final, start=start, fp32_final=fp32_final)
    check(final >= 0.8 * fp32_final - 1e-3,
          _("{told}: far below fp32's, with the same learning rate, so the optimizer used gradients larger than the "
            "true ones: backward ran more than once (`loss.backward()` and then `scaler.scale(loss).backward()`), or "
            "the loss was multiplied. Call backward once, on `scaler.scale(loss)`, and let `scaler.step` "
            "unscale.").format(told=told))
    check(final < 0.5 * start and final <= 1.2 * fp32_final + 1e-3,
          _("{told}: the step does not train the model. Compute the loss of `model(x)` against `y` with `loss_fn`, "
            "backpropagate it, and step the optimizer while the gradients are still there (zero_grad belongs at "
            "the start or at the end of the step, never between backward and the step).").format(told=told))


# --------------------------------------------------------------------------- exercise 2: amp_clip_step


def _true_norm(dtype: torch.dtype, seed: int) -> float:
    model, x, y = grading_task(seed)
    return reference_grads(model, x, y, grading_loss, "cpu", dtype).norm().item()


def check_clips_unscaled(step_fn: Callable, dtype: torch.dtype, scale: float, seed: int = 0) -> None:
    """Clipping sees the true gradients: at twice their norm, it leaves them alone, whatever the scale."""
    max_norm = 2 * _true_norm(dtype, seed)
    rec = _run(step_fn, dtype, max_norm, init_scale=scale, seed=seed)
    check(rec.backward_count > 0, _("backward never ran: call `scaler.scale(loss).backward()`."))
    check(rec.grads_at_step,
          _("the optimizer never stepped: finish with `scaler.step(optimizer)` and `scaler.update()`."))
    expected = (rec.backward_grads / rec.scale_before).norm().item()  # what unscale_ makes of them
    seen = rec.grads_at_step[-1].norm().item()
    if abs(seen / expected - 1) < 0.05:
        return
    told = _("the gradients reached the optimizer with norm {seen:.3g}; unscaled, they had norm {expected:.3g}, "
             "below max_norm={max_norm:.3g}, so clipping should have left them alone").format(
                 seen=seen, expected=expected, max_norm=max_norm)
    check(abs(seen * scale / expected - 1) > 0.05,
          _("{told}: they were divided by the scale twice (1/{scale:.0f} of the true norm). "
            "`scaler.unscale_(optimizer)` already divides the gradients in place, and `scaler.step` then knows not to "
            "divide again: remove your own division by the scale.").format(told=told, scale=scale))
    check(seen >= expected,
          _("{told}: they were clipped while still scaled (by the scale, here {scale:.0f}). Call "
            "`scaler.unscale_(optimizer)` before `clip_grad_norm_`.").format(told=told, scale=scale))
    raise CheckFailed(f"{told}.")


def check_clips(step_fn: Callable, dtype: torch.dtype, fraction: float = 0.25, seed: int = 0) -> None:
    """With max_norm a ``fraction`` of the true norm, the gradients reaching the optimizer have norm max_norm."""
    max_norm = fraction * _true_norm(dtype, seed)
    rec = _run(step_fn, dtype, max_norm, seed=seed)
    check(rec.grads_at_step,
          _("the optimizer never stepped: finish with `scaler.step(optimizer)` and `scaler.update()`."))
    seen = rec.grads_at_step[-1].norm().item()
    unclipped = (rec.backward_grads / rec.scale_before).norm().item() if rec.backward_count else seen
    check(seen <= max_norm * 1.01,
          _("the gradients reached the optimizer with norm {seen:.3g}, above max_norm={max_norm:.3g}").format(
              seen=seen, max_norm=max_norm)
          + ": " + (_("they were changed, but not to a total norm of max_norm: `clip_grad_value_` caps each element, "
                      "not the norm. Use `torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)`.")
                    if seen < 0.98 * unclipped else
                    _("they were not clipped before the optimizer stepped. Call "
                      "`torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)` after "
                      "`scaler.unscale_(optimizer)` and before `scaler.step(optimizer)`.")))


def check_clip_scaler(step_fn: Callable, dtype: torch.dtype, seed: int = 0) -> None:
    """After clipping the step still goes through the scaler: an inf gradient skips it and halves the scale."""
    try:
        rec = _run(step_fn, dtype, 1.0, init_scale=2.0**10, inf_grad=True, seed=seed)
    except RuntimeError as err:
        check("non-finite" not in str(err),
              _("clip_grad_norm_ raised an error on an inf gradient (error_if_nonfinite=True): with a scaler an inf "
                "gradient is expected now and then, and scaler.step skips that step. Leave error_if_nonfinite off."))
        raise
    check_given_scaler(rec, _name(step_fn))
    check(rec.direct_steps == 0 and torch.equal(rec.params_after, rec.params_before),
          _("optimizer.step() was called directly after unscale_ and clipping, so an inf gradient reached the "
            "weights: after clipping, step with `scaler.step(optimizer)`; it knows the gradients are already unscaled "
            "and skips the step when one is inf/NaN."))
    check(rec.scale_after == rec.scale_before / 2,
          _("after an inf gradient the scale was {got:.0f}; expected {want:.0f}: call `scaler.update()` after "
            "`scaler.step(optimizer)`.").format(got=rec.scale_after, want=rec.scale_before / 2))


def check_still_amp(step_fn: Callable, dtype: torch.dtype, scale: float, seed: int = 0) -> None:
    """The clipping step is still exercise 1's step: autocast, scaled backward, a float loss, cleared gradients.

    ``max_norm`` is far above the gradients' norm (no clipping) and lr is 0,
    so a second call sees the same weights. Gradients that pile up are
    looked for at a scale of 1: unscale_ divides leftovers in place, so a
    large scale would hide them.
    """
    name = _name(step_fn)
    first = _run(step_fn, dtype, 1e6, lr=0.0, init_scale=scale, seed=seed)
    check_given_scaler(first, name)
    check(first.forward, _("{name} never called the model: compute `model(x)` inside the step.").format(name=name))
    enabled, seen = first.forward[0]
    check((enabled, seen) == (True, dtype),
          _("the forward pass ran with {autocast}, but the step was given dtype={dtype}: wrap `model(x)` in "
            "`with torch.autocast(device_type, dtype=dtype):`, as in exercise 1.").format(
              autocast=_("autocast in {seen}").format(seen=seen) if enabled else _("autocast off"), dtype=dtype))
    again = _("call `scaler.scale(loss).backward()`, not `loss.backward()`, as in exercise 1.")
    _scaled_backward(first, scale, again, again)
    _true_gradients(step_fn, dtype, 1e6, seed=seed)
    _returns_loss(first, name)
    _no_pile_up(step_fn, dtype, 1e6, seed=seed)
