"""Chapter 09's checks: a step's FLOPs against the measured peak, and a slow training step made fast.

``step_flops_utilisation`` is graded on numbers: the check counts the step with torch's ``FlopCounterMode``
(:func:`reference_flops`) and, when the learner's utilisation differs, recomputes it each typical wrong way
(the forward alone, a multiply-add counted as one FLOP, the time taken per sample) to name the mistake. The
batch sizes of the grade cells (5, 7) keep every mistake's factor apart from the others'.

``fast_step`` is graded by behaviour on a CPU. Torch's global optimizer hook sees each optimizer step: the
optimizer's class and settings (AdamW, with the lr the check passed and AdamW's defaults), whether it is fused,
and the gradients it steps with, which must be the true float32 gradients of the batch's mean loss at the same
weights within what autocast changes (clipping, a summed loss, a forgotten zero_grad show in the step where they
happen). The weights it trains must match :func:`slow_reference`'s (the chapter's slow step): within what
bfloat16 autocast allows, or float32's rounding where no forward ran under autocast; a GradScaler's skipped steps
(float16) are skipped by the reference too. :func:`helpers.speed.count_host_syncs` counts its host reads with
1, few and many batches (a read whose count grows with the steps is a sync in every step), and a forward hook
places each one before, inside or after the loop (a read in the first step only is inside); a forward hook
counts the model's calls (one per step, not one per sample). Nothing here reads the learner's source but for a
``synchronize`` written in a loop (chapter 08's rule), and nothing depends on speed.

The cases (sizes, seeds, times) stay in the grade cells; nothing here is a hidden case.
"""

from __future__ import annotations

import copy
import math
import sys
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from helpers.checks.ch08 import counted_twice, synchronize_in_loop
from helpers.checks.core import CheckFailed, check, solved
from helpers.checks.patching import patched
from helpers.i18n import N_, _

__all__ = ["check_fast_batched", "check_fast_fused", "check_fast_no_syncs", "check_fast_results",
           "check_utilisation", "make_model", "make_train_case", "reference_flops", "slow_reference"]


# --------------------------------------------------------------------------- exercise 1: utilisation


def make_model(width: int, seed: int, features: int = 12, classes: int = 5) -> nn.Module:
    """A three-layer MLP classifier, weights from ``seed``."""
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(features, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
                         nn.Linear(width, classes))


def _case(batch: int, width: int, seed: int) -> tuple[nn.Module, tuple[torch.Tensor, torch.Tensor]]:
    model = make_model(width, seed)
    g = torch.Generator().manual_seed(seed + 1000)
    return model, (torch.randn(batch, 12, generator=g), torch.randint(0, 5, (batch,), generator=g))


def reference_flops(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> tuple[int, int]:
    """(forward FLOPs, forward-and-backward FLOPs) of ``F.cross_entropy(model(x), y)``, by FlopCounterMode."""
    sys.audit("course.version", "helpers.checks.ch09:reference_flops")  # the grader: refused to the learner's code
    from torch.utils.flop_counter import FlopCounterMode  # noqa: PLC0415

    with FlopCounterMode(display=False) as forward, torch.no_grad():
        model(x)
    with FlopCounterMode(display=False) as step:
        F.cross_entropy(model(x), y).backward()
    model.zero_grad(set_to_none=True)
    return int(forward.get_total_flops()), int(step.get_total_flops())


#: the typical mistakes: (the forward alone, a factor on the FLOPs, a factor from the batch size, why)
_FORWARD_ONLY = N_("only the forward was counted: a training step is forward and backward, and the backward's matrix "
                   "products are about twice the forward's (count inside FlopCounterMode while both run)")
_HALVED = N_("a multiply-add was counted as one FLOP: FlopCounterMode already counts a product of (M, K) by (K, N) as "
             "2·M·N·K, and peaks are quoted the same way: do not halve it")
_PER_SAMPLE = N_("the time was taken per sample: `seconds` is one step over the whole batch, so the utilisation is the "
                 "step's FLOPs / seconds / peak, with no division or product by the batch size")
_PERCENT = N_("a percentage was returned: return the fraction (0.25, not 25)")


def _utilisation_mistakes(forward: int, total: int, seconds: float, peak: float, batch: int
                          ) -> list[tuple[float, list[str]]]:
    """What each typical mistake, and each pair of them, returns, with the mistakes' names."""
    singles = [(forward / total, [_FORWARD_ONLY]), (0.5, [_HALVED]), (float(batch), [_PER_SAMPLE]),
               (1.0 / batch, [_PER_SAMPLE]), (100.0, [_PERCENT])]
    factors = list(singles)
    for i, (f1, w1) in enumerate(singles):
        for f2, w2 in singles[i + 1:]:
            if w1 != w2:
                factors.append((f1 * f2, w1 + w2))
    return [(total * f / seconds / peak, whys) for f, whys in factors]


def check_utilisation(step_flops_utilisation: Callable[..., Any], batch: int, width: int, seconds: float,
                      peak: float, seed: int = 0) -> None:
    """step_flops_utilisation(model, (x, y), seconds, peak) == the step's FLOPs / seconds / peak."""
    reference_model, reference_data = _case(batch, width, seed)
    forward, total = reference_flops(reference_model, *reference_data)
    model, data = _case(batch, width, seed)
    got = solved(step_flops_utilisation, model, data, seconds, peak)
    if isinstance(got, torch.Tensor) and got.numel() == 1:
        got = got.item()
    check(isinstance(got, (int, float)) and not isinstance(got, bool),
          _("step_flops_utilisation returned {kind}; expected a number (the fraction of the peak).").format(
              kind=type(got).__name__))
    want = total / seconds / peak
    if math.isclose(got, want, rel_tol=1e-6):
        return
    case = _("(an MLP of width {width}, batch {batch}, {seconds:g} s a step, peak {peak:.3g} FLOP/s: the step is "
             "{total} FLOPs, its forward {forward})").format(width=width, batch=batch, seconds=seconds, peak=peak,
                                                              total=total, forward=forward)
    named = next((whys for value, whys in _utilisation_mistakes(forward, total, seconds, peak, batch)
                  if math.isclose(got, value, rel_tol=1e-6)), [])
    likely = " " + _("Likely:") + " " + (" " + _("And:") + " ").join(f"{_(why)}." for why in named) if named else ""
    raise CheckFailed(_("utilisation: got {got:.6g}, expected {want:.6g} {case}.").format(
        got=got, want=want, case=case) + likely)


# --------------------------------------------------------------------------- exercise 2: fast_step


def make_train_case(steps: int, batch: int, seed: int) -> tuple[nn.Module, list[tuple[torch.Tensor, torch.Tensor]]]:
    """A small classifier and ``steps`` batches of ``batch`` samples, all from ``seed``.

    Its weights (0.5 x randn) make the gradients' total norm 2-6 in every step of the grade cells' cases, so a
    clip_grad_norm_ to 1.0 changes each step's gradients by half or more."""
    g = torch.Generator().manual_seed(seed)
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 4))
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.5)
    batches = [(torch.randn(batch, 8, generator=g), torch.randint(0, 4, (batch,), generator=g)) for _ in range(steps)]
    return model, batches


def slow_reference(model: nn.Module, batches: Sequence[Any], lr: float = 1e-2,
                   skipped: Collection[int] = ()) -> list[float]:
    """The chapter's slow step (cell ``slow_step``), the answer fast_step must give: AdamW, one sample at a time.

    ``skipped``: the batches whose optimizer step a GradScaler skipped (an inf in float16's gradients); their loss
    is still computed and returned, and the weights and AdamW's state stay as they were, as a skipped fused step
    leaves them."""
    sys.audit("course.version", "helpers.checks.ch09:slow_reference")  # the grader: refused to the learner's code
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, foreach=False)
    losses = []
    for step, (x, y) in enumerate(batches):
        optimizer.zero_grad()
        total = 0.0
        for i in range(len(x)):
            loss = F.cross_entropy(model(x[i:i + 1]), y[i:i + 1]) / len(x)
            loss.backward()
            total += loss.item()
        if step not in skipped:
            optimizer.step()
        losses.append(total)
    return losses


def _flat(model: nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().float().flatten() for p in model.parameters()])


#: AdamW's defaults, slow_step's settings but for lr: (setting, value)
_ADAMW_DEFAULTS = (("betas", (0.9, 0.999)), ("eps", 1e-8), ("weight_decay", 1e-2), ("amsgrad", False),
                   ("maximize", False))


@dataclass
class _Training:
    """What :func:`_watch_training` saw while fast_step trained: one entry per optimizer step it made."""

    #: per optimizer step: (the batch it followed, the optimizer, its first parameter group's settings)
    steps: list[tuple[int, str, dict[str, Any], bool]] = field(default_factory=list)
    #: per optimizer step whose gradients were finite: (batch, ||g - g_true|| / ||g_true||, ||g|| / ||g_true||, cos)
    gradients: list[tuple[int, float, float, float]] = field(default_factory=list)
    #: the batches a GradScaler skipped (found an inf or NaN in their gradients)
    skipped: set[int] = field(default_factory=set)
    #: the dtype each forward ran under autocast (None: no autocast)
    autocast: list[torch.dtype | None] = field(default_factory=list)
    #: GradScaler.step calls of an enabled scaler
    scaler_steps: int = 0


def _batch_of(x: Any, batches: Sequence[Any], calls: int) -> int:
    """Which batch the model was called on: the one whose input shares x's memory, else the calls so far."""
    if isinstance(x, torch.Tensor):
        for i, (bx, _by) in enumerate(batches):
            if x is bx or (x.device == bx.device and x.untyped_storage().data_ptr() == bx.untyped_storage().data_ptr()):
                return i
    return min(calls, len(batches) - 1)


def _watch_training(fast_step: Callable[..., Any], model: nn.Module, batches: Sequence[Any], lr: float
                    ) -> tuple[Any, _Training]:
    """Run fast_step, and see each optimizer step it makes: the optimizer's class and settings, which batch it
    follows, and how far the gradients it steps with are from the true float32 gradients of that batch's mean
    cross-entropy at the same weights (so autocast's error does not add up over the steps, and clipping, a sum or
    a gradient not zeroed shows in the step where it happens)."""
    from torch.optim.optimizer import register_optimizer_step_pre_hook  # noqa: PLC0415

    seen = _Training()
    twin = copy.deepcopy(model)  # the check's own copy: the true gradients are computed on it
    current = [0]
    calls = [0]

    def forward(_module: nn.Module, args: Any) -> None:
        x = args[0] if args else None
        current[0] = _batch_of(x, batches, calls[0])
        calls[0] += 1
        kind = x.device.type if isinstance(x, torch.Tensor) else "cpu"
        seen.autocast.append(torch.get_autocast_dtype(kind) if torch.is_autocast_enabled(kind) else None)

    def true_gradients(batch: int) -> torch.Tensor:
        x, y = batches[batch]
        with torch.no_grad():
            for mine, theirs in zip(twin.parameters(), model.parameters()):
                mine.copy_(theirs.detach().float())
        twin.zero_grad(set_to_none=True)
        with torch.enable_grad(), torch.autocast(x.device.type, enabled=False):
            F.cross_entropy(twin(x), y).backward()
        return torch.cat([p.grad.flatten() for p in twin.parameters()])

    def before_step(optimizer: torch.optim.Optimizer, _args: Any, _kwargs: Any) -> None:
        del _args, _kwargs
        batch = current[0]
        group = optimizer.param_groups[0]
        settings = {k: group.get(k) for k in ("lr", *(name for name, _v in _ADAMW_DEFAULTS), "decoupled_weight_decay")}
        found_inf = getattr(optimizer, "found_inf", None)  # set by GradScaler.step for a fused optimizer
        finite = found_inf is None or not bool(found_inf)
        seen.steps.append((batch, type(optimizer).__name__, settings, finite))
        if not finite:
            return
        scale = getattr(optimizer, "grad_scale", None)  # a fused optimizer unscales inside its kernel
        grads = torch.cat([(p.grad.detach().float() if p.grad is not None else torch.zeros(p.shape)).flatten()
                           for p in model.parameters()])
        if scale is not None:
            grads = grads / scale.float()
        true = true_gradients(batch)
        norm = float(true.norm())
        seen.gradients.append((batch, float((grads - true).norm()) / norm, float(grads.norm()) / norm,
                               float(F.cosine_similarity(grads, true, dim=0))))

    scaler_step = torch.amp.GradScaler.step

    def step_through_scaler(scaler: torch.amp.GradScaler, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
        out = scaler_step(scaler, optimizer, *args, **kwargs)
        if scaler.is_enabled():
            seen.scaler_steps += 1
            found = scaler._per_optimizer_states[id(optimizer)]["found_inf_per_device"]
            if sum(float(v) for v in found.values()):
                seen.skipped.add(current[0])
        return out

    handles = [model.register_forward_pre_hook(forward), register_optimizer_step_pre_hook(before_step)]
    try:
        with patched([(torch.amp.GradScaler, "step", step_through_scaler)]):  # every spelling of GradScaler
            result = solved(fast_step, model, batches, lr)
    finally:
        for handle in handles:
            handle.remove()
    return result, seen


#: how far the gradients fast_step steps with may be from the true float32 ones, ||g - g_true|| / ||g_true||, in any
#: step. Measured on 11 cases x 4 learning rates (torch 2.13 CPU): bfloat16 autocast at most 16 % (its products
#: round to 8 bits: the direction moves, the length hardly), float16 with a GradScaler 0.6 %, float32 0; a forgotten
#: zero_grad at least 115 % in its worst step.
GRADIENT_TOLERANCE = 0.5
#: how far their length may be from the true gradients', | ||g|| / ||g_true|| - 1 |, in any step. Measured on the
#: same cases: bfloat16 autocast at most 1.3 %, float16 with a GradScaler 0.06 %; clip_grad_norm_(1.0) shortens them
#: by 50-85 % in every step (the gradients' norm is 2-6 in make_train_case), a summed loss lengthens them batch-fold.
GRADIENT_LENGTH_TOLERANCE = 0.1
#: how far the weights fast_step trains may be from slow_reference's, as ||w_fast - w_slow|| / ||w_slow - w_start||.
#: Measured on the grade cells' cases (6 seeds, 4 AdamW steps, lr 1e-2, torch 2.13 CPU): bfloat16 autocast put the
#: weights 0.3-8.8 % of the training's own movement away; a step that forgets zero_grad 39-45 % away. 0.2 passes
#: every autocast answer measured, with room, and fails the forgotten zero_grad.
WEIGHT_TOLERANCE = 0.2
#: the same without autocast, where nothing but float32's rounding (fused against one sample at a time) separates
#: them: measured at most 1e-6 on the grade cells' cases, where Adam for AdamW (weight decay left out) is 0.5-0.8 %
#: and clip_grad_norm_(1.0) 0.03 % (one step) to 8 %.
FLOAT32_WEIGHT_TOLERANCE = 1e-4
#: the losses under bfloat16 autocast were within 0.5 % of float32's on the same cases
LOSS_RTOL = 2e-2
#: host reads allowed in all, after the loop: the losses (and spares)
MAX_SYNCS = 3

_CLIPPED = N_("that is what clip_grad_norm_ does (or a loss divided by more than the batch size): slow_step does "
              "not clip, so fast_step must not either")
_SCALED_UP = N_("the loss must be the batch's mean, not its sum, and a GradScaler's scaled gradients must go through "
                "scaler.step(optimizer), which unscales them")


def _check_optimizer(seen: _Training, lr: float) -> None:
    """The optimizer that stepped is slow_step's: AdamW with the lr fast_step was given and AdamW's defaults."""
    for _batch, name, settings, _finite in seen.steps:
        adamw = name == "AdamW" or (name == "Adam" and settings.get("decoupled_weight_decay"))
        check(adamw, _("fast_step steps a torch.optim.{name}, not an AdamW: slow_step trains with AdamW, whose "
                       "weight decay (0.01 by default) shrinks the weights themselves, which {name}'s does not. "
                       "Build torch.optim.AdamW(model.parameters(), lr=lr, fused=True).").format(name=name))
        check(math.isclose(settings["lr"], lr, rel_tol=1e-9),
              _("the optimizer's learning rate is {got:g}, but the check called fast_step with lr={lr:g}: pass the "
                "lr argument on (AdamW(..., lr=lr)) instead of writing a number in.").format(got=settings["lr"], lr=lr))
        for key, default in _ADAMW_DEFAULTS:
            value = tuple(settings[key]) if isinstance(settings[key], (list, tuple)) else settings[key]
            check(value == default, _("the optimizer's {key} is {got}, slow_step's AdamW uses {want}: leave AdamW's "
                                      "other settings at their defaults, as slow_step does.").format(
                key=key, got=value, want=default))


def check_fast_results(fast_step: Callable[..., Any], steps: int, batch: int, seed: int, lr: float = 1e-2) -> None:
    """The same optimizer (AdamW with ``lr``), the same gradients in each step (within what autocast changes), the
    same losses (a list of Python floats) and the same trained weights: within :data:`WEIGHT_TOLERANCE` under
    autocast, :data:`FLOAT32_WEIGHT_TOLERANCE` without. A GradScaler's skipped steps are skipped by the reference
    too."""
    theirs, batches = make_train_case(steps, batch, seed)
    ours, our_batches = make_train_case(steps, batch, seed)
    start = _flat(ours)
    losses, seen = _watch_training(fast_step, theirs, batches, lr)
    check(isinstance(losses, list) and all(type(v) is float for v in losses),
          _("fast_step returned {kind}; expected a list of Python floats, one loss per step, read once after the "
            "loop (torch.stack(losses).tolist()).").format(kind=type(losses).__name__))
    check(len(losses) == steps, _("fast_step returned {n} losses for {steps} batches; expected one per "
                                  "batch.").format(n=len(losses), steps=steps))
    _check_optimizer(seen, lr)
    half = sorted({str(d).replace("torch.", "") for d in seen.autocast if d == torch.float16})
    check(not half or seen.scaler_steps,
          _("fast_step runs float16 autocast without a GradScaler: float16's gradients underflow without loss "
            "scaling (chapter 05). Use bfloat16, or scale the loss with torch.amp.GradScaler and step through "
            "scaler.step(optimizer)."))
    stepped = [b for b, *_rest in seen.steps]
    taken = sorted(set(range(steps)) - seen.skipped)
    check(sorted(b for b, _n, _s, finite in seen.steps if finite) == taken and len(stepped) <= steps,
          _("the optimizer stepped {n} times for {steps} batches{skipped}; expected one step per batch.").format(
              n=len(stepped), steps=steps, skipped=_(" ({k} skipped by the GradScaler)").format(k=len(seen.skipped))
              if seen.skipped else ""))
    want = slow_reference(ours, our_batches, lr, skipped=seen.skipped)
    for i, (got, expected) in enumerate(zip(losses, want)):
        check(math.isclose(got, expected, rel_tol=LOSS_RTOL, abs_tol=1e-4),
              _("the loss of step {i}: got {got:.5f}, expected {want:.5f} (the mean cross-entropy of the batch, "
                "before its optimizer step), beyond what autocast changes.").format(i=i, got=got, want=expected))
    for step, off, ratio, cos in seen.gradients:
        long = abs(ratio - 1) > GRADIENT_LENGTH_TOLERANCE
        if long and cos > 0.95:  # the right direction: only their length is wrong
            raise CheckFailed(_("the gradients of step {step} are {ratio:.2f}x as long as those of the batch's mean "
                                "cross-entropy at the same weights, pointing the same way (autocast changes their "
                                "length by at most {tol:.0%}): {why}.").format(
                step=step, ratio=ratio, tol=GRADIENT_LENGTH_TOLERANCE, why=_(_CLIPPED) if ratio < 1 else _(_SCALED_UP)))
        check(off <= GRADIENT_TOLERANCE and not long,
              _("the gradients of step {step} are {off:.0%} away from those of the batch's mean cross-entropy at the "
                "same weights (autocast alone: at most {tol:.0%}): zero the gradients once per step "
                "(optimizer.zero_grad()), or they pile up from step to step, and take them from the batch's mean "
                "cross-entropy alone.").format(step=step, off=off, tol=GRADIENT_TOLERANCE))
    autocast = any(d is not None for d in seen.autocast)
    tolerance = WEIGHT_TOLERANCE if autocast else FLOAT32_WEIGHT_TOLERANCE
    moved = (_flat(ours) - start).norm()
    off = float((_flat(theirs) - _flat(ours)).norm() / moved)
    check(off <= tolerance,
          _("after {steps} steps the weights are {off:.2%} of the training's own movement away from the slow "
            "step's ({within}): train as slow_step does (zero_grad each step, the mean loss of the batch, AdamW with "
            "the same lr, no clipping).").format(
              steps=steps, off=off, within=_("autocast alone moves them at most {tol:.0%}").format(tol=tolerance)
              if autocast else _("in float32 they agree within {tol:.2%}").format(tol=tolerance)))


def _counter_running() -> Any:
    """The sync counter of the :func:`helpers.speed.count_host_syncs` block this runs in, or None."""
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack  # noqa: PLC0415

    from helpers import speed  # noqa: PLC0415

    return next((mode.counter for mode in _get_current_dispatch_mode_stack() if isinstance(mode, speed._Watch)), None)


def _run_marked(fast_step: Callable[..., Any], case: Any, marks: dict[int, list[int]]) -> Any:
    """Run fast_step on ``case``, noting how many host syncs had been counted when each call of the model began
    (so a sync made between the first step's forward and the last step's is known to be inside the loop)."""
    model, batches = case
    counter = _counter_running()
    seen = marks.setdefault(len(batches), [])
    seen.clear()
    handle = model.register_forward_pre_hook(lambda _m, _a: seen.append(len(counter) if counter is not None else 0))
    try:
        return solved(fast_step, model, batches, 1e-2)
    finally:
        handle.remove()


def check_fast_no_syncs(fast_step: Callable[..., Any], few: int, many: int, batch: int, seed: int) -> None:
    """No host sync inside the loop, whose count grows with the steps or not, no synchronize written in a loop, at
    most :data:`MAX_SYNCS` reads in all.

    fast_step runs with 1, ``few`` and ``many`` batches: a sync in every step makes the count grow, and a sync made
    in some steps only (the first, to print a loss) is seen where it happens, between the first step's forward and
    the last step's. Nothing is timed."""
    lines = synchronize_in_loop(fast_step)
    if lines:
        raise CheckFailed(_("fast_step calls a synchronize inside its loop (line {lines}): on a GPU it waits for every "
                            "queued kernel in every step. Read the losses once, after the loop.").format(
            lines=", ".join(map(str, lines))))
    counts = sorted({1, few, many})
    marks: dict[int, list[int]] = {}
    counted: dict[int, Any] = {}
    grown = []  # per pair of step counts: (low, high, the places whose count grew)
    for low, high in zip(counts, counts[1:]):
        pair, grows = counted_twice(
            lambda steps: make_train_case(steps, batch, seed), lambda case: _run_marked(fast_step, case, marks),
            low, high,
            _("fast_step removed the check's sync counter while it ran, so its host reads cannot be counted: no "
              "points."))
        counted.update(pair)
        grown.append((low, high, grows))
    low, high, grows = grown[-1]  # the most steps: a sync in every step grows here
    growing = [_("{place} ({low}x with {few} steps, {high}x with {many})").format(
        place=place, low=n_low, few=low, high=n_high, many=high) for place, n_low, n_high in grows]
    if growing:
        raise CheckFailed(_("a host sync runs in every step: {places}. On a GPU each one makes the CPU wait for "
                            "every queued kernel. Keep each loss on the device (loss.detach()) and read them all "
                            "once, after the loop: torch.stack(losses).tolist(). Reading the losses one by one "
                            "after the loop is still one read per step.").format(places="; ".join(growing)))
    top = counts[-1]
    calls = marks.get(top, [])
    inside = list(counted[top].events)[calls[0]:calls[-1]] if len(calls) >= 2 else []
    if inside:
        places = "; ".join(sorted({str(event) for event in inside}))
        raise CheckFailed(_("a host sync runs inside the loop, in some steps only: {places} ({n}x in {steps} steps, "
                            "between the first step's forward and the last one's). Even once (to print the first "
                            "loss) it makes the CPU wait for the GPU there; keep every loss on the device and read "
                            "them all once, after the loop.").format(places=places, n=len(inside), steps=top))
    for low, high, _grows in grown:
        check(len(counted[high]) == len(counted[low]),
              _("the number of host syncs grows with the steps: {low} with {few} steps, {high} with {many} "
                "({summary}).").format(low=len(counted[low]), few=low, high=len(counted[high]), many=high,
                                        summary=counted[high].summary()))
    check(len(counted[top].reads) <= MAX_SYNCS,
          _("{n} host reads after the loop ({summary}); one read of the stacked losses is enough.").format(
              n=len(counted[top].reads), summary=counted[top].summary()))


def check_fast_batched(fast_step: Callable[..., Any], steps: int, batch: int, seed: int) -> None:
    """One call of the model per step, on the whole batch: no Python loop over the samples."""
    model, batches = make_train_case(steps, batch, seed)
    rows: list[int] = []
    handle = model.register_forward_hook(lambda _m, args, _out: rows.append(int(args[0].shape[0]) if args else 0))
    try:
        solved(fast_step, model, batches, 1e-2)
    finally:
        handle.remove()
    if len(rows) > steps and sum(rows) >= steps * batch and max(rows, default=0) < batch:
        raise CheckFailed(_("the model ran {calls} times on {rows} rows at most for {steps} steps of {batch} samples: "
                            "a Python loop over the batch. Call the model once per step on the whole batch, model(x): "
                            "one large matrix product keeps the device busy where {batch} small ones leave it "
                            "waiting for Python.").format(calls=len(rows), rows=max(rows, default=0), steps=steps,
                                                          batch=batch))
    check(len(rows) == steps and all(r == batch for r in rows),
          _("the model ran {calls} times (on {rows} rows) for {steps} steps of {batch} samples; expected one call "
            "per step on the whole batch.").format(calls=len(rows), rows=sorted(set(rows)), steps=steps, batch=batch))


def check_fast_fused(fast_step: Callable[..., Any], steps: int, batch: int, seed: int) -> None:
    """Every optimizer step fast_step makes is a fused optimizer's, one step per batch."""
    from torch.optim.optimizer import register_optimizer_step_pre_hook  # noqa: PLC0415

    model, batches = make_train_case(steps, batch, seed)
    seen: list[tuple[str, bool, bool]] = []

    def note(optimizer: torch.optim.Optimizer, _args: Any, _kwargs: Any) -> None:
        groups = optimizer.param_groups
        seen.append((type(optimizer).__name__, all(bool(g.get("fused")) for g in groups),
                     any(bool(g.get("foreach")) for g in groups)))
        del _args, _kwargs

    handle = register_optimizer_step_pre_hook(note)
    try:
        solved(fast_step, model, batches, 1e-2)
    finally:
        handle.remove()
    check(len(seen) == steps, _("the optimizer stepped {n} times for {steps} batches; expected one step per "
                                "batch.").format(n=len(seen), steps=steps))
    unfused = [s for s in seen if not s[1]]
    if unfused:
        name, _fused, foreach = unfused[0]
        hint = (" " + _("foreach=True is the multi-tensor loop (a few kernels per operation over all tensors), not the "
                        "fused kernel.") if foreach else "")
        raise CheckFailed(_("the optimizer ({name}) is not fused: build it with torch.optim.AdamW(model.parameters(), "
                            "lr=lr, fused=True), which updates every parameter in one kernel (on a CPU too, since "
                            "torch 2.4).").format(name=name) + hint)
