"""Verdicts for chapter 03 (memory): the training-memory estimate, the batch-size search, gradient accumulation.

Each ``check_*`` function takes the learner's function and one case (a model,
the numbers of a budget, ``k`` and a seed) and raises
:class:`~helpers.checks.CheckFailed` with a message naming the mistake. The
cases themselves, visible and hidden, are written in the grade cells: this
module is installed with the course, so it holds no hidden input and no
expected value, only the logic that computes one from a case.

The learner's function is always called through :func:`_run` (``solved`` with
warnings recorded), so a correct answer whose torch call warns still passes:
nbgrader scores 0 for a grade cell that writes to stderr.
"""

from __future__ import annotations

import copy
import dataclasses
import gc
import sys
import warnings
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from helpers import memory
from helpers.checks.core import CheckFailed, check, check_close, check_equal, check_type, solved
from helpers.checks.patching import patched, record_calls
from helpers.i18n import N_, _
from helpers.models import flat_grads, flat_params
from helpers.record import Record

__all__ = [
    "Accumulated",
    "WatchedStep",
    "accumulation_case",
    "big_batch_gradient",
    "bits_hint",
    "check_every_micro_batch_counts",
    "check_follows_dtype",
    "check_gradient_scale",
    "check_largest",
    "check_lets_other_errors_through",
    "check_one_micro_batch_alive",
    "check_one_step",
    "check_recovers_outside_except",
    "check_releases_everything",
    "check_search_fits",
    "check_training_memory",
    "check_zeroes_first",
    "micro_batch_peak",
    "search_result",
]


def _run(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``solved(fn, ...)`` with the warnings of the learner's code recorded, not printed."""
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        return solved(fn, *args, **kwargs)


# --------------------------------------------------------------------------- estimate-memory

_PARTS = {"parameters": N_("parameter bytes"), "gradients": N_("gradient bytes"), "adam_state": N_("Adam state bytes")}
_KEYS_HINT = N_("Return a dict with 'parameters', 'gradients' and 'adam_state'.")


def bits_hint(got: Any, expected: Any) -> str:
    """A sentence naming the bits-for-bytes slip when ``got`` is exactly 8 times ``expected``; else ``""``."""
    if isinstance(got, (int, float)) and isinstance(expected, (int, float)) and expected and got == 8 * expected:
        return " " + _("That is 8 times too much: torch.finfo(dtype).bits counts bits, and a byte has 8 of them "
                       "(bytes per element: torch.finfo(dtype).bits // 8, or dtype.itemsize).")
    return ""


def _expected_bytes(model: nn.Module, dtype: torch.dtype) -> dict[str, int]:
    """The reference answer, from the course's own estimate (called here, never while the learner's code runs)."""
    sys.audit("course.version", "helpers.checks.ch03:_expected_bytes")  # the grader: refused to the learner's code
    est = memory.estimate_anatomy(model, dtype=dtype, optimizer="adam")
    return {"parameters": est.parameters, "gradients": est.gradients, "adam_state": est.optimizer_state}


# Sentences that several hints share (marked here, translated where a hint is put together)
_BUFFERS = N_("Buffers (BatchNorm's running_mean, running_var, num_batches_tracked) are not parameters: count "
              "model.parameters(), not model.state_dict() or model.buffers().")
_TIED = N_("A shared (tied) weight is one tensor and takes memory once: model.parameters() lists it once, "
           "state_dict() and named_parameters(remove_duplicate=False) once per layer that uses it.")
_FROZEN_PARAMS = N_("A frozen parameter (requires_grad=False) gets no gradient, but it still takes memory: count "
                    "every parameter in 'parameters', trainable or not.")
_FROZEN_GRADS = N_("Frozen parameters (requires_grad=False) get no gradient and no Adam state: count only "
                   "p.requires_grad.")
_TIED_GRADS = N_("A shared (tied) weight has one .grad and one Adam state, whatever the number of layers using it.")


def _sentences(*sentences: str) -> str:
    """The sentences, each translated, joined by a space (the shared ones above are English until shown)."""
    return " ".join(_(sentence) for sentence in sentences)


def _numel(tensors: Any) -> int:
    return sum(t.numel() for t in tensors)


def _miscounts(model: nn.Module, part: str) -> list[tuple[int, str]]:
    """The element counts that the typical wrong ways of counting ``part`` give, each with what names it.

    Each count is of elements per copy; the caller scales by bytes per
    element (and by 2 for Adam's state).
    """
    params = list(model.parameters())
    every_use = [p for _, p in model.named_parameters(remove_duplicate=False)]
    if part == "parameters":
        trainable_only = _numel(p for p in params if p.requires_grad)
        return [(_numel(model.state_dict().values()),
                 _sentences(N_("That is what counting model.state_dict() gives."), _BUFFERS, _TIED)),
                (_numel(params) + _numel(model.buffers()),
                 _sentences(N_("That count includes the buffers."), _BUFFERS)),
                (_numel(every_use), _sentences(N_("That count has a shared weight once per layer."), _TIED)),
                (trainable_only, _sentences(N_("That count leaves out the frozen parameters."), _FROZEN_PARAMS))]
    return [(_numel(params), _sentences(N_("That count includes the frozen parameters."), _FROZEN_GRADS)),
            (_numel(p for p in every_use if p.requires_grad),
             _sentences(N_("That count has a shared weight once per layer."), _TIED_GRADS))]


def _part_hint(model: nn.Module, part: str, got: Any, itemsize: int) -> str:
    """What to fix for ``part``: the mistake whose count ``got`` matches, else every rule this model tests."""
    copies = 2 if part == "adam_state" else 1
    want = copies * _numel(p for p in model.parameters() if p.requires_grad or part == "parameters")
    for count, sentence in _miscounts(model, part):
        if count != want and isinstance(got, int) and got == copies * count * itemsize:
            return sentence
    has_buffers = any(True for _ in model.buffers())
    tied = len(list(model.named_parameters(remove_duplicate=False))) > len(list(model.parameters()))
    frozen = any(not p.requires_grad for p in model.parameters())
    if part == "parameters":
        first = N_("Sum p.numel() over model.parameters() (any shape: 4-d conv weights, 1-d biases, 0-d scalars) and "
                   "multiply by the bytes per element.")
        rules = [(has_buffers, _BUFFERS), (tied, _TIED), (frozen, _FROZEN_PARAMS)]
    else:
        first = (N_("Every trainable parameter gets one gradient of its own size (p.numel() elements).")
                 if part == "gradients" else
                 N_("Adam keeps two tensors per trainable parameter (exp_avg and exp_avg_sq), each of p.numel() "
                    "elements: 2 x the gradient bytes."))
        rules = [(frozen, _FROZEN_GRADS), (tied, _TIED_GRADS)]
    return _sentences(first, *(sentence for applies, sentence in rules if applies))


def check_training_memory(training_memory: Callable, model: nn.Module, part: str, label: str,
                          dtype: torch.dtype = torch.float32) -> None:
    """``training_memory(model, dtype)[part]`` equals the bytes the course's estimate computes for ``model``."""
    if part not in _PARTS:
        raise ValueError(f"part must be one of {sorted(_PARTS)}, not {part!r}")
    got = _run(training_memory, model, dtype)
    check_type(got, dict, f"training_memory({label}, {dtype})", _(_KEYS_HINT))
    check(part in got, _("training_memory({label}, {dtype}) returned a dict without the key {part!r}.").format(
        label=label, dtype=dtype, part=part) + " " + _(_KEYS_HINT))
    want = _expected_bytes(model, dtype)[part]
    check_equal(got[part], want, _("training_memory({label}, {dtype})[{part!r}], the {bytes}").format(
                    label=label, dtype=dtype, part=part, bytes=_(_PARTS[part])),
                _part_hint(model, part, got[part], dtype.itemsize) + bits_hint(got[part], want))


def check_follows_dtype(training_memory: Callable, model: nn.Module, dtype: torch.dtype, label: str,
                        ref_dtype: torch.dtype = torch.float32) -> None:
    """The answer for ``dtype`` is the answer for ``ref_dtype`` scaled by the ratio of their element sizes.

    Compared with the learner's own answer in ``ref_dtype``, so that only the
    dtype is judged here (the other cells judge what is counted).
    """
    ref = _run(training_memory, model, ref_dtype)
    check_type(ref, dict, f"training_memory({label}, {ref_dtype})", _(_KEYS_HINT))
    want = {key: value * dtype.itemsize // ref_dtype.itemsize for key, value in ref.items()}
    got = _run(training_memory, model, dtype)
    check_equal(got, want, _("training_memory({label}, {dtype}), against its {ref_dtype} answer scaled by "
                             "{size}/{ref_size}").format(label=label, dtype=dtype, ref_dtype=ref_dtype,
                                                          size=dtype.itemsize, ref_size=ref_dtype.itemsize),
                _("Use the bytes per element of the dtype argument ({dtype}: {size}), not a fixed 4 and not the "
                  "model's own dtype.").format(dtype=dtype, size=dtype.itemsize))


# --------------------------------------------------------------------------- max-batch-size


def search_result(fn: Callable[..., Any], step: Callable[[int], Any], budget: memory.MemoryBudget, **kwargs: Any) -> Any:
    """Call a learner's batch-size search; an out-of-memory error that escapes it fails with a clear message.

    The message is raised outside the ``except`` block, so the escaped
    error's frames (and the tensors they hold) are gone by then.
    """
    escaped = None
    try:
        return _run(fn, step, budget, **kwargs)
    except torch.OutOfMemoryError as err:
        escaped = str(err)
    raise CheckFailed(
        _("`{name}` let torch.OutOfMemoryError escape ({escaped}); expected it to catch the error of every trial "
          "that does not fit and carry on. Recover: wrap each trial in `try: ... except torch.OutOfMemoryError:`, "
          "set a flag there, and try a smaller batch.").format(name=getattr(fn, "__name__", _("the search")),
                                                               escaped=escaped)
    )


class WatchedStep:
    """Wraps ``step(n)`` and records, for each call, how many bytes were already held under the budget.

    A search that recovers properly starts every trial with nothing held
    from the trials before it.
    """

    def __init__(self, step: Callable[[int], Any], budget: memory.MemoryBudget) -> None:
        self.step, self.budget = step, budget
        self.calls: list[tuple[int, int]] = []
        self.__name__ = getattr(step, "__name__", "step")

    def __call__(self, n: int) -> Any:
        self.calls.append((n, self.budget.live_bytes))
        return self.step(n)


class TrialLog:
    """Wraps ``step(n)`` and records ``(n, fitted)`` for each trial, where the grader can vouch for it
    (:class:`helpers.record.Record`): a search's answer must be shown by its trials, not computed from the budget
    handed to it (which a learner's code can read)."""

    def __init__(self, step: Callable[[int], Any]) -> None:
        self.step, self.log = step, Record()
        self.__name__ = getattr(step, "__name__", "step")

    def __call__(self, n: int) -> Any:
        try:
            result = self.step(n)
        except torch.OutOfMemoryError:
            self.log.append((n, False))
            raise
        self.log.append((n, True))
        return result

    def shown(self, n: int, lo: int, hi: int) -> bool:
        """Whether the trials prove ``n`` is the answer: n fitted and n + 1 did not (or n is ``hi``); 0 when ``lo``
        did not fit."""
        tried = set(self.log)
        if n == 0:
            return (lo, False) in tried
        return (n, True) in tried and (n == hi or (n + 1, False) in tried)


def _search_case(per_sample: int, fixed: int, largest: int) -> tuple[Callable[[int], None], memory.MemoryBudget]:
    """A step needing ``fixed + per_sample * n`` bytes, and a budget in which ``largest`` is the most that fits."""
    if per_sample <= 0 or fixed < 0 or largest < 0:
        raise ValueError(f"a search case needs per_sample > 0, fixed >= 0 and largest >= 0; got "
                         f"{per_sample}, {fixed}, {largest}")
    budget = memory.MemoryBudget(largest * per_sample + fixed + per_sample // 2, device="cpu")
    return memory.allocation_step(per_sample, fixed_bytes=fixed, device="cpu"), budget


def _bounds(start: int | None, limit: int | None) -> tuple[dict[str, int], int, int]:
    """The keyword arguments to pass (only those the case sets) and the bounds in force."""
    kwargs = {name: v for name, v in (("start", start), ("limit", limit)) if v is not None}
    return kwargs, (1 if start is None else start), (65536 if limit is None else limit)


def _fits(step: Callable[[int], None], limit_bytes: int, n: int) -> bool:
    out_of_memory = False
    try:
        with memory.MemoryBudget(limit_bytes, device="cpu"):
            step(n)
    except torch.OutOfMemoryError:
        out_of_memory = True
    return not out_of_memory


def check_search_fits(max_batch_size: Callable, per_sample: int, fixed: int, largest: int,
                      start: int | None = None, limit: int | None = None) -> None:
    """The size ``max_batch_size`` returns fits under the budget (0 when not even ``start`` fits)."""
    step, budget = _search_case(per_sample, fixed, largest)
    kwargs, lo, hi = _bounds(start, limit)
    n = search_result(max_batch_size, step, budget, **kwargs)
    check_type(n, int, "max_batch_size(...)", _("Return the batch size as an int."))
    if largest < lo:
        check_equal(n, 0, _("max_batch_size when not even start={lo} samples fit").format(lo=lo),
                    _("Return 0 when step(start) already runs out of memory; returning start exceeds the budget."))
        return
    check(n <= hi and _fits(step, budget.limit_bytes, n),
          _("with {per_sample} bytes per sample, a budget of {budget} bytes and limit={hi}, max_batch_size returned "
            "{n}, which does not fit (the largest that fits is {largest}). It exceeds the budget: return the last size "
            "that fitted, not the first that failed (try limit itself before returning it), and run every trial "
            "inside `with budget:`.").format(per_sample=per_sample, budget=budget.limit_bytes, hi=hi, n=n,
                                             largest=largest))


def check_largest(max_batch_size: Callable, per_sample: int, fixed: int, largest: int,
                  start: int | None = None, limit: int | None = None) -> None:
    """``max_batch_size`` returns the largest size that fits, never beyond ``limit``.

    A non-int answer passes here: :func:`check_search_fits` reports it.
    """
    step, budget = _search_case(per_sample, fixed, largest)
    trials = TrialLog(step)
    kwargs, lo, hi = _bounds(start, limit)
    n = search_result(max_batch_size, trials, budget, **kwargs)
    if not isinstance(n, int):
        return
    want = min(largest, hi)
    case = _("with start={lo}, limit={hi} and room for {largest} samples, max_batch_size returned {n}; expected "
             "{want}.").format(lo=lo, hi=hi, largest=largest, n=n, want=want)
    check(n <= hi, case + " " + _("Never try or return a size beyond limit: double with min(2 * n, limit)."))
    check(n >= want, case + " " + _("Doubling alone stops at a power of two: after the first size that fails, bisect "
                                    "between the last size that fitted and it (and never go beyond limit)."))
    check(n != want or (trials.log.intact() and trials.shown(n, lo, hi)),
          _("max_batch_size returned {n}, the right size, but its trials do not show it: the answer must come from "
            "running step(n), with step({n}) fitting and step({above}) running out of memory (unless {n} is limit, or "
            "0 because step(start) failed). Search by trying sizes; do not compute the size from the budget.").format(
              n=n, above=n + 1))


def check_recovers_outside_except(max_batch_size: Callable, per_sample: int, fixed: int, largest: int) -> None:
    """Every trial starts with nothing held under the budget from the trials before it."""
    step, budget = _search_case(per_sample, fixed, largest)
    watched = WatchedStep(step, budget)
    search_result(max_batch_size, watched, budget)
    held = [(n, b) for n, b in watched.calls if b > 0]
    if held:
        n, b = held[0]
        raise CheckFailed(_(
            "when trial n={n} started, {b} bytes from an earlier trial were still held under the budget; expected 0. "
            "A failed trial's tensors stay alive while its exception does: do not retry inside `except` or keep the "
            "exception; set a flag there and recover after it.").format(n=n, b=b))


def check_releases_everything(max_batch_size: Callable, per_sample: int, fixed: int, largest: int) -> None:
    """Nothing a trial allocated is still held under the budget once ``max_batch_size`` has returned.

    Python's cyclic collector is off meanwhile, so the verdict does not depend
    on when it happens to run.
    """
    step, budget = _search_case(per_sample, fixed, largest)
    gc.disable()
    try:
        search_result(max_batch_size, step, budget)
    finally:
        gc.enable()
    check_equal(budget.live_bytes, 0, _("bytes still held under the budget after max_batch_size returned"),
                _("Something from a trial is still held: keeping the exception (e.g. `last_error = err`) keeps every "
                  "frame of the failed trial, and its tensors, alive. Keep nothing from a trial; set a flag in "
                  "`except`."))


def check_lets_other_errors_through(max_batch_size: Callable, step: Callable[[int], Any],
                                    error: type[BaseException], budget_bytes: int = 2**20) -> None:
    """An ``error`` that ``step`` raises (a bug, not a full GPU) reaches the caller of ``max_batch_size``."""
    raised: list[str] = []

    def watched(n: int) -> Any:
        try:
            return step(n)
        except error as err:
            raised.append(_("step({n}) raised {kind}: {err}").format(n=n, kind=type(err).__name__, err=err))
            raise

    watched.__name__ = getattr(step, "__name__", "step")
    escaped = False
    try:
        _run(max_batch_size, watched, memory.MemoryBudget(budget_bytes, device="cpu"))
    except error:
        escaped = True
    check(bool(raised), _("max_batch_size returned without ever reaching a size at which step raises {error} (a "
                          "bug, not a full GPU); expected it to try growing sizes by calling step(n), and that error "
                          "to reach the caller.").format(error=error.__name__))
    check(escaped, _("{raised} (a bug, not a full GPU) and max_batch_size carried on; expected that error to reach the "
                     "caller. Catch only torch.OutOfMemoryError: it is a RuntimeError, but not every RuntimeError is "
                     "out of memory, and not every exception.").format(raised=raised[0]))


# --------------------------------------------------------------------------- grad-accumulation


def accumulation_case(kind: str = "mlp", k: int = 4, seed: int = 0) -> tuple[nn.Module, torch.Tensor, torch.Tensor]:
    """A model and a batch of ``8 * k`` samples for checking gradient accumulation.

    ``"mlp"``: a small MLP on random data, every micro-batch carries signal.
    ``"wide"``: ``32 * k`` samples through a 1024-wide hidden layer, so that a
    micro-batch's activations outweigh the gradients: whether the micro-batches'
    activations are alive one at a time or all together shows in the peak.
    ``"last-only"``: a bias-free linear model whose first ``k - 1``
    micro-batches are all zeros (their gradient is exactly zero), so only the
    last one contributes: the scale of the result can be checked on its own.
    """
    if kind not in ("mlp", "wide", "last-only"):
        raise ValueError(f"kind must be 'mlp', 'wide' or 'last-only', not {kind!r}")
    g = torch.Generator().manual_seed(seed)
    n = 8 * k
    with torch.random.fork_rng(devices=[]):  # the model's initial weights, without moving the notebook's own RNG
        torch.manual_seed(seed)
        model: nn.Module = (nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 1)) if kind == "mlp" else
                            nn.Sequential(nn.Linear(4, 1024), nn.Tanh(), nn.Linear(1024, 1)) if kind == "wide" else
                            nn.Linear(6, 1, bias=False))
    if kind == "mlp":
        x, y = torch.randn(n, 6, generator=g), torch.randn(n, 1, generator=g)
    elif kind == "wide":
        x, y = torch.randn(4 * n, 4, generator=g), torch.randn(4 * n, 1, generator=g)
    else:
        x, y = torch.zeros(n, 6), torch.zeros(n, 1)
        x[-8:] = torch.randn(8, 6, generator=g)
        y[-8:] = torch.randn(8, 1, generator=g)
    return model, x, y


def big_batch_gradient(model: nn.Module, loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
                       x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The gradient of ``loss_fn(model(x), y)`` on the whole batch, as one vector over the trainable parameters.

    Computed with ``torch.autograd.grad``, so the model's ``.grad`` is left untouched.
    """
    sys.audit("course.version", "helpers.checks.ch03:big_batch_gradient")  # the grader: refused to the learner's code
    params = [p for p in model.parameters() if p.requires_grad]
    return torch.cat([g.reshape(-1) for g in torch.autograd.grad(loss_fn(model(x), y), params)])


def micro_batch_peak(model: nn.Module, loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
                     x: torch.Tensor, y: torch.Tensor, k: int) -> int:
    """Peak bytes of forward and backward on one micro-batch (``len(x) // k`` samples), gradients included.

    Run on a copy of ``model`` and counted by live storages (``method="tensors"``,
    deterministic), so it is the yardstick for an accumulation that keeps one
    micro-batch's activations alive at a time.
    """
    twin = copy.deepcopy(model)
    twin.zero_grad(set_to_none=True)
    m = len(x) // k
    with memory.track_memory(x.device, method="tensors") as stats:
        loss_fn(twin(x[:m]), y[:m]).backward()
    return stats.peak_bytes


@dataclasses.dataclass
class Accumulated:
    """What a learner's accumulation left: ``.grad`` afterwards, the gradient the step saw, the big batch's."""

    grad: torch.Tensor
    want: torch.Tensor
    at_steps: list[torch.Tensor]

    def require_gradient_left(self) -> None:
        """Fail, naming where the gradients were zeroed, when ``.grad`` is empty after the call."""
        if self.grad.norm() > 0:
            return
        if any(g.norm() > 0 for g in self.at_steps):
            where = _("the step saw the gradient, and it was zeroed after the step. The task asks to leave it in "
                      ".grad: zero the gradients once, at the start of the call (the next call zeroes them), not after "
                      "the step.")
        elif self.at_steps:
            where = _("it was already empty when optimizer.step() ran: the gradients were zeroed between the last "
                      "backward() and the step, so the step had nothing to apply. Zero them once, at the start.")
        else:
            where = _("optimizer.step() was never called, and no backward() left a gradient.")
        raise CheckFailed(_("after accumulate_gradients every .grad is zero or missing (None); expected the big "
                            "batch's gradient. {where}").format(where=where))


def _accumulated(fn: Callable, kind: str, k: int, seed: int = 0) -> Accumulated:
    """Run the learner's accumulation (SGD with lr=0) on a case, watching what .grad holds at each step."""
    model, x, y = accumulation_case(kind, k=k, seed=seed)
    want = big_batch_gradient(model, F.mse_loss, x, y)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    at_steps: list[torch.Tensor] = []
    original = optimizer.step

    def step(*args: Any, **kwargs: Any) -> Any:
        at_steps.append(flat_grads(model, trainable_only=True))
        return original(*args, **kwargs)

    with patched([(optimizer, "step", step)]):
        _run(fn, model, optimizer, F.mse_loss, x, y, k)
    return Accumulated(flat_grads(model, trainable_only=True), want, at_steps)


def check_every_micro_batch_counts(accumulate_gradients: Callable, k: int, seed: int = 0) -> None:
    """The accumulated gradient points where the big batch's does: no micro-batch was dropped."""
    run = _accumulated(accumulate_gradients, "mlp", k, seed)
    run.require_gradient_left()
    check_close(run.grad / run.grad.norm(), run.want / run.want.norm(),
                _("direction of the accumulated gradient (k={k})").format(k=k),
                _("Some micro-batches are missing from the gradient: were the gradients zeroed in every micro-batch? "
                  "Zero them once, before the first micro-batch, so that backward() adds them up."))


def check_gradient_scale(accumulate_gradients: Callable, k: int, seed: int = 0) -> None:
    """The accumulated gradient equals the big batch's, not ``k`` times it (only the last micro-batch has signal)."""
    run = _accumulated(accumulate_gradients, "last-only", k, seed)
    run.require_gradient_left()
    ratio = float(run.grad.norm() / run.want.norm())
    check_close(run.grad, run.want,
                _("accumulated gradient (k={k}); it is {ratio:.2f} times the big batch's").format(k=k, ratio=ratio),
                _("Divide each micro-batch's loss by k: the loss function averages within a micro-batch, so k "
                  "backward passes add up k means, k times too large.") if abs(ratio - k) < 0.5 else
                _("Divide each micro-batch's loss by k, and only that: the mean over the big batch is the mean of the "
                  "k micro-batch means."))


def check_one_step(accumulate_gradients: Callable, k: int, lr: float = 0.1, seed: int = 0) -> None:
    """``optimizer.step()`` runs once, and with the gradient that ``.grad`` holds afterwards.

    When ``.grad`` is empty afterwards, only the number of steps is judged here:
    :meth:`Accumulated.require_gradient_left` names that mistake in the gradient cells.
    """
    model, x, y = accumulation_case("mlp", k=k, seed=seed)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    before = flat_params(model, trainable_only=True)
    with record_calls({"step": (optimizer, "step")}) as log:
        _run(accumulate_gradients, model, optimizer, F.mse_loss, x, y, k)
    steps = log.count("step")
    check_equal(steps, 1, _("calls to optimizer.step() for k={k} micro-batches").format(k=k),
                _("optimizer.step() was never called: step once, after the last micro-batch.") if steps == 0 else
                _("Step once, after the last micro-batch: stepping every micro-batch makes k small steps, each from a "
                  "part of the gradient, instead of one step with the big batch's gradient."))
    left = flat_grads(model, trainable_only=True)
    if left.norm() == 0:
        return  # .grad was emptied after the step: the gradient cells name that mistake, this one judges the step
    check_close(before - flat_params(model, trainable_only=True), lr * left,
                _("the change of the parameters made by SGD(lr={lr}), against {lr} x what .grad holds "
                  "afterwards").format(lr=lr),
                _("The step did not use the gradient that .grad holds afterwards: step after the last micro-batch's "
                  "backward, and after any scaling of the gradients (dividing .grad by k after the step changes "
                  ".grad, not the step that was taken)."))


def check_zeroes_first(accumulate_gradients: Callable, k: int, seed: int = 0) -> None:
    """Two calls on the same batch (lr=0, so the model stays put) leave the same ``.grad`` as one call."""
    model, x, y = accumulation_case("mlp", k=k, seed=seed)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    _run(accumulate_gradients, model, optimizer, F.mse_loss, x, y, k)
    once = flat_grads(model, trainable_only=True)
    _run(accumulate_gradients, model, optimizer, F.mse_loss, x, y, k)
    twice = flat_grads(model, trainable_only=True)
    ratio = float(twice.norm() / once.norm()) if once.norm() > 0 else float("nan")
    check_close(twice, once,
                _(".grad after a second call on the same batch; it is {ratio:.2f} times the first call's").format(
                    ratio=ratio),
                _("The gradients of the previous call were still in .grad: zero the gradients once, before the first "
                  "micro-batch (optimizer.zero_grad()), so that each call accumulates from zero."))


def check_one_micro_batch_alive(accumulate_gradients: Callable, k: int, seed: int = 0) -> None:
    """The accumulation's peak stays below twice one micro-batch's forward and backward: one alive at a time."""
    model, x, y = accumulation_case("wide", k=k, seed=seed)
    one = micro_batch_peak(model, F.mse_loss, x, y, k)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    with memory.track_memory("cpu", method="tensors") as peak:
        _run(accumulate_gradients, model, optimizer, F.mse_loss, x, y, k)
    check(peak.peak_bytes < 2 * one,
          _("with k={k}, the peak memory of accumulate_gradients was {peak}, {ratio:.1f} times that of forward and "
            "backward on one micro-batch ({one}); expected less than twice it. Several micro-batches' activations "
            "were alive at once: run forward and then backward() on each micro-batch in turn, one backward per "
            "micro-batch, instead of summing the losses and calling backward once (or running every forward pass "
            "before the first backward).").format(k=k, peak=memory.format_bytes(peak.peak_bytes),
                                                  ratio=peak.peak_bytes / one, one=memory.format_bytes(one)))
