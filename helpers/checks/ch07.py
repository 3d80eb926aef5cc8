"""Verdicts for chapter 07 (troubleshooting): a fixed training script, a diagnosis, a profiled step.

Every function takes the case's inputs as arguments (seeds, sizes,
exceptions, region durations): the cases themselves, visible and hidden,
live in the grade cells. Each verdict names the symptom a remaining bug
gives, so a learner knows which bug is still there.
"""

from __future__ import annotations

import math
import tempfile
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from helpers import troubleshoot
from helpers.checks.core import CheckFailed, check, solved, warnings_dropped

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
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    total = 0.0
    for x, y in batches:
        opt.zero_grad(set_to_none=True)
        loss = nn.functional.cross_entropy(model(x), y - 1)
        loss.backward()
        opt.step()
        total += loss.item()
    return total / len(batches)


def _number(value: Any, what: str, meaning: str = "the mean loss") -> float:
    """A float from the learner's result; a tensor that still holds a graph is named as such."""
    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            raise CheckFailed(f"{what} returned a tensor of shape {tuple(value.shape)}; expected one number, {meaning}.")
        return float(value.detach().cpu().item())
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise CheckFailed(f"{what} returned {type(value).__name__} ({value!r:.60}); expected {meaning} as a float.")


def _train(train_epoch: Callable, model: nn.Module, lr: float, batches: list, device: Any = "cpu") -> Any:
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    calls: list[int] = []
    hook = model.register_forward_pre_hook(lambda m, args: calls.append(1))
    with warnings_dropped():
        try:
            result = solved(train_epoch, model, optimizer, batches, device)
            check(calls, "train_epoch never ran the model on the batches: it must train one pass over them.")
            return result
        except IndexError as err:
            raise CheckFailed(
                f"train_epoch raised IndexError: {err} Labels out of range: the data's classes are numbered "
                f"1..C, and cross-entropy wants 0..C-1. Shift the labels (y - 1) before the loss.") from None
        finally:
            hook.remove()


def check_labels(train_epoch: Callable, features: int, classes: int, seed: int, lr: float = 0.1) -> None:
    """One batch whose labels reach C: train_epoch runs, and returns the loss of labels shifted to 0..C-1."""
    batches = troubleshoot.numbered_class_batches(1, 64, features, classes, seed=seed)
    check(int(batches[0][1].max()) == classes, "internal: the case must contain the highest label")
    model = classifier(features, classes, seed)
    with torch.no_grad():
        expected = nn.functional.cross_entropy(model(batches[0][0]), batches[0][1] - 1).item()
    got = _number(_train(train_epoch, model, lr, batches), "train_epoch")
    if not math.isclose(got, expected, rel_tol=1e-3, abs_tol=1e-4):
        raise CheckFailed(
            f"train_epoch on one batch returned a mean loss of {got:.5f}; the cross-entropy of the batch with its "
            f"labels numbered 1..{classes} shifted to 0..{classes - 1} is {expected:.5f}. Labels out of range are fixed "
            "by shifting every label (y - 1), not by clamping or dropping some; the loss is the mean over the "
            "batch, computed before the optimizer step.")


def check_same_device(train_epoch: Callable, features: int, classes: int, seed: int) -> None:
    """On the meta device (a stand-in second device), the model and every batch end up on it together."""
    batches = troubleshoot.numbered_class_batches(2, 16, features, classes - 1, seed=seed)
    model = classifier(features, classes, seed)
    seen: list[str] = []
    model.register_forward_pre_hook(lambda m, args: seen.append(str(args[0].device)))
    try:
        _train(train_epoch, model, 0.1, batches, torch.device("meta"))
    except CheckFailed as err:
        if "different devices" in str(err) or "expected device" in str(err):
            raise CheckFailed(
                "train_epoch(model, optimizer, batches, device) with device=meta failed: model and data on "
                "different devices. The model was moved and the batches were not (or the other way round): "
                "x = x.to(device) and y = y.to(device) for every batch, model.to(device) once.") from None
        raise
    except (NotImplementedError, RuntimeError) as err:  # meta tensors hold no data: reading a number fails
        if "expected device" in str(err) or "same device" in str(err):
            raise CheckFailed(f"model and data on different devices: {err}") from None
    check(seen and all(d == "meta" for d in seen),
          f"with device=meta the model's inputs were on {sorted(set(seen)) or 'no device (never called)'}: move "
          "each batch to the device you are given.")


def check_zero_grad(train_epoch: Callable, features: int, classes: int, seed: int, n_batches: int = 4) -> None:
    """When each step's gradient is computed, the parameters' .grad holds nothing from the step before."""
    batches = troubleshoot.numbered_class_batches(n_batches, 16, features, classes - 1, seed=seed)
    model = classifier(features, classes, seed)
    stale: list[bool] = []
    for p in model.parameters():
        p.register_hook(lambda g, p=p: stale.append(p.grad is not None and bool(p.grad.abs().sum() > 0)))
    _train(train_epoch, model, 0.1, batches)
    check(stale, "train_epoch never called backward: no gradient was computed.")
    check(not any(stale),
          "gradients accumulate from step to step: when a step's backward ran, .grad still held the previous "
          "step's gradient, so every update uses the sum of all gradients so far. Call optimizer.zero_grad() "
          "before each backward.")


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
    check(len(alive) >= 4, f"train_epoch ran the model {len(alive)} times on {n_batches} batches; expected one "
                           "forward pass per batch.")
    check(max(alive) <= 2,
          f"memory grows step to step: at the forward pass of step {len(alive)}, the autograd graphs of "
          f"{alive[-1]} earlier steps were still alive (at most the previous one should be). Something keeps every "
          "step's graph, e.g. total_loss += loss or losses.append(loss) (tensors with their graphs): keep "
          "loss.item(), a plain number.")
    if isinstance(result, torch.Tensor) and result.requires_grad:
        raise CheckFailed("memory grows step to step: train_epoch returned a tensor that still holds the graph of "
                          "every step (total_loss += loss); accumulate loss.item() and return a float.")


def check_finite(train_epoch: Callable, features: int, classes: int, seed: int, scale: float = 200.0) -> None:
    """With very large logits the loss and the weights stay finite (no log(0))."""
    batches = troubleshoot.numbered_class_batches(3, 32, features, classes - 1, seed=seed, scale=scale)
    model = classifier(features, classes, seed)
    got = _number(_train(train_epoch, model, 0.01, batches), "train_epoch")
    bad = troubleshoot.nonfinite_grads(model) + [n for n, p in model.named_parameters()
                                                 if not bool(torch.isfinite(p).all())]
    check(math.isfinite(got) and not bad,
          f"NaN from log(0): with large logits the mean loss was {got} and non-finite values reached "
          f"{sorted(set(bad)) or 'the loss'}. softmax rounds small probabilities to exactly 0 and log(0) = -inf; "
          "use F.cross_entropy on the logits (log_softmax inside), which never takes log(0).")


def check_eval_no_grad(evaluate: Callable, features: int, classes: int, seed: int) -> None:
    """evaluate records no graph (no_grad or inference_mode), leaves grad mode on, and returns the accuracy."""
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
    check(recorded, "evaluate never ran the model on the batches.")
    check(not any(recorded),
          "evaluation without no_grad: autograd recorded a graph for every evaluation batch (memory and time for "
          "nothing; model.eval() alone does not stop it). Wrap the loop in `with torch.no_grad():` (or "
          "torch.inference_mode()).")
    check(not left_off, "after evaluate, gradients stay off for the whole program: use `with torch.no_grad():`, "
                        "not torch.set_grad_enabled(False).")
    got = _number(got, "evaluate", "the accuracy")
    check(math.isclose(got, expected, abs_tol=1e-6),
          f"evaluate returned an accuracy of {got:.4f}; expected {expected:.4f} (predicted class + 1 compared with "
          "the labels numbered 1..C, over all samples).")


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
        for _ in range(epochs):
            try:
                got.append(_number(solved(train_epoch, model, optimizer, batches, "cpu"), "train_epoch"))
            except IndexError as err:
                raise CheckFailed(f"train_epoch raised IndexError: {err} Labels out of range (numbered 1..C).") from None
    check(calls, "train_epoch never ran the model on the batches: it must train one pass over them.")
    expected = [_reference_epoch(twin, lr, batches) for _ in range(epochs)]
    close = all(math.isclose(g, e, rel_tol=2e-3, abs_tol=1e-4) for g, e in zip(got, expected))
    check(close, f"the mean loss per epoch was {[round(g, 4) for g in got]}; a correct loop gives "
                 f"{[round(e, 4) for e in expected]}. The loss does not match the reference: look for gradients "
                 "that are not zeroed before backward, labels not shifted to 0..C-1, or a step that is skipped.")
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
    ("index", "nan"): " The source blames device-side asserts on NaN/Inf; most often it is an out-of-range index "
                      "(a label >= the number of classes, a negative label, an Embedding index).",
}


def _diagnosis(diagnose: Callable, err: BaseException) -> tuple[str, str]:
    with warnings_dropped():
        result = solved(diagnose, err)
    if not (isinstance(result, tuple) and len(result) == 2 and all(isinstance(r, str) for r in result)):
        raise CheckFailed(f"diagnose returned {result!r:.80}; expected a tuple (category, fix) of two strings.")
    return result[0].strip().lower(), result[1]


def check_diagnoses(diagnose: Callable, cases: Sequence[tuple[BaseException, str]]) -> None:
    """Each exception gets its expected category."""
    for err, expected in cases:
        category, _ = _diagnosis(diagnose, err)
        text = f"{type(err).__name__}: {str(err).splitlines()[0][:90]}"
        check(category == expected,
              f"diagnose({text}) gave the category {category!r}; expected {expected!r}."
              + _SOURCE_HINT.get((expected, category), " Read the message, not only the exception's type: torch "
                                                       "raises RuntimeError for most of these."))


_FIX_WORDS = {
    "index": ("label", "index", "class", "range", "bound"),
    "device": ("device", ".to("),
    "dtype": ("dtype", "long", "float", "type"),
    "shape": ("shape", "size", "reshape", "view", "features", "dimension"),
    "range": ("sigmoid", "logits", "withlogits", "[0, 1]", "probabilit"),
    "memory": ("batch", "memory", "autocast", "amp", "accumulat", "no_grad", "inference_mode", "precision"),
    "nan": ("nan", "inf", "finite", "clip", "learning rate", "lr", "log_softmax", "anomaly"),
    "no-cuda": ("cuda", "device", "is_available", "cpu"),
}


def check_fixes_named(diagnose: Callable, cases: Sequence[tuple[BaseException, str]]) -> None:
    """Each fix is a sentence that names what to change, and differs between categories."""
    fixes: dict[str, str] = {}
    for err, expected in cases:
        category, fix = _diagnosis(diagnose, err)
        check_diagnoses(diagnose, [(err, expected)])  # a fix for the wrong cause fixes nothing
        words = _FIX_WORDS.get(expected, ())
        check(fix.strip() and any(w in fix.lower() for w in words),
              f"for a {expected!r} error the fix {fix!r:.80} names none of {list(words)}: say what to change.")
        fixes[category] = fix
    check(len(set(fixes.values())) == len(fixes),
          f"the same fix was given for different categories ({sorted(fixes)}): each cause has its own fix.")


# --------------------------------------------------------------------------- exercise 3: profile and read


def _sleeper(seconds: float) -> Callable[[], None]:
    return lambda: time.sleep(seconds)


def _profiled(profile_regions: Callable, durations: Mapping[str, float]) -> tuple[Any, Path, tempfile.TemporaryDirectory]:
    folder = tempfile.TemporaryDirectory()
    path = Path(folder.name) / "trace.json"
    regions = {name: _sleeper(s) for name, s in durations.items()}
    with troubleshoot.native_stderr(), warnings_dropped():  # the profiler's C++ logging would reach stderr
        result = solved(profile_regions, regions, str(path))
    return result, path, folder


def check_trace_names(profile_regions: Callable, durations: Mapping[str, float]) -> None:
    """The trace file exists, is a Chrome trace, and names every region (record_function)."""
    _, path, folder = _profiled(profile_regions, durations)
    with folder:
        check(path.exists(), f"no trace file at trace_path after profile_regions: call prof.export_chrome_trace"
                             f"(trace_path) after the profiler's block.")
        try:
            totals = troubleshoot.region_totals(path, list(durations))
        except ValueError as err:  # json.JSONDecodeError is a ValueError
            raise CheckFailed(f"the file at trace_path is not a Chrome trace ({err}): export it with "
                              "prof.export_chrome_trace(trace_path).") from None
    missing = [n for n, ms in totals.items() if ms <= 0]
    check(not missing, f"the trace names no region {missing}: run each region's function inside "
                       "`with record_function(name):`, inside the profiler's block.")


def check_slowest_region(profile_regions: Callable, durations: Mapping[str, float]) -> None:
    """The returned name is the slowest region, as the trace itself says."""
    result, path, folder = _profiled(profile_regions, durations)
    with folder:
        totals = troubleshoot.region_totals(path, list(durations)) if path.exists() else {}
    check(isinstance(result, str), f"profile_regions returned {result!r:.60}; expected the region's name, a str.")
    check(result in durations, f"profile_regions returned {result!r}, which is not one of the regions "
                               f"{list(durations)}: keep only the record_function events (cat 'user_annotation').")
    # The trace decides, not the durations the check asked for: on a busy grader a 4 ms sleep can take 56 ms, and
    # an answer that reads the trace right names that region.
    measured = totals if totals and all(v > 0 for v in totals.values()) else durations
    expected = max(measured, key=measured.get)
    fastest = min(measured, key=measured.get)
    hint = (" That is the fastest: take the largest total duration ('dur'), not the smallest."
            if result == fastest else " Sum each region's 'dur' (microseconds) over its events and take the largest.")
    check(result == expected, f"profile_regions returned {result!r}; the slowest region is {expected!r} "
                              f"(trace totals in ms: { {k: round(v, 1) for k, v in totals.items()} }).{hint}")
