"""The few small models and the seeding every chapter shares.

Small on purpose: the course must run on a 2-core laptop in seconds, and the
ideas (devices, memory, precision) do not need a big model to show.
"""

from __future__ import annotations

import random

import numpy as np
import torch
from torch import nn

__all__ = ["MLP", "SimpleModel", "flat_grads", "flat_params", "make_regression", "set_seed"]


def set_seed(seed: int = 0) -> None:
    """Seed Python, NumPy and torch (every device) so a chapter reruns the same.

    Called explicitly in each chapter's first cell, never as a side effect of
    importing ``helpers``.
    """
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # seeds CUDA and MPS generators too


class SimpleModel(nn.Module):
    """The source document's model: one linear layer from 10 features to 1."""

    def __init__(self, in_features: int = 10, out_features: int = 1) -> None:
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x)


class MLP(nn.Module):
    """A small multi-layer perceptron: Linear, ReLU, ..., Linear."""

    def __init__(self, in_features: int = 32, hidden: int = 64, out_features: int = 1, depth: int = 2) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        width = in_features
        for _ in range(depth):
            layers += [nn.Linear(width, hidden), nn.ReLU()]
            width = hidden
        layers.append(nn.Linear(width, out_features))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def make_regression(
    n: int = 256, in_features: int = 32, out_features: int = 1, seed: int = 0, noise: float = 0.01
) -> tuple[torch.Tensor, torch.Tensor]:
    """A learnable synthetic regression task ``y = tanh(x W) + noise`` on the CPU.

    Generated, not downloaded: the course machines reach no data hub.
    """
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, in_features, generator=g)
    w = torch.randn(in_features, out_features, generator=g) / in_features**0.5
    y = torch.tanh(x @ w) + noise * torch.randn(n, out_features, generator=g)
    return x, y


def _chosen(model: nn.Module, trainable_only: bool) -> list[nn.Parameter]:
    return [p for p in model.parameters() if p.requires_grad or not trainable_only]


def flat_params(model: nn.Module, trainable_only: bool = False) -> torch.Tensor:
    """All parameters as one fp32 vector (a copy): compare two models, or one before and after a step.

    Used by chapter 05 (what a skipped step leaves unchanged) and by the checks.
    """
    return torch.cat([p.detach().float().flatten() for p in _chosen(model, trainable_only)])


def flat_grads(model: nn.Module, trainable_only: bool = False) -> torch.Tensor:
    """All gradients as one fp32 vector, zeros where a ``.grad`` is None (not computed yet).

    Chapter 03 (accumulated gradients against the big batch's) and chapter 05
    (scaled against unscaled gradients) read gradients this way.
    """
    return torch.cat([(p.grad.detach().float().flatten() if p.grad is not None
                       else torch.zeros(p.numel(), device=p.device)) for p in _chosen(model, trainable_only)])
