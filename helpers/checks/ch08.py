"""Chapter 08's checks: a training loop without host syncs, and when compiling pays.

``train_quietly`` is graded by behaviour on a CPU: its results must equal the
noisy loop's (:func:`noisy_epoch`, the loop the chapter shows), and
:func:`helpers.speed.count_host_syncs` counts the host reads it makes with
two numbers of batches: a read whose count grows with the batches is a sync
inside the loop, named with its line. On a CPU nothing waits for a read, but
the same line stalls a GPU, so what is graded is where the reads are, never
how fast the loop ran.

``compile_pays`` is pure arithmetic on measured times: the cells hand it the
numbers, and the verdict recomputes the answer and, when the learner's differs,
recomputes it each typical wrong way (a mean, a tie counted as paid, the noise
ignored, the compile time left out) to name the mistake.

The cases (sizes, seeds, times) stay in the grade cells; nothing here is a
hidden case.
"""

from __future__ import annotations

import builtins
import dis
import inspect
import linecache
import math
import statistics
import sys
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from helpers import benchmark as bench
from helpers.checks.core import CheckFailed, check, solved
from helpers.i18n import N_, _
from helpers.speed import count_host_syncs

__all__ = ["check_compile_decision", "check_nan_guard", "check_no_syncs_in_loop", "check_results",
           "expected_decision", "make_case", "noisy_epoch"]

#: host reads allowed in all, after the loop: the losses, the accuracy, the NaN test (and one to spare)
MAX_SYNCS = 4


def make_case(batches: int, batch: int, last: int, seed: int, nan_at: int | None = None
              ) -> tuple[nn.Module, torch.optim.Optimizer, list[tuple[torch.Tensor, torch.Tensor]]]:
    """A small classifier, its SGD optimizer (momentum) and ``batches`` batches; the last has ``last`` samples.

    ``nan_at``: the index of a batch whose inputs hold a NaN, so its loss (and every later one) is NaN.
    """
    g = torch.Generator().manual_seed(seed)
    model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.5)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    data = []
    for i in range(batches):
        n = last if i == batches - 1 else batch
        x, y = torch.randn(n, 6, generator=g), torch.randint(0, 3, (n,), generator=g)
        if nan_at == i:
            x[0, 0] = float("nan")
        data.append((x, y))
    return model, optimizer, data


def noisy_epoch(model: nn.Module, optimizer: torch.optim.Optimizer, batches: Sequence[Any]) -> tuple[list[float], float]:
    """The chapter's loop with a host sync in every step: the results ``train_quietly`` must give."""
    sys.audit("course.version", "helpers.checks.ch08:noisy_epoch")  # the grader: refused to the learner's code
    losses, correct, seen = [], 0, 0
    for x, y in batches:
        optimizer.zero_grad()
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        if torch.isnan(loss):
            raise FloatingPointError(f"the loss is NaN at step {len(losses)}")
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        correct += (logits.argmax(dim=1) == y).sum().item()
        seen += len(y)
    return losses, correct / seen


def _mean_of_batch_accuracies(case: tuple) -> float:
    """What averaging each batch's accuracy (taken before its step) gives: the typical accuracy mistake."""
    model, optimizer, batches = case
    accuracies = []
    for x, y in batches:
        optimizer.zero_grad()
        logits = model(x)
        F.cross_entropy(logits, y).backward()
        optimizer.step()
        accuracies.append(float((logits.argmax(dim=1) == y).float().mean()))
    return statistics.mean(accuracies)


def _run(train_quietly: Callable[..., Any], case: tuple) -> Any:
    model, optimizer, batches = case
    return solved(train_quietly, model, optimizer, batches)


def _unpack(result: Any, steps: int) -> tuple[list[float], float]:
    check(isinstance(result, tuple) and len(result) == 2,
          _("train_quietly returned {kind} {value}; expected a pair (losses, accuracy).").format(
              kind=type(result).__name__, value=repr(result)[:80]))
    losses, accuracy = result
    check(isinstance(losses, list) and all(type(v) is float for v in losses),
          _("losses: got {kind} of {items}; expected a list of Python floats, one per batch. Read them once, after "
            "the loop: torch.stack(losses).tolist() gives a list of floats in one host read.").format(
              kind=type(losses).__name__,
              items=sorted({type(v).__name__ for v in losses}) if isinstance(losses, (list, tuple)) else "?"))
    check(len(losses) == steps, _("losses has {n} values for {steps} batches; expected one per batch.").format(
        n=len(losses), steps=steps))
    check(type(accuracy) is float, _("accuracy: got {kind}; expected a Python float (read the tensor once at the end, "
                                     "e.g. with .item()).").format(kind=type(accuracy).__name__))
    return losses, accuracy


def check_results(train_quietly: Callable[..., Any], batches: int, batch: int, last: int, seed: int) -> None:
    """Same losses, accuracy and trained model as :func:`noisy_epoch` on the same case."""
    theirs_case, ours_case = make_case(batches, batch, last, seed), make_case(batches, batch, last, seed)
    losses, accuracy = _unpack(_run(train_quietly, theirs_case), batches)
    want_losses, want_accuracy = noisy_epoch(*ours_case)
    for i, (got, want) in enumerate(zip(losses, want_losses)):
        check(math.isclose(got, want, rel_tol=1e-4, abs_tol=1e-6),
              _("the loss of batch {i}: got {got:.6f}, expected {want:.6f} (the loss of that batch, computed before "
                "its optimizer step). Train exactly as the loop above does: zero_grad, forward, loss, backward, "
                "step.").format(i=i, got=got, want=want))
    if not math.isclose(accuracy, want_accuracy, rel_tol=1e-6, abs_tol=1e-9):  # float32 division is fine
        per_batch = _mean_of_batch_accuracies(make_case(batches, batch, last, seed))
        hint = (" " + _("That is the mean of the per-batch accuracies, which differs here because the last batch "
                        "is smaller: count correct predictions and samples over the whole epoch, then divide once, "
                        "instead of averaging per-batch accuracies.")
                if math.isclose(accuracy, per_batch, rel_tol=1e-6) else "")
        raise CheckFailed(_("accuracy: got {got:.6f}, expected {want:.6f} (correct predictions / samples over the "
                            "epoch, predictions taken from the logits before each step).").format(
            got=accuracy, want=want_accuracy) + hint)
    for (name, p), q in zip(theirs_case[0].named_parameters(), ours_case[0].parameters()):
        check(torch.allclose(p, q, rtol=1e-4, atol=1e-6),
              _("after the epoch the model's `{name}` differs from the noisy loop's: every batch must make one "
                "optimizer step, as in the loop above.").format(name=name))


def synchronize_in_loop(fn: Callable[..., Any]) -> list[int]:
    """The lines of ``fn``'s loops that call a synchronize in every step: ``torch.cuda.synchronize()``,
    ``event.synchronize()``, a name bound to one (``wait = torch.cuda.synchronize if ... else (lambda: None)``,
    then ``wait()``), or a function that calls one (``def wait(): ...`` in another cell), one call deep.

    Why read the code: a CPU grader cannot see a synchronize the program only calls where a GPU exists
    (``if torch.cuda.is_available(): torch.cuda.synchronize()``), yet on a GPU it waits in every step. A
    loop (``for`` or ``while``) is the bytecode from a backward jump's target up to that jump. A synchronize
    that a condition depending on the step may skip (``if i % 1000 == 999:``: a ``%``, or a name the loop
    assigns) is not named: the code cannot tell how often that runs, a correct answer must not fail on a guess,
    and where it does run on the grader the sync counter sees it."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return []
    instructions = list(dis.get_instructions(code))
    loops = [(i.argval, i.offset) for i in instructions if "JUMP" in i.opname and isinstance(i.argval, int)
             and i.argval < i.offset]
    lines = set()
    for site in _synchronize_sites(instructions, lambda name: _resolve(fn, name)):
        for start, end in loops:
            if start <= site.offset < end and not _step_may_skip(instructions, site, start, end):
                lines.add(site.positions.lineno)
    return sorted(line for line in lines if line is not None)


#: the bytecode that reads a name, and what calls
_LOADS = ("LOAD_FAST", "LOAD_DEREF", "LOAD_CLOSURE", "LOAD_GLOBAL", "LOAD_NAME")
_STORES = ("STORE_FAST", "STORE_DEREF", "STORE_GLOBAL", "STORE_NAME")


def _synchronize_sites(instructions: list[Any], resolve: Callable[[str], Any] | None) -> list[Any]:
    """The instructions that name a synchronize: the name itself, a local name bound to an expression that names
    one (no call between the two, but for ``getattr(torch.cuda, "synchronize")``), or (with ``resolve``) a global or
    closure name whose value synchronizes."""
    aliases, mention = set(), None
    sites = []
    for i in instructions:
        named = i.argval == "synchronize" or (inspect.iscode(i.argval) and _synchronizes(i.argval))
        if named:
            sites.append(i)
            mention = i
        elif i.opname in _LOADS and (i.argval in aliases or (
                resolve is not None and i.opname != "LOAD_FAST" and _value_synchronizes(resolve(i.argval)))):
            sites.append(i)
        elif mention is not None and i.opname.startswith(("CALL", "PRECALL")) and mention.opname != "LOAD_CONST":
            mention = None  # synchronize() was called: what is stored next is its result, not the function
        elif mention is not None and i.opname in _STORES:
            aliases.add(i.argval)
            mention = None
    return sites


def _synchronizes(code: Any) -> bool:
    """Whether a function's code (a helper, a lambda) calls a synchronize on every call on a GPU, in its own body,
    where the grader cannot see it run: behind a condition (``if torch.cuda.is_available():``) that does not depend
    on the step. One it calls unguarded runs on the grader too, where the counter names it with its line."""
    instructions = list(dis.get_instructions(code))
    end = instructions[-1].offset + 2 if instructions else 0
    return any(_guards(instructions, site, 0) and not _step_may_skip(instructions, site, 0, end, loop=False)
               for site in _synchronize_sites(instructions, None))


def _value_synchronizes(value: Any) -> bool:
    """A synchronize itself (``wait = torch.cuda.synchronize``), or a Python function that calls one; a lambda whose
    defining line names one (``wait = torch.cuda.synchronize if ... else (lambda: None)``, read where the source
    is at hand: on the grader the name holds the lambda)."""
    if callable(value) and getattr(value, "__name__", None) == "synchronize":
        return True
    code = getattr(value, "__code__", None)
    if not inspect.iscode(code):
        return False
    if code.co_name == "<lambda>" and "synchronize" in linecache.getline(code.co_filename, code.co_firstlineno):
        return True
    return _synchronizes(code)


def _resolve(fn: Callable[..., Any], name: str) -> Any:
    """What a global or closure name of ``fn`` holds now (None where it holds nothing)."""
    code = fn.__code__
    if name in code.co_freevars and getattr(fn, "__closure__", None):
        try:
            return fn.__closure__[code.co_freevars.index(name)].cell_contents
        except ValueError:  # an empty cell
            return None
    found = getattr(fn, "__globals__", {}).get(name)
    return found if found is not None else getattr(builtins, name, None)


def _guards(instructions: list[Any], site: Any, start: int) -> list[Any]:
    """The conditional jumps after ``start`` that jump over ``site`` (the ``if``s it sits in)."""
    return [jump for jump in instructions
            if start <= jump.offset < site.offset and "JUMP" in jump.opname and "IF" in jump.opname
            and isinstance(jump.argval, int) and jump.argval > site.offset and jump.positions is not None]


def _step_may_skip(instructions: list[Any], site: Any, start: int, end: int, loop: bool = True) -> bool:
    """Whether a condition that depends on the step jumps over ``site``: a conditional jump before it whose target
    is past it, on a line (the condition's) holding a ``%``, or (in a loop) a name the loop assigns read as a value
    (``i == 0``, not ``x.device.type == "cuda"``, which is the same in every step)."""
    varying = {i.argval for i in instructions if loop and start <= i.offset < end and i.opname in _STORES}
    for jump in _guards(instructions, site, start):
        condition = [i for i in instructions if start <= i.offset < jump.offset and i.positions is not None
                     and i.positions.lineno == jump.positions.lineno]
        for i, after in zip(condition, [*condition[1:], None]):
            if (i.opname == "BINARY_OP" and i.argrepr in ("%", "%=")) or i.opname == "BINARY_MODULO":
                return True
            if i.opname in _LOADS and i.argval in varying and not (
                    after is not None and after.opname in ("LOAD_ATTR", "LOAD_METHOD")):
                return True
    return False


def counted_twice(make: Callable[[int], Any], run: Callable[[Any], Any], few: int, many: int, tampered: str
                  ) -> tuple[dict, list[tuple[str, int, int]]]:
    """Host syncs counted while ``run(make(n))`` runs, for ``few`` and ``many`` steps (the case is made before the
    counter starts); with each place whose count grows with the steps: ``(place, count at few, count at many)``.

    A sync made once per step is told from one made once after the loop by this growth alone, whatever the code
    looks like (chapters 08 and 09). ``tampered``: the message if the counter was switched off while it ran.
    The case (the model, its optimizer, the batches) is what a GPU would hold, handed to the counter as the
    device's; any other tensor made before it started (a buffer in the learner's cell) is the host's. What
    would raise on a GPU (a host tensor updated in place from a device tensor) fails here, named."""
    counted = {}
    for steps in (few, many):
        case = make(steps)
        with count_host_syncs(device_tensors=case) as syncs:
            run(case)
        check(syncs.intact, tampered)
        if syncs.raises:
            raise CheckFailed(_(
                "{what}: on a GPU this raises, since a tensor on the host cannot take a device tensor's values in "
                "an operation, only through a copy (.to, copy_). Make that tensor on the device: device=..., e.g. "
                "torch.zeros((), device=loss.device).").format(what=syncs.raises[0]))
        counted[steps] = syncs
    low, high = counted[few].by_place(), counted[many].by_place()
    return counted, [(place, low.get(place, 0), n) for place, n in high.items() if n > low.get(place, 0)]


def check_no_syncs_in_loop(train_quietly: Callable[..., Any], few: int, many: int, batch: int, seed: int) -> None:
    """No host sync whose count grows with the number of batches, no synchronize written in a loop, and at most
    :data:`MAX_SYNCS` host reads in all."""
    lines = synchronize_in_loop(train_quietly)
    if lines:
        raise CheckFailed(_(
            "train_quietly calls a synchronize inside its loop (line {lines}): on a GPU it waits for every queued "
            "kernel in every step, whether or not this machine has a GPU to wait for. Take it out of the loop: "
            "reading the results once after the loop is all the waiting the epoch needs.").format(
                lines=", ".join(map(str, lines))))
    counted, grows = counted_twice(
        lambda steps: make_case(steps, batch, batch, seed), lambda case: _run(train_quietly, case), few, many,
        _("train_quietly removed the check's sync counter while it ran (a Tensor method put back, or the dispatch "
          "mode popped), so its host reads cannot be counted: no points."))
    growing = [_("{place} ({low}x with {few} batches, {high}x with {many})").format(
        place=place, low=low, few=few, high=high, many=many) for place, low, high in grows]
    if growing:
        raise CheckFailed(_(
            "a host sync runs once per batch: {places}. On a GPU each one makes the CPU wait until every queued "
            "kernel has finished. Keep the values as tensors on the device in the loop (loss.detach(), a running "
            "tensor count, a buffer made with device=...) and read them once, after the loop; reading a list of "
            "tensors one by one after the loop is still one read per batch: torch.stack(...).tolist() reads them "
            "all at once.").format(places="; ".join(growing)))
    check(len(counted[many]) == len(counted[few]),
          _("the number of host syncs grows with the batches: {low} with {few} batches, {high} with {many} "
            "({summary}).").format(low=len(counted[few]), few=few, high=len(counted[many]), many=many,
                                    summary=counted[many].summary()))
    check(len(counted[many].reads) <= MAX_SYNCS,
          _("{n} host reads after the loop ({summary}); at most {most} are needed: one for the losses, one for the "
            "accuracy, one for the NaN test.").format(n=len(counted[many].reads), summary=counted[many].summary(),
                                                       most=MAX_SYNCS))


def check_nan_guard(train_quietly: Callable[..., Any], batches: int, nan_at: int, seed: int) -> None:
    """A NaN loss still raises FloatingPointError, as in the loop above (once, after the loop, is enough)."""
    case = make_case(batches, 8, 8, seed, nan_at=nan_at)
    try:
        result = _run(train_quietly, case)
    except FloatingPointError:
        return
    except CheckFailed:
        raise
    except Exception as err:  # noqa: BLE001 - the wrong error is the learner's mistake to name
        raise CheckFailed(_("a NaN loss raised {kind}: {err}; expected FloatingPointError, as the loop above "
                            "raises.").format(kind=type(err).__name__, err=err)) from None
    got = result[0] if isinstance(result, tuple) and result else result
    raise CheckFailed(_("batch {nan_at}'s loss is NaN and train_quietly returned {got} without raising. Keep the NaN "
                        "test without a sync per step: test every loss at once after the loop (e.g. "
                        "torch.isnan(losses).any()) and raise FloatingPointError then.").format(
        nan_at=nan_at, got=repr(got)[:100]))


# --------------------------------------------------------------------------- when compiling pays


def _median(values: Sequence[float]) -> float:
    return statistics.median(float(v) for v in values)


def expected_decision(compile_s: float, eager_s: Sequence[float], compiled_s: Sequence[float], steps: int, *,
                      average: Callable[[Sequence[float]], float] = _median, noise: bool = True,
                      tie_pays: bool = False, with_compile: bool = True, pays_after: bool = False) -> dict[str, Any]:
    """The right answer, and (with a keyword changed) each typical wrong one."""
    sys.audit("course.version", "helpers.checks.ch08:expected_decision")  # the grader: refused to the learner's code
    saving = average(eager_s) - average(compiled_s)
    if noise:
        verdict = bench.compare(bench.Timing.from_times(list(compiled_s), label="compiled"),
                                bench.Timing.from_times(list(eager_s), label="eager"))
        faster = verdict.faster is verdict.a
    else:
        faster = saving > 0
    cost = compile_s if with_compile else 0.0
    if not faster or saving <= 0:
        return {"saving_s": saving, "faster": faster, "break_even": None, "pays": False}
    ratio = cost / saving
    break_even = max(1, math.ceil(ratio) if tie_pays else math.floor(ratio) + 1)
    pays = steps > break_even if pays_after else steps >= break_even
    return {"saving_s": saving, "faster": faster, "break_even": break_even, "pays": pays}


def _same(wrong: Any, value: Any) -> bool:
    """Whether the learner's value is what one typical mistake gives (numbers within rounding: a mean is a mean,
    however it was summed)."""
    if isinstance(wrong, bool) or isinstance(value, bool) or wrong is None or value is None:
        return type(wrong) is type(value) and wrong == value
    if isinstance(wrong, (int, float)) and isinstance(value, (int, float)):
        return math.isclose(wrong, value, rel_tol=1e-9, abs_tol=1e-15)
    return False


_MISTAKES = [
    ({"average": statistics.fmean}, N_("the mean was used: one slow call moves a mean; the median of the repeats is what "
                                    "the chapter's timings report")),
    ({"tie_pays": True}, N_("at the step where both totals are equal compiling has not paid yet: the break-even is the "
                         "first step count whose compiled total is strictly shorter (floor(compile / saving) + 1)")),
    ({"noise": False}, N_("the difference is within the noise here: the course's rule (bench.compare) cannot tell the "
                       "two apart, so `faster` is False and no break-even is claimed")),
    ({"with_compile": False}, N_("the compile time was left out: it is paid once, before the first step")),
    ({"pays_after": True}, N_("compiling pays from the break-even step on: `pays` is steps >= break_even")),
]


#: why a `faster` that differs from the course's rule is wrong, by the direction it is wrong in
_OWN_RULE = {
    True: N_("the course's rule (bench.compare) finds the two within the noise here; a fixed threshold (5 %, 10 %) or "
             "a plain saving > 0 is not the rule: each median stands for a band of plus or minus half its IQR (at least "
             "10 % of the median), and compiled is faster only when its band lies wholly below eager's"),
    False: N_("the course's rule (bench.compare) finds compiled faster beyond the noise here (its band lies wholly below "
              "eager's); a fixed threshold of your own is not the rule: use bench.compare(...).faster"),
}


def check_compile_decision(compile_pays: Callable[..., Any], compile_s: float, eager_s: Sequence[float],
                           compiled_s: Sequence[float], steps: int, keys: Sequence[str] = ("saving_s", "faster",
                                                                                           "break_even", "pays")) -> None:
    """compile_pays(...) returns the decision :func:`expected_decision` makes, on ``keys``."""
    got = solved(compile_pays, compile_s, list(eager_s), list(compiled_s), steps)
    check(isinstance(got, dict), _("compile_pays returned {kind}; expected a dict with the keys saving_s, faster, "
                                   "break_even, pays.").format(kind=type(got).__name__))
    check(set(keys) <= set(got), _("compile_pays returned the keys {keys}; expected saving_s, faster, break_even, "
                                   "pays.").format(keys=sorted(got)))
    want = expected_decision(compile_s, eager_s, compiled_s, steps)
    case = _("(compile {compile_s:g} s, eager steps {eager}, compiled steps {compiled}, {steps} steps)").format(
        compile_s=compile_s, eager=list(eager_s), compiled=list(compiled_s), steps=steps)
    for key in keys:
        value = got[key]
        if key == "saving_s":
            ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isclose(
                value, want[key], rel_tol=1e-9, abs_tol=1e-15)
        elif key == "break_even" and want[key] is not None:  # 13 or 13.0: the same step count
            ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value == want[key]
        else:
            ok = type(value) is type(want[key]) and value == want[key]
        if ok:
            continue
        named = [why for change, why in _MISTAKES
                 if _same(expected_decision(compile_s, eager_s, compiled_s, steps, **change).get(key), value)]
        shown = f"{value:.6g}" if isinstance(value, float) else repr(value)
        expected = f"{want[key]:.6g}" if isinstance(want[key], float) else repr(want[key])
        if not named and key == "faster" and isinstance(value, bool):
            named = [_OWN_RULE[value]]
        likely = " " + _("Likely:") + " " + (" " + _("Or:") + " ").join(f"{_(why)}." for why in named) if named else ""
        raise CheckFailed(_("{key}: got {shown}, expected {expected} {case}.").format(
            key=key, shown=shown, expected=expected, case=case) + likely)
