"""Verdicts for chapter 00 (start): the warm-up parameter counter.

A grade cell hands :func:`check_count` one case (the learner's function, a
model, the count it must give); the sizes and counts stay in the cell, so a
hidden case stays hidden. The model builders here (:func:`conv_net`,
:func:`tied_model`) only shape the cases: parameters of every rank (a 4-d
convolution weight, 1-d biases, a 0-d scalar) and one weight shared by two
layers, so that a count that only works for ``nn.Linear`` (``shape[0] *
shape[1]``) or counts a shared weight twice cannot pass.

A shared (tied) parameter counts once: it is one tensor, stored once and
updated once per step, and ``model.parameters()`` yields it once. The hint
names the usual counting mistakes, told apart by recounting the model each
wrong way and comparing with the number the learner's code gave.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

from helpers.checks.core import CheckFailed, check_equal, solved
from helpers.i18n import N_, _

__all__ = ["ScaledConvNet", "TiedModel", "check_count", "conv_net", "counting_hint", "tied_model"]


class ScaledConvNet(nn.Module):
    """A convolution (4-d weight, 1-d bias), a linear head, and a learned 0-d temperature."""

    def __init__(self, channels: int, out_channels: int, kernel: int, classes: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(channels, out_channels, kernel)
        self.head = nn.Linear(out_channels, classes)
        self.temperature = nn.Parameter(torch.tensor(1.0))  # 0-d: shape (), one element

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        features = self.conv(x).mean(dim=(-2, -1))
        return self.head(features) / self.temperature


class TiedModel(nn.Module):
    """A language-model shape: the output layer reuses the embedding's weight (tied weights)."""

    def __init__(self, vocab: int, width: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.norm = nn.LayerNorm(width)
        self.out = nn.Linear(width, vocab)
        self.out.weight = self.embed.weight  # one Parameter, registered in two modules

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.out(self.norm(self.embed(tokens)))


def conv_net(channels: int = 3, out_channels: int = 4, kernel: int = 3, classes: int = 2) -> ScaledConvNet:
    """A :class:`ScaledConvNet`; a grade cell picks the sizes and states the count."""
    return ScaledConvNet(channels, out_channels, kernel, classes)


def tied_model(vocab: int = 10, width: int = 4) -> TiedModel:
    """A :class:`TiedModel`; a grade cell picks the sizes and states the count."""
    return TiedModel(vocab, width)


def _trainable(params) -> list[nn.Parameter]:
    return [p for p in params if p.requires_grad]


def _wrong_counts(model: nn.Module) -> dict[str, int]:
    """The model counted each usual wrong way, by name of the mistake."""
    own = [p for m in model.modules() for p in _trainable(m.parameters(recurse=False))]
    return {
        "frozen": sum(p.numel() for p in model.parameters()),
        "tied": sum(p.numel() for p in own),
        "nested": sum(p.numel() for m in model.modules() for p in _trainable(m.parameters())),
        "two_dims": sum(math.prod(p.shape[:2]) for p in _trainable(model.parameters())),
    }


# English here (N_), translated where a hint is shown (counting_hint).
_HINTS = {
    "frozen": N_("that is every parameter, frozen ones included: frozen parameters (requires_grad=False) are not "
                 "trained, so skip them."),
    "tied": N_("a shared (tied) parameter was counted once per layer that holds it: it is one tensor, so it counts "
               "once. model.parameters() yields each parameter once; a loop over model.modules() with "
               "parameters(recurse=False) meets a shared one in every module that holds it (skip those already "
               "seen, e.g. by id(p))."),
    "nested": N_("a parameter was counted more than once: model.parameters() already walks every submodule; calling "
                 "parameters() on each module of model.modules() counts the inner layers again (use "
                 "model.parameters() alone)."),
    "two_dims": N_("shape[0] * shape[1] is the size of a 2-d weight only: a convolution weight has 4 dimensions "
                   "(out, in, kh, kw), a bias 1 and a scalar parameter 0. p.numel() counts the elements of any "
                   "shape."),
}


def counting_hint(model: nn.Module, got: object, expected: int) -> str:
    """What a wrong count says about the code that produced it."""
    if isinstance(got, torch.Tensor):
        return _("return a Python int (sum the p.numel() values, or call .item() on a one-element tensor).")
    if not isinstance(got, (int, float)) or isinstance(got, bool):
        return _("return the number of elements as an int.")
    for mistake, count in _wrong_counts(model).items():
        if got == count != expected:
            return _(_HINTS[mistake])
    if got > expected:
        return _("that is more than there are: a parameter was counted more than once, or a frozen one was "
                 "counted. Sum p.numel() over model.parameters() for the parameters with requires_grad.")
    return _("count elements: sum p.numel() over model.parameters(). Counting tensors "
             "(len(list(model.parameters()))), len(p) (the first dimension only) or a product of some of the sizes "
             "gives too little.")


def _call(count_parameters: Callable[[nn.Module], int], model: nn.Module, what: str) -> object:
    """``count_parameters(model)``; a crash on a 0-d or 1-d parameter is named, not shown as a traceback."""
    try:
        return solved(count_parameters, model)
    except (IndexError, TypeError) as err:
        shapes = sorted({tuple(p.shape) for p in model.parameters()}, key=len)
        raise CheckFailed(_(
            "{what} raised {kind}: {err}. This model's parameters have shapes {shapes}: a bias is 1-d and a scalar "
            "parameter 0-d (shape ()), so shape[1], shape[0] or len(p) does not exist for every parameter. "
            "p.numel() counts the elements of any shape."
        ).format(what=what, kind=type(err).__name__, err=err, shapes=", ".join(map(str, shapes)))) from None


def check_count(count_parameters: Callable[[nn.Module], int], model: nn.Module, expected: int,
                what: str | None = None) -> None:
    """``count_parameters(model)`` gives ``expected``, the number of trainable parameter elements."""
    what = what or f"count_parameters({type(model).__name__}(...))"
    got = _call(count_parameters, model, what)
    check_equal(got, expected, what, counting_hint(model, got, expected))
