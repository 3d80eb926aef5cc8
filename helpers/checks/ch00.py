"""Verdicts for chapter 00 (start): the warm-up parameter counter.

A grade cell hands :func:`check_count` one case (the learner's function, a
model, the count it must give); the models and counts stay in the cell, so a
hidden case stays hidden. The hint names the usual counting mistakes, told
apart by the number the learner's code gave.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from helpers.checks.core import check_equal, solved

__all__ = ["check_count", "counting_hint"]


def counting_hint(model: nn.Module, got: object, expected: int) -> str:
    """What a wrong count says about the code that produced it."""
    if isinstance(got, torch.Tensor):
        return "return a Python int (sum the p.numel() values, or call .item() on a one-element tensor)."
    if not isinstance(got, (int, float)) or isinstance(got, bool):
        return "return the number of elements as an int."
    everything = sum(p.numel() for p in model.parameters())
    if got == everything != expected:
        return ("that is every parameter, frozen ones included: frozen parameters (requires_grad=False) are not "
                "trained, so skip them.")
    if got > expected:
        return ("that is more than there are: a parameter was counted more than once. model.parameters() already "
                "walks every submodule; looping over model.modules() and calling parameters() on each counts the "
                "inner layers again (use parameters(recurse=False) there, or model.parameters() alone).")
    return ("count elements: sum p.numel() over model.parameters(). Counting tensors (len(list(model.parameters()))) "
            "or len(p) (the first dimension only) gives too little.")


def check_count(count_parameters: Callable[[nn.Module], int], model: nn.Module, expected: int,
                what: str | None = None) -> None:
    """``count_parameters(model)`` gives ``expected``, the number of trainable parameter elements."""
    got = solved(count_parameters, model)
    check_equal(got, expected, what or f"count_parameters({type(model).__name__}(...))",
                counting_hint(model, got, expected))
