"""Verdicts for chapter 07 (troubleshooting): a fixed training script, a diagnosis, a profiled step.

Every function takes the case's inputs as arguments (seeds, sizes,
exceptions, region durations): the cases themselves, visible and hidden,
live in the grade cells. Each verdict names the symptom a remaining bug
gives, so a learner knows which bug is still there.
"""

from __future__ import annotations

import difflib
import functools
import math
import re
import sys
import tempfile
import time
import timeit
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from helpers import errors, troubleshoot
from helpers.checks.core import CheckFailed, check, solved, warnings_dropped
from helpers.checks.patching import patched
from helpers.i18n import N_, _

__all__ = [
    "caught",
    "check_diagnoses",
    "check_eval_no_grad",
    "check_fixes_named",
    "check_learns",
    "check_memory_flat",
    "check_finite",
    "check_labels",
    "check_same_device",
    "check_slowest_region",
    "check_trace_names",
    "check_zero_grad",
    "classifier",
]


# --------------------------------------------------------------------------- exercise 1: the broken script


def classifier(features: int, classes: int, seed: int, hidden: int = 32) -> nn.Module:
    """The small model the checks train: Linear, ReLU, Linear."""
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(features, hidden), nn.ReLU(), nn.Linear(hidden, classes))


def _reference_epoch(model: nn.Module, lr: float, batches: Sequence[tuple[torch.Tensor, torch.Tensor]]) -> float:
    sys.audit("course.version", "helpers.checks.ch07:_reference_epoch")  # the grader: refused to the learner's code
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    total = 0.0
    for x, y in batches:
        opt.zero_grad(set_to_none=True)
        loss = nn.functional.cross_entropy(model(x), y - 1)
        loss.backward()
        opt.step()
        total += loss.item()
    return total / len(batches)


def _number(value: Any, what: str, meaning: str = N_("the mean loss"), strict: bool = False) -> float:
    """A float from the learner's result; a tensor that still holds a graph is named as such.

    ``strict``: the task asks for a Python float, so a tensor (even a 0-d one) fails. Only one check per
    function is strict, so returning a tensor costs one cell, not every cell that reads the number.
    ``meaning`` is an English text marked with N_ (translated here, where it is shown).
    """
    meaning = _(meaning)
    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            raise CheckFailed(_("{what} returned a tensor of shape {shape}; expected one number, {meaning}.").format(
                what=what, shape=tuple(value.shape), meaning=meaning))
        if strict:
            graph = (" " + _("that still holds the graph of every step (memory grows until it is freed)")
                     if value.requires_grad else "")
            raise CheckFailed(_(
                "{what} returned a {dim}-d tensor{graph} ({value:.5g}); the task asks for {meaning} as a Python "
                "float: take each number out with .item() (or float(...)) and return a float, not a tensor.").format(
                what=what, dim=value.dim(), graph=graph, value=value.detach().cpu().item(), meaning=meaning))
        return float(value.detach().cpu().item())
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise CheckFailed(_("{what} returned {kind} ({value!r:.60}); expected {meaning} as a float.").format(
        what=what, kind=type(value).__name__, value=value, meaning=meaning))


def _has_gradient(model: nn.Module) -> bool:
    """Whether any parameter holds a gradient that is not all zeros: what an optimizer step moves the weights by."""
    return any(p.grad is not None and bool(p.grad.detach().abs().sum() > 0) for p in model.parameters())


def _train(train_epoch: Callable, model: nn.Module, lr: float, batches: list, device: Any = "cpu",
           step_grads: list[bool] | None = None) -> Any:
    """Run the learner's train_epoch on a fresh SGD optimizer; ``step_grads`` gets, per optimizer.step(), whether
    the step had any gradient to use."""
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    calls: list[int] = []
    hook = model.register_forward_pre_hook(lambda m, args: calls.append(1))
    step_hook = optimizer.register_step_pre_hook(
        lambda opt, args, kwargs: None if step_grads is None else step_grads.append(_has_gradient(model)))
    with warnings_dropped():
        try:
            result = solved(train_epoch, model, optimizer, batches, device)
            check(calls, _("train_epoch never ran the model on the batches: it must train one pass over them."))
            return result
        except IndexError as err:
            raise CheckFailed(_(
                "train_epoch raised IndexError: {err} Labels out of range: the data's classes are numbered "
                "1..C, and cross-entropy wants 0..C-1. Shift the labels (y - 1) before the loss.").format(err=err)
            ) from None
        except ZeroDivisionError as err:
            raise CheckFailed(_(
                "train_epoch raised ZeroDivisionError ({err}): it divided by a count of steps that stayed 0, which "
                "happens when every step is skipped because its loss is not finite. Skipping non-finite steps hides "
                "the cause and trains on nothing: the loss is NaN/Inf because log(softmax(...)) takes log(0) for huge "
                "logits. Compute the loss with F.cross_entropy on the logits (log_softmax inside), train every "
                "batch, and divide by len(batches).").format(err=err)) from None
        finally:
            hook.remove()
            step_hook.remove()


def check_labels(train_epoch: Callable, features: int, classes: int, seed: int, lr: float = 0.1) -> None:
    """One batch whose labels reach C: train_epoch runs, and returns the loss of labels shifted to 0..C-1."""
    batches = troubleshoot.numbered_class_batches(1, 64, features, classes, seed=seed)
    check(int(batches[0][1].max()) == classes, "internal: the case must contain the highest label")
    model = classifier(features, classes, seed)
    with torch.no_grad():
        expected = nn.functional.cross_entropy(model(batches[0][0]), batches[0][1] - 1).item()
    got = _number(_train(train_epoch, model, lr, batches), "train_epoch")
    if not math.isclose(got, expected, rel_tol=1e-3, abs_tol=1e-4):
        raise CheckFailed(_(
            "train_epoch on one batch returned a mean loss of {got:.5f}; the cross-entropy of the batch with its "
            "labels numbered 1..{classes} shifted to 0..{top} is {expected:.5f}. Labels out of range are fixed "
            "by shifting every label (y - 1), not by clamping or dropping some; the loss is the mean over the "
            "batch, computed before the optimizer step.").format(
            got=got, classes=classes, top=classes - 1, expected=expected))


def check_same_device(train_epoch: Callable, features: int, classes: int, seed: int) -> None:
    """On the meta device (a stand-in second device), the model and every batch end up on it together."""
    batches = troubleshoot.numbered_class_batches(2, 16, features, classes - 1, seed=seed)
    model = classifier(features, classes, seed)
    seen: list[str] = []
    model.register_forward_pre_hook(lambda m, args: seen.append(str(args[0].device)))
    try:
        _train(train_epoch, model, 0.1, batches, torch.device("meta"))
    except CheckFailed as err:
        # torch's own words (the needles of helpers.errors' device rule), which the check's message quotes: its
        # explanation ("... on different devices") may be in Korean
        if "different devices" in str(err) or errors.diagnosis_of(str(err), ["device"]) is not None:
            raise CheckFailed(_(
                "train_epoch(model, optimizer, batches, device) with device=meta failed: model and data on "
                "different devices. The model was moved and the batches were not (or the other way round): "
                "x = x.to(device) and y = y.to(device) for every batch, model.to(device) once.")) from None
        raise
    except (NotImplementedError, RuntimeError) as err:  # meta tensors hold no data: reading a number fails
        if "expected device" in str(err) or "same device" in str(err):
            raise CheckFailed(_("model and data on different devices: {err}").format(err=err)) from None
    check(seen and all(d == "meta" for d in seen),
          _("with device=meta the model's inputs were on {devices}: move each batch to the device you are "
            "given.").format(devices=sorted(set(seen)) or _("no device (never called)")))


def check_zero_grad(train_epoch: Callable, features: int, classes: int, seed: int, n_batches: int = 4) -> None:
    """When each step's gradient is computed, .grad holds nothing from the step before; each step has a gradient.

    A spy on the optimizer's steps (``register_step_pre_hook``) sees zero_grad
    called between backward and step: every .grad is then None or zero when
    the step runs, and the weights never move. (A loop that never steps is
    left to check_learns: its losses do not fall.)
    """
    batches = troubleshoot.numbered_class_batches(n_batches, 16, features, classes - 1, seed=seed)
    model = classifier(features, classes, seed)
    stale: list[bool] = []
    for p in model.parameters():
        p.register_hook(lambda g, p=p: stale.append(p.grad is not None and bool(p.grad.abs().sum() > 0)))
    step_grads: list[bool] = []
    _train(train_epoch, model, 0.1, batches, step_grads=step_grads)
    check(stale, _("train_epoch never called backward: no gradient was computed."))
    check(not any(stale),
          _("gradients accumulate from step to step: when a step's backward ran, .grad still held the previous "
            "step's gradient, so every update uses the sum of all gradients so far. Call optimizer.zero_grad() "
            "before each backward."))
    empty = step_grads.count(False)
    check(not empty,
          _("{empty} of {steps} optimizer steps had no gradient to use (every .grad None or zero): "
            "optimizer.zero_grad() ran between loss.backward() and optimizer.step(), so each step used zero "
            "gradients and the weights never changed. zero_grad belongs before each backward (at the start of the "
            "step): zero_grad(), forward, loss, backward(), step().").format(empty=empty, steps=len(step_grads)))


class _Token:
    """Lives exactly as long as the autograd graph of the forward pass that made it."""


class _WitnessFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, token: _Token) -> torch.Tensor:
        ctx.token = token  # the graph's node holds the token until the graph itself is freed
        return x.clone()

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return grad, None


class _Witness(nn.Module):
    """An identity layer that leaves a token in each step's autograd graph, to see which graphs are alive."""

    def __init__(self) -> None:
        super().__init__()
        self.tokens: list[weakref.ref] = []

    def alive(self) -> int:
        return sum(ref() is not None for ref in self.tokens)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not (torch.is_grad_enabled() and x.requires_grad):
            return x
        token = _Token()
        self.tokens.append(weakref.ref(token))
        return _WitnessFn.apply(x, token)


def check_memory_flat(train_epoch: Callable, features: int, classes: int, seed: int, n_batches: int = 8) -> None:
    """Each step's autograd graph is freed by the next steps (memory does not grow); the result is a number.

    A token in every step's graph says which graphs are still alive at each
    forward pass: the previous step's may be (its ``loss`` variable still
    holds it), older ones must not be.
    """
    batches = troubleshoot.numbered_class_batches(n_batches, 16, features, classes - 1, seed=seed)
    witness = _Witness()
    model = nn.Sequential(classifier(features, classes, seed), witness)
    alive: list[int] = []
    model.register_forward_pre_hook(lambda m, args: alive.append(witness.alive()))
    result = _train(train_epoch, model, 0.1, batches)
    check(len(alive) >= 4, _("train_epoch ran the model {n} times on {n_batches} batches; expected one forward pass "
                             "per batch.").format(n=len(alive), n_batches=n_batches))
    check(max(alive) <= 2,
          _("memory grows step to step: at the forward pass of step {step}, the autograd graphs of {alive} earlier "
            "steps were still alive (at most the previous one should be). Something keeps every step's graph, e.g. "
            "total_loss += loss or losses.append(loss) (tensors with their graphs): keep loss.item(), a plain "
            "number.").format(step=len(alive), alive=alive[-1]))
    if isinstance(result, torch.Tensor) and result.requires_grad:
        raise CheckFailed(_("memory grows step to step: train_epoch returned a tensor that still holds the graph of "
                            "every step (total_loss += loss); accumulate loss.item() and return a float."))


def check_finite(train_epoch: Callable, features: int, classes: int, seed: int, scale: float = 200.0) -> None:
    """With very large logits the loss and the weights stay finite (no log(0)), and the loss is the true one.

    Finite is not enough: probabilities clamped away from 0 before the log
    (``softmax(x).clamp_min(1e-12)``) give a finite loss of at most -log(1e-12) = 28
    per sample where the true cross-entropy of huge logits is far larger, and a
    zero gradient for those samples. So the loss of one batch, taken before its
    step, is compared with the cross-entropy of the same logits (one batch, so a
    bug in the steps themselves is left to the other checks).
    """
    batches = troubleshoot.numbered_class_batches(3, 32, features, classes - 1, seed=seed, scale=scale)
    model = classifier(features, classes, seed)
    got = _number(_train(train_epoch, model, 0.01, batches), "train_epoch")
    bad = troubleshoot.nonfinite_grads(model) + [n for n, p in model.named_parameters()
                                                 if not bool(torch.isfinite(p).all())]
    check(math.isfinite(got) and not bad,
          _("NaN from log(0): with large logits the mean loss was {got} and non-finite values reached {where}. "
            "softmax rounds small probabilities to exactly 0 and log(0) = -inf; use F.cross_entropy on the logits "
            "(log_softmax inside), which never takes log(0).").format(got=got, where=sorted(set(bad)) or _("the loss")))
    model = classifier(features, classes, seed)
    x, y = batches[0]
    with torch.no_grad():
        logits = model(x)
        expected = nn.functional.cross_entropy(logits, y - 1).item()
        # labels left unshifted also fit here (1..C-1): that mistake is check_labels', not this check's
        unshifted = nn.functional.cross_entropy(logits, y).item()
    check(math.isfinite(expected) and math.isfinite(unshifted), "internal: the true loss of this case is not finite")
    got = _number(_train(train_epoch, model, 0.01, batches[:1]), "train_epoch")
    if any(math.isclose(got, e, rel_tol=1e-3, abs_tol=1e-4) for e in (expected, unshifted)):
        return
    if got < expected / 2:
        raise CheckFailed(_(
            "with huge logits the loss of one batch was {got:.5g}, finite but far below the true cross-entropy of "
            "these logits, {expected:.5g}. Clamping the probabilities before the log (softmax(...).clamp_min(eps), "
            "or + eps) hides the symptom: it caps each sample's loss at -log(eps) and gives the worst samples a "
            "zero gradient, so the model stops learning from its biggest mistakes. Compute log-probabilities from "
            "the logits: F.cross_entropy(logits, y), or F.log_softmax + F.nll_loss.").format(
            got=got, expected=expected))
    raise CheckFailed(_(
        "with huge logits the loss of one batch was {got:.5g}; the cross-entropy of its logits is {expected:.5g}. "
        "Compute the loss with F.cross_entropy on the logits (or F.log_softmax + F.nll_loss), train every batch (a "
        "loop that skips non-finite steps hides the cause), and return the mean of the steps' losses.").format(
        got=got, expected=expected))


def check_eval_no_grad(evaluate: Callable, features: int, classes: int, seed: int) -> None:
    """evaluate records no graph (no_grad or inference_mode), leaves grad mode on, and returns the accuracy (a float)."""
    batches = troubleshoot.numbered_class_batches(3, 32, features, classes, seed=seed)
    model = classifier(features, classes, seed)
    with torch.no_grad():
        x = torch.cat([b[0] for b in batches])
        y = torch.cat([b[1] for b in batches])
        expected = ((model(x).argmax(dim=1) + 1) == y).float().mean().item()
    recorded: list[bool] = []
    model.register_forward_hook(lambda m, args, out: recorded.append(out.requires_grad))
    torch.set_grad_enabled(True)
    with warnings_dropped():
        got = solved(evaluate, model, batches, "cpu")
    left_off = not torch.is_grad_enabled()
    torch.set_grad_enabled(True)
    check(recorded, _("evaluate never ran the model on the batches."))
    check(not any(recorded),
          _("evaluation without no_grad: autograd recorded a graph for every evaluation batch (memory and time for "
            "nothing; model.eval() alone does not stop it). Wrap the loop in `with torch.no_grad():` (or "
            "torch.inference_mode())."))
    check(not left_off, _("after evaluate, gradients stay off for the whole program: use `with torch.no_grad():`, "
                          "not torch.set_grad_enabled(False)."))
    got = _number(got, "evaluate", N_("the accuracy"), strict=True)
    check(math.isclose(got, expected, abs_tol=1e-6),
          _("evaluate returned an accuracy of {got:.4f}; expected {expected:.4f} (predicted class + 1 compared with "
            "the labels numbered 1..C, over all samples).").format(got=got, expected=expected))


def check_learns(train_epoch: Callable, features: int, classes: int, seed: int, epochs: int = 3,
                 lr: float = 0.1) -> None:
    """Several epochs: the mean losses match a correct loop's within tolerance, and fall."""
    batches = troubleshoot.numbered_class_batches(4, 32, features, classes, seed=seed)
    model, twin = classifier(features, classes, seed), classifier(features, classes, seed)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    calls: list[int] = []
    model.register_forward_pre_hook(lambda m, args: calls.append(1))
    got = []
    with warnings_dropped():
        for _epoch in range(epochs):  # not `_`: that name is the translation function here
            try:
                got.append(_number(solved(train_epoch, model, optimizer, batches, "cpu"), "train_epoch",
                                   strict=True))
            except IndexError as err:
                raise CheckFailed(_("train_epoch raised IndexError: {err} Labels out of range (numbered 1..C).").format(
                    err=err)) from None
    check(calls, _("train_epoch never ran the model on the batches: it must train one pass over them."))
    expected = [_reference_epoch(twin, lr, batches) for _epoch in range(epochs)]
    close = all(math.isclose(g, e, rel_tol=2e-3, abs_tol=1e-4) for g, e in zip(got, expected))
    check(close, _("the mean loss per epoch was {got}; a correct loop gives {expected}. The loss does not match the "
                   "reference: look for gradients that are not zeroed before backward (zero_grad() goes before "
                   "backward, not between backward and step), labels not shifted to 0..C-1, or a step that is "
                   "skipped.").format(got=[round(g, 4) for g in got], expected=[round(e, 4) for e in expected]))
    check(expected[-1] < expected[0], "internal: the reference did not learn on this case")


# --------------------------------------------------------------------------- exercise 2: name the cause


def caught(fn: Callable[[], Any]) -> BaseException:
    """The exception ``fn()`` raises (its warnings, e.g. anomaly mode's, are kept off stderr)."""
    with warnings_dropped():
        try:
            fn()
        except Exception as err:  # noqa: BLE001 - the exception is the case
            return err
    raise AssertionError("internal: the case raised nothing")


_SOURCE_HINT = {
    ("index", "nan"): N_("The source blames device-side asserts on NaN/Inf; most often it is an out-of-range index "
                         "(a label >= the number of classes, a negative label, an Embedding index)."),
}

#: The categories of the task's table, spelled as the table spells them.
CATEGORIES = ("index", "device", "dtype", "shape", "range", "memory", "nan", "no-cuda")

_MEMORY_HINT = N_("An out-of-memory error is a torch.OutOfMemoryError (the class to catch: "
                  "isinstance(err, torch.OutOfMemoryError); it subclasses RuntimeError, not Python's MemoryError, "
                  "which is for the host's memory), or a RuntimeError whose message says 'out of memory'.")

_GENERIC_HINT = N_("Read the message, not only the exception's type: torch raises RuntimeError for most of these, "
                   "ValueError for a batch-size mismatch, IndexError for an index out of range, and AssertionError "
                   "when CUDA is missing.")


def _hint(expected: str, category: str) -> str:
    """Why a category is wrong, in the words of the mistake that most often gives it (with a leading space)."""
    near = difflib.get_close_matches(category, CATEGORIES, n=1, cutoff=0.6) if category not in CATEGORIES else []
    if near:  # a misspelt category ("no_cuda"), not a wrong diagnosis
        return " " + _("{category!r} is not one of the table's categories {categories}: did you mean {near!r}? "
                       "Return the category spelled as the table spells it.").format(
            category=category, categories=list(CATEGORIES), near=near[0])
    if expected == "memory":
        return " " + _(_MEMORY_HINT)
    return " " + _(_SOURCE_HINT.get((expected, category), _GENERIC_HINT))


def _diagnosis(diagnose: Callable, err: BaseException) -> tuple[str, str]:
    with warnings_dropped():
        result = solved(diagnose, err)
    if not (isinstance(result, tuple) and len(result) == 2 and all(isinstance(r, str) for r in result)):
        raise CheckFailed(_("diagnose returned {result!r:.80}; expected a tuple (category, fix) of two "
                            "strings.").format(result=result))
    return result[0].strip().lower(), result[1]


def check_diagnoses(diagnose: Callable, cases: Sequence[tuple[BaseException, str]]) -> None:
    """Each exception gets its expected category."""
    for err, expected in cases:
        category = _diagnosis(diagnose, err)[0]
        text = f"{type(err).__name__}: {str(err).splitlines()[0][:90]}"
        check(category == expected,
              _("diagnose({text}) gave the category {category!r}; expected {expected!r}.").format(
                  text=text, category=category, expected=expected) + _hint(expected, category))


_FIX_WORDS = {
    "index": ("label", "index", "class", "range", "bound"),
    "device": ("device", ".to("),
    "dtype": ("dtype", "long", "float", "type"),
    "shape": ("shape", "size", "reshape", "view", "features", "dimension"),
    "range": ("sigmoid", "logits", "withlogits", "[0, 1]", "probabilit"),
    "memory": ("batch", "autocast", "amp", "accumulat", "no_grad", "inference_mode", "precision", "checkpoint",
               "float16", "bf16", "fp16"),
    "nan": ("nan", "inf", "finite", "clip", "learning rate", "lr", "log_softmax", "anomaly"),
    "no-cuda": ("cuda", "device", "is_available", "cpu"),
}
#: The same fixes named in Korean (the Korean edition's learners write their fix sentences in Korean; the terms are
#: translations/ko/glossary.tsv's and the usual alternatives): a fix sentence may use either language.
_FIX_WORDS_KO = {
    "index": ("레이블", "라벨", "인덱스", "색인", "클래스", "범위"),
    "device": ("장치", "디바이스"),
    "dtype": ("자료형", "데이터 타입", "타입", "정수형", "실수형"),
    "shape": ("모양", "형태", "크기", "차원", "특징"),
    "range": ("시그모이드", "로짓", "확률"),
    "memory": ("배치", "혼합 정밀도", "누적", "정밀도", "체크포인팅"),
    "nan": ("무한", "유한", "클리핑", "학습률"),
    "no-cuda": ("장치", "디바이스"),
}
_FIX_WORDS = {category: words + _FIX_WORDS_KO.get(category, ()) for category, words in _FIX_WORDS.items()}


#: Fix words so short that they hide inside other words: these must start a word ("amp" is not the "amp" of
#: "example", "lr" not the one of "clr"). The others may sit anywhere ("isfinite" names "finite").
_WORD_START = {"amp", "lr"}


def _word(w: str) -> str:
    """A fix word as a pattern."""
    return (r"(?<![a-z])" if w in _WORD_START else "") + re.escape(w)


def check_fixes_named(diagnose: Callable, cases: Sequence[tuple[BaseException, str]]) -> None:
    """Each fix is a sentence that names what to change, and differs between categories."""
    fixes: dict[str, str] = {}
    for err, expected in cases:
        category, fix = _diagnosis(diagnose, err)
        check_diagnoses(diagnose, [(err, expected)])  # a fix for the wrong cause fixes nothing
        words = _FIX_WORDS.get(expected, ())
        named = [w for w in words if re.search(_word(w), fix.lower())]
        if expected == "memory" and not named and re.search(r"empty_cache|gc\.collect|\bdel\b|free", fix.lower()):
            raise CheckFailed(_(
                "for an out-of-memory error the fix {fix!r:.80} only frees memory after the failure "
                "(torch.cuda.empty_cache(), gc.collect(), del): that does not remove the cause, and the same step "
                "fails again. Name what makes the step need less memory: a smaller batch, autocast (mixed "
                "precision), gradient accumulation, or no_grad for evaluation.").format(fix=fix))
        check(fix.strip() and named,
              _("for a {expected!r} error the fix {fix!r:.80} names none of {words}: say what to change.").format(
                  expected=expected, fix=fix, words=list(words)))
        fixes[category] = fix
    check(len(set(fixes.values())) == len(fixes),
          _("the same fix was given for different categories ({categories}): each cause has its own fix.").format(
              categories=sorted(fixes)))


# --------------------------------------------------------------------------- exercise 3: profile and read


#: How far Python's clocks jump while the region the check chose runs (the profiler's own clock does not move).
_CLOCK_JUMP_S = 10.0


class _Regions:
    """The regions a check hands to profile_regions: each sleeps for its duration and counts its calls.

    While the region with the shortest duration runs, Python's clocks
    (time.perf_counter, time.time, time.monotonic and their _ns forms) jump
    ahead by :data:`_CLOCK_JUMP_S`. The profiler records with its own clock and
    never sees the jump, so an answer timed with a Python clock names that
    region, and an answer read from the trace names the one the trace says.
    """

    def __init__(self, durations: Mapping[str, float]) -> None:
        self.calls = {name: 0 for name in durations}
        self.jumper = min(durations, key=durations.get)
        self.ahead = 0.0
        self.functions = {name: self._region(name, seconds) for name, seconds in durations.items()}

    def _region(self, name: str, seconds: float) -> Callable[[], None]:
        def region() -> None:
            self.calls[name] += 1
            time.sleep(seconds)
            if name == self.jumper:
                self.ahead += _CLOCK_JUMP_S

        region.__name__ = name
        return region

    def clocks(self) -> list[tuple[Any, str, Any]]:
        """The changes that make Python's clocks run ahead by ``self.ahead``, for :func:`patched`."""
        changes = []
        for attr in ("perf_counter", "monotonic", "time"):
            real = getattr(time, attr)
            changes.append((time, attr, functools.wraps(real)(lambda real=real: real() + self.ahead)))
            real_ns = getattr(time, f"{attr}_ns")
            changes.append((time, f"{attr}_ns", functools.wraps(real_ns)(
                lambda real_ns=real_ns: real_ns() + int(self.ahead * 1e9))))
        changes.append((timeit, "default_timer", changes[0][2]))  # timeit's clock is time.perf_counter
        return changes


def _export_mistake(err: AttributeError) -> str | None:
    """What a learner did wrong when export_chrome_trace raised ``err``, or None when it is something else."""
    text = str(err)
    if "Path'" in text and "endswith" in text:  # 'PosixPath' object has no attribute 'endswith'
        return _("prof.export_chrome_trace was given a pathlib.Path: torch 2.13 calls path.endswith(...), which a "
                 "Path lacks ({kind}: {err}). Pass a str: prof.export_chrome_trace(str(trace_path)).").format(
            kind=type(err).__name__, err=err)
    if "'NoneType' object has no attribute 'save'" in text:  # the profile's results exist only after its block
        return _("prof.export_chrome_trace was called inside the `with profile(...)` block: the trace exists only "
                 "once the block has ended (torch raised {kind}: {err}). Export after the block, at the indentation "
                 "of the `with` line.").format(kind=type(err).__name__, err=err)
    return None


def _empty_mistake(err: ValueError, path: Path, names: list[str]) -> str | None:
    """What a learner did wrong when taking the max/min of nothing, or None when ``err`` is something else."""
    text = str(err)
    if not (("max()" in text or "min()" in text) and "empty" in text):
        return None
    try:
        found = [n for n, ms in troubleshoot.region_totals(path, names).items() if ms > 0] if path.exists() else []
    except ValueError:
        found = []
    where = (_("The trace does name the regions {found}: your filter dropped them; keep the events whose 'cat' is "
               "'user_annotation' and whose 'name' is a region's name.").format(found=found) if found else
             _("The trace you exported names no region: run each region's function inside `with "
               "record_function(name):`, inside the profiler's block, and export after the block."))
    return _("profile_regions raised ValueError ({err}): it took the slowest of an empty collection, so no region's "
             "time was found in the trace. {where}").format(err=err, where=where)


def _profiled(profile_regions: Callable, durations: Mapping[str, float]
              ) -> tuple[Any, Path, tempfile.TemporaryDirectory, _Regions]:
    """Run the learner's profile_regions on sleeping regions; the result, the trace's path, its folder, the regions."""
    folder = tempfile.TemporaryDirectory()
    path = Path(folder.name) / "trace.json"
    regions = _Regions(durations)
    namespaces = [getattr(profile_regions, "__globals__", {})]
    try:
        # the profiler's C++ logging would reach stderr; Python's clocks run ahead during one region (see _Regions)
        with troubleshoot.native_stderr(), warnings_dropped(), patched(regions.clocks(), namespaces):
            result = solved(profile_regions, dict(regions.functions), str(path))
    except (AttributeError, ValueError) as err:
        mistake = (_export_mistake(err) if isinstance(err, AttributeError)
                   else _empty_mistake(err, path, list(durations)))
        folder.cleanup()
        if mistake is None:
            raise
        raise CheckFailed(mistake) from None
    except BaseException:
        folder.cleanup()
        raise
    return result, path, folder, regions


def check_trace_names(profile_regions: Callable, durations: Mapping[str, float]) -> None:
    """Each region runs once; the trace file exists, is a Chrome trace, and names every region (record_function)."""
    path, folder, regions = _profiled(profile_regions, durations)[1:]  # not `_, ...`: `_` translates here
    with folder:
        check(path.exists(), _("no trace file at trace_path after profile_regions: call "
                               "prof.export_chrome_trace(trace_path) after the profiler's block."))
        try:
            totals = troubleshoot.region_totals(path, list(durations))
        except ValueError as err:  # json.JSONDecodeError is a ValueError
            raise CheckFailed(_("the file at trace_path is not a Chrome trace ({err}): export it with "
                                "prof.export_chrome_trace(trace_path).").format(err=err)) from None
    missing = [n for n, ms in totals.items() if ms <= 0]
    check(not missing, _("the trace names no region {missing}: run each region's function inside "
                         "`with record_function(name):`, inside the profiler's block.").format(missing=missing))
    wrong = {name: n for name, n in regions.calls.items() if n != 1}
    check(not wrong,
          _("profile_regions ran the regions {wrong} times (name: calls); the task says once each. A region can "
            "change state: run an optimizer step twice and the weights move twice, so what you profiled is not the "
            "step you were given. Call each region's function exactly once, inside its record_function (no warm-up "
            "calls, no second pass).").format(wrong=wrong))


def check_slowest_region(profile_regions: Callable, durations: Mapping[str, float]) -> None:
    """The returned name is the slowest region, as the trace itself says (not as a Python clock says)."""
    result, path, folder, regions = _profiled(profile_regions, durations)
    with folder:
        totals = troubleshoot.region_totals(path, list(durations)) if path.exists() else {}
    check(isinstance(result, str), _("profile_regions returned {result!r:.60}; expected the region's name, a "
                                     "str.").format(result=result))
    check(result in durations, _("profile_regions returned {result!r}, which is not one of the regions {regions}: "
                                 "keep only the record_function events (cat 'user_annotation').").format(
        result=result, regions=list(durations)))
    # The trace decides, not the durations the check asked for: on a busy grader a 4 ms sleep can take 56 ms, and
    # an answer that reads the trace right names that region.
    measured = totals if totals and all(v > 0 for v in totals.values()) else durations
    expected = max(measured, key=measured.get)
    fastest = min(measured, key=measured.get)
    if result == expected:
        return
    hints = []  # every mistake that gives this answer: the learner knows which one they made
    if result == regions.jumper and regions.ahead:
        hints.append(_("If you timed the regions with a Python clock: while {result!r} ran, the check moved "
                       "time.perf_counter, time.time and time.monotonic ahead by {jump:.0f} s, which the profiler "
                       "does not see, so an answer that follows a Python clock, not the trace, names it. Read the "
                       "trace back (json.load(open(trace_path))) and sum each region's 'dur' over its "
                       "'user_annotation' events.").format(result=result, jump=_CLOCK_JUMP_S))
    if result == fastest:
        hints.append(_("It is the fastest in the trace: take the largest total duration ('dur'), not the smallest."))
    if result == max(durations):
        hints.append(_("{result!r} is the last name in alphabetical order: max(totals) compares the dict's keys; "
                       "compare the durations: max(totals, key=totals.get).").format(result=result))
    hint = " " + (" ".join(hints) if hints else
                  _("Sum each region's 'dur' (microseconds) over its events and take the largest."))
    if measured is durations:
        hint += " " + _("(The trace names no region, so the check went by the durations it asked for: run each "
                        "region inside `with record_function(name):` and read the trace.)")
    raise CheckFailed(_("profile_regions returned {result!r}; the slowest region is {expected!r} (trace totals in "
                        "ms: {totals}).{hint}").format(
        result=result, expected=expected, totals={k: round(v, 1) for k, v in totals.items()}, hint=hint))
