"""Chapter 09's checks: a step's FLOPs against the measured peak, and a slow training step made fast.

``step_flops_utilisation`` is graded on numbers: the check counts the step with torch's ``FlopCounterMode``
(:func:`reference_flops`) and, when the learner's utilisation differs, recomputes it each typical wrong way
(the forward alone, a multiply-add counted as one FLOP, the time taken per sample) to name the mistake. The
batch sizes of the grade cells (5, 7) keep every mistake's factor apart from the others'.

``fast_step`` is graded by behaviour on a CPU: the weights it trains must match :func:`slow_reference`'s (the
chapter's slow step) within what bfloat16 autocast allows; :func:`helpers.speed.count_host_syncs` counts its
host reads with two numbers of batches (a read whose count grows with the steps is a sync in every step); a
forward hook counts the model's calls (one per step, not one per sample); torch's global optimizer hook sees
whether the optimizer that steps is fused. Nothing here reads the learner's source but for a ``synchronize``
written in a loop (chapter 08's rule), and nothing depends on speed.

The cases (sizes, seeds, times) stay in the grade cells; nothing here is a hidden case.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from helpers.checks.ch08 import counted_twice, synchronize_in_loop
from helpers.checks.core import CheckFailed, check, solved
from helpers.i18n import N_, _

__all__ = ["check_fast_batched", "check_fast_fused", "check_fast_no_syncs", "check_fast_results",
           "check_utilisation", "make_model", "make_train_case", "reference_flops", "slow_reference"]

#: how far the weights fast_step trains may be from slow_reference's, as ||w_fast - w_slow|| / ||w_slow - w_start||.
#: Measured on the grade cells' cases (6 seeds, 4 AdamW steps, lr 1e-2, torch 2.13 CPU): bfloat16 autocast put the
#: weights 0.3-8.8 % of the training's own movement away (float32, fused or not: exactly 0); a step that forgets
#: zero_grad 39-45 % away. 0.2 passes every autocast answer measured, with room, and fails the forgotten zero_grad.
WEIGHT_TOLERANCE = 0.2
#: the losses under bfloat16 autocast were within 0.5 % of float32's on the same cases
LOSS_RTOL = 2e-2
#: host reads allowed in all, after the loop: the losses (and spares)
MAX_SYNCS = 3


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
    """A small classifier and ``steps`` batches of ``batch`` samples, all from ``seed``."""
    g = torch.Generator().manual_seed(seed)
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 4))
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.5)
    batches = [(torch.randn(batch, 8, generator=g), torch.randint(0, 4, (batch,), generator=g)) for _ in range(steps)]
    return model, batches


def slow_reference(model: nn.Module, batches: Sequence[Any], lr: float = 1e-2) -> list[float]:
    """The chapter's slow step (cell ``slow_step``), the answer fast_step must give: AdamW, one sample at a time."""
    sys.audit("course.version", "helpers.checks.ch09:slow_reference")  # the grader: refused to the learner's code
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, foreach=False)
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        total = 0.0
        for i in range(len(x)):
            loss = F.cross_entropy(model(x[i:i + 1]), y[i:i + 1]) / len(x)
            loss.backward()
            total += loss.item()
        optimizer.step()
        losses.append(total)
    return losses


def _flat(model: nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().float().flatten() for p in model.parameters()])


def check_fast_results(fast_step: Callable[..., Any], steps: int, batch: int, seed: int, lr: float = 1e-2) -> None:
    """The same losses (a list of Python floats) and, within :data:`WEIGHT_TOLERANCE`, the same trained weights."""
    theirs, batches = make_train_case(steps, batch, seed)
    ours, our_batches = make_train_case(steps, batch, seed)
    start = _flat(ours)
    losses = solved(fast_step, theirs, batches, lr)
    want = slow_reference(ours, our_batches, lr)
    check(isinstance(losses, list) and all(type(v) is float for v in losses),
          _("fast_step returned {kind}; expected a list of Python floats, one loss per step, read once after the "
            "loop (torch.stack(losses).tolist()).").format(kind=type(losses).__name__))
    check(len(losses) == steps, _("fast_step returned {n} losses for {steps} batches; expected one per "
                                  "batch.").format(n=len(losses), steps=steps))
    for i, (got, expected) in enumerate(zip(losses, want)):
        check(math.isclose(got, expected, rel_tol=LOSS_RTOL, abs_tol=1e-4),
              _("the loss of step {i}: got {got:.5f}, expected {want:.5f} (the mean cross-entropy of the batch, "
                "before its optimizer step), beyond what autocast changes.").format(i=i, got=got, want=expected))
    moved = (_flat(ours) - start).norm()
    off = float((_flat(theirs) - _flat(ours)).norm() / moved)
    check(off <= WEIGHT_TOLERANCE,
          _("after {steps} steps the weights are {off:.0%} of the training's own movement away from the slow "
            "step's (autocast alone moves them at most {tol:.0%}): train as slow_step does (zero_grad each step, "
            "the mean loss of the batch, AdamW with the same lr).").format(steps=steps, off=off, tol=WEIGHT_TOLERANCE))


def check_fast_no_syncs(fast_step: Callable[..., Any], few: int, many: int, batch: int, seed: int) -> None:
    """No host read whose count grows with the steps, no synchronize written in a loop, at most :data:`MAX_SYNCS`
    reads in all."""
    lines = synchronize_in_loop(fast_step)
    if lines:
        raise CheckFailed(_("fast_step calls a synchronize inside its loop (line {lines}): on a GPU it waits for every "
                            "queued kernel in every step. Read the losses once, after the loop.").format(
            lines=", ".join(map(str, lines))))
    counted, grows = counted_twice(
        lambda steps: make_train_case(steps, batch, seed), lambda case: solved(fast_step, *case, 1e-2), few, many,
        _("fast_step removed the check's sync counter while it ran, so its host reads cannot be counted: no points."))
    growing = [_("{place} ({low}x with {few} steps, {high}x with {many})").format(
        place=place, low=low, few=few, high=high, many=many) for place, low, high in grows]
    if growing:
        raise CheckFailed(_("a host sync runs in every step: {places}. On a GPU each one makes the CPU wait for every "
                            "queued kernel. Keep each loss on the device (loss.detach()) and read them all once, after "
                            "the loop: torch.stack(losses).tolist(). Reading the losses one by one after the loop is "
                            "still one read per step.").format(places="; ".join(growing)))
    check(len(counted[many]) == len(counted[few]),
          _("the number of host syncs grows with the steps: {low} with {few} steps, {high} with {many} "
            "({summary}).").format(low=len(counted[few]), few=few, high=len(counted[many]), many=many,
                                    summary=counted[many].summary()))
    check(len(counted[many].reads) <= MAX_SYNCS,
          _("{n} host reads after the loop ({summary}); one read of the stacked losses is enough.").format(
              n=len(counted[many].reads), summary=counted[many].summary()))


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
